// Per-subscription gauges after a leader change: only the leader maintains breaker state, dead
// letters and endpoint health, so only the leader exports them. A replica that stops leading
// drops those series at once (`sum by` over replicas does not double, alerts do not stick) and
// does not set them again while it stands by.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { apply, create, delivery, subscription } from "../helpers/kube.js";
import { startCandidate, type TestOperator } from "../helpers/operator.js";
import { sample } from "../helpers/process.js";
import { Receiver } from "../helpers/receiver.js";

const LEADER_GAUGES = ["webhook_breaker_state", "webhook_dlq_entries", "webhook_endpoint_health"];

async function scrape(op: TestOperator): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${op.op.metricsPort}/metrics`);
  return res.text();
}

/** The exported series of the leader-only gauges that carry namespace `ns`. */
function leaderSeries(text: string, ns: string): string[] {
  return text.split("\n").filter((l) => LEADER_GAUGES.some((g) => l.startsWith(`${g}{`)) && l.includes(`namespace="${ns}"`));
}

describe("metrics after a leader change", () => {
  let ns: string;
  let down: Receiver;
  const ops: TestOperator[] = [];

  const candidate = (name: string) => startCandidate(ns, name, { leaseName: "hookline-metrics-test" });

  beforeAll(async () => {
    ns = await createNamespace("leader-metrics");
    down = await Receiver.start(() => 500);
  });
  afterAll(async () => {
    for (const op of ops.reverse()) await op.stop().catch(() => undefined);
    await down?.close();
    await deleteNamespace(ns);
  });

  it("the old leader stops exporting per-subscription gauges; the new leader exports them", async () => {
    const first = await candidate("replica-a");
    ops.push(first);
    await waitFor(() => first.op.isLeader, { description: "replica-a leads" });
    const second = await candidate("replica-b");
    ops.push(second);

    // One attempt each, then dead-lettered; two failures open the breaker (cooldown 300 s).
    await apply(subscription(ns, "down", { url: down.url(), retry: { maxAttempts: 1 }, circuitBreaker: { failureThreshold: 2, cooldown: "300s", whenOpen: "DeadLetter" } }));
    await create([delivery(ns, "d-1", "down"), delivery(ns, "d-2", "down")]);
    const labels = { namespace: ns, subscription: "down" };
    await waitFor(async () => {
      const t = await scrape(first);
      return sample(t, "webhook_breaker_state", labels) === 1 && sample(t, "webhook_dlq_entries", labels) === 2;
    }, { description: "the leader exports an Open breaker and 2 dead letters" });
    expect(leaderSeries(await scrape(second), ns)).toEqual([]);
    // Every replica counts Lease answers read too late, from 0 (none here).
    for (const op of [first, second]) {
      const text = await scrape(op);
      for (const write of ["acquire", "renew"]) expect(text).toContain(`hookline_leader_late_lease_answers_total{write="${write}"} 0\n`);
    }

    // replica-a stops leading and releases the Lease; replica-b takes over.
    await first.op.elector!.stop(true);
    await waitFor(() => second.op.isLeader, { description: "replica-b leads" });
    await waitFor(async () => {
      const t = await scrape(second);
      return sample(t, "webhook_breaker_state", labels) === 1 && sample(t, "webhook_dlq_entries", labels) === 2;
    }, { description: "the new leader exports the Open breaker and the 2 dead letters" });
    expect(first.op.isLeader).toBe(false);
    expect(leaderSeries(await scrape(first), ns)).toEqual([]);

    // A new dead letter (the breaker is Open: dead-lettered at once by the new leader) moves
    // the new leader's gauge; the old leader, which still watches, sets nothing.
    await create(delivery(ns, "d-3", "down"));
    await waitFor(async () => sample(await scrape(second), "webhook_dlq_entries", labels) === 3, { description: "the new leader counts 3 dead letters" });
    expect(leaderSeries(await scrape(first), ns)).toEqual([]);
  });
});
