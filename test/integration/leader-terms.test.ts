// A replica that leads a second time resumes each endpoint's breaker from the subscription's
// status, not from what it held in memory at the end of its earlier term: another leader may
// have probed and re-opened the breaker since. Found by the soak (invariant 6, "none while the
// breaker is Open"): a replica that got the Lease back probed at once, on the probe time of its
// earlier term, while the status said the breaker stayed Open for seconds more.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { apply, create, delivery, getObj, subscription } from "../helpers/kube.js";
import { startCandidate, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";

const COOLDOWN_MS = 5_000;

describe("a replica that leads again", () => {
  let ns: string;
  let down: Receiver;
  const ops: TestOperator[] = [];

  const candidate = (name: string) => startCandidate(ns, name, { leaseName: "hookline-terms-test", retryPeriodMs: 200 });

  const breaker = async () => (await getObj("whsub", ns, "down"))?.status?.breaker as { state?: string; nextProbeAt?: string } | undefined;

  beforeAll(async () => {
    ns = await createNamespace("leader-terms");
    down = await Receiver.start(() => 500);
  });
  afterAll(async () => {
    for (const op of ops.reverse()) await op.stop().catch(() => undefined);
    await down?.close();
    await deleteNamespace(ns);
  });

  it("resumes the breaker another leader re-opened meanwhile, and sends no probe before that leader's probe time", async () => {
    const a = await candidate("replica-a");
    ops.push(a);
    await waitFor(() => a.op.isLeader, { description: "replica-a leads" });
    const b = await candidate("replica-b");
    ops.push(b);

    // Term 1 (replica-a): one failure opens the breaker; the delivery keeps retrying behind it.
    await apply(subscription(ns, "down", { url: down.url(), retry: { maxAttempts: 50, initialBackoff: "100ms", maxBackoff: "200ms" }, circuitBreaker: { failureThreshold: 1, cooldown: `${COOLDOWN_MS / 1000}s` } }));
    await create(delivery(ns, "d-1", "down"));
    const firstOpen = await waitFor(async () => {
      const s = await breaker();
      return s?.state === "Open" && s.nextProbeAt ? Date.parse(s.nextProbeAt) : undefined;
    }, { description: "replica-a opened the breaker (in status)" });

    // replica-b leads: at replica-a's probe time it probes, fails, and opens the breaker again.
    await a.op.elector!.stop(true);
    await waitFor(() => b.op.isLeader, { description: "replica-b leads" });
    const reopenedUntil = await waitFor(async () => {
      const s = await breaker();
      return s?.state === "Open" && s.nextProbeAt && Date.parse(s.nextProbeAt) > firstOpen ? Date.parse(s.nextProbeAt) : undefined;
    }, { timeoutMs: COOLDOWN_MS + 10_000, description: "replica-b probed and re-opened the breaker (in status)" });
    const probesBefore = down.requests.length;

    // replica-a leads again, after its old probe time and before replica-b's.
    a.op.elector!.start();
    await b.op.elector!.stop(true);
    await waitFor(() => a.op.isLeader, { description: "replica-a leads again" });
    const tookOverAt = Date.now();
    expect(tookOverAt).toBeLessThan(reopenedUntil - 1_000);

    // Its next request is the probe replica-b's opening allows, not one on its own stale time.
    const next = (await down.waitForRequests(probesBefore + 1, COOLDOWN_MS + 10_000))[probesBefore]!;
    expect(next.at).toBeGreaterThanOrEqual(reopenedUntil - 50);
  });
});
