import { describe, expect, it } from "vitest";
import { metricsDisagreements, ROLLUP_LOSS, rollupLossWindows } from "./invariants.js";

const at = (s: number) => Date.parse("2026-12-07T22:33:00.000Z") + s * 1000;

describe("rollupLossWindows (invariant 7's slack for a leader's unwritten count increments)", () => {
  it("a SIGKILL: the increments since its last rollup, at most one interval back", () => {
    expect(rollupLossWindows([{ kind: "leader-sigkill", start: at(40), end: at(44) }])).toEqual([[at(40) - ROLLUP_LOSS.intervalMs, at(41)]]);
  });

  it("a faults-free run and faults that stop no leader: none", () => {
    expect(rollupLossWindows([])).toEqual([]);
    expect(rollupLossWindows([{ kind: "receiver-restart", start: at(10), end: at(12) }])).toEqual([]);
  });

  it("a leader lost after an API outage began: from one interval before the outage (its rollups failed from then on)", () => {
    const faults = [
      { kind: "apiserver-restart", start: at(13.007), end: at(25.693) },
      { kind: "lease-lost", start: at(15.756), end: at(29.512) },
    ];
    expect(rollupLossWindows(faults)).toEqual([[at(13.007) - ROLLUP_LOSS.intervalMs, at(16.756)]]);
  });

  it("an outage that ended long before the kill does not widen it", () => {
    const faults = [
      { kind: "etcd-restart", start: at(0), end: at(5) },
      { kind: "leader-sigkill", start: at(60), end: at(64) },
    ];
    expect(rollupLossWindows(faults)).toEqual([[at(60) - ROLLUP_LOSS.intervalMs, at(61)]]);
  });
});

describe("metricsDisagreements: status.deliveries against the deliveries", () => {
  const sub = (succeeded: number) => ({ metadata: { name: "sub-3", namespace: "soak-b" }, status: { deliveries: { pending: 0, succeeded, deadLettered: 0, discarded: 0 } } });
  const succeededAt = (s: number) => ({ metadata: { namespace: "soak-b" }, spec: { subscriptionRef: { name: "sub-3" } }, status: { phase: "Succeeded", finishedAt: new Date(at(s)).toISOString() } });
  const none = () => [];

  it("seed 1474577230: three deliveries succeeded in the 5 s before an API outage, then the leader lost its Lease; none rolled up: within the slack", () => {
    const faults = [
      { kind: "apiserver-restart", start: at(13.007), end: at(25.693) },
      { kind: "lease-lost", start: at(15.756), end: at(29.512) },
    ];
    const deliveries = [succeededAt(8.498), succeededAt(10.039), succeededAt(11.147), succeededAt(55.781), succeededAt(55.782)];
    expect(metricsDisagreements([sub(2)], deliveries, none, rollupLossWindows(faults))).toEqual([]);
  });

  it("more missing than finished in the windows, or more counted than there are: a disagreement", () => {
    const windows = rollupLossWindows([{ kind: "leader-sigkill", start: at(40), end: at(44) }]);
    const deliveries = [succeededAt(10), succeededAt(38), succeededAt(39)];
    expect(metricsDisagreements([sub(1)], deliveries, none, windows)).toEqual([]);
    expect(metricsDisagreements([sub(0)], deliveries, none, windows).map((d) => d.message)).toEqual(["status.deliveries.succeeded 0 but 3 deliveries are succeeded (up to 2 may be lost to leader crashes)"]);
    expect(metricsDisagreements([sub(4)], deliveries, none, windows).map((d) => d.message)).toEqual(["status.deliveries.succeeded 4 but 3 deliveries are succeeded (up to 2 may be lost to leader crashes)"]);
  });
});
