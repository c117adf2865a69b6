// Leader election and failover with two real operator processes: the standby does no delivery
// work, takes over within 2 s of a SIGTERMed leader (which releases its Lease) and within the
// lease duration of a SIGKILLed one; every delivery ends Succeeded, with its original webhook-id.
// A leader paused past its Lease (SIGSTOP) starts no request once it runs again.
import { afterEach, describe, expect, it } from "vitest";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { apply, create, delivery, listObjs, subscription } from "../helpers/kube.js";
import { sample, spawnOperator, type OperatorProcess } from "../helpers/process.js";
import { Receiver } from "../helpers/receiver.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

const LEASE_MS = 4_000;

async function candidate(ns: string, name: string): Promise<OperatorProcess> {
  const p = await spawnOperator({
    name,
    namespaces: [ns],
    env: {
      LEADER_ELECT: "true",
      LEADER_ELECTION_NAMESPACE: ns,
      LEADER_ELECTION_LEASE_NAME: "hookline-test",
      LEADER_ELECTION_LEASE_DURATION_MS: String(LEASE_MS),
      LEADER_ELECTION_RENEW_DEADLINE_MS: "3000",
      LEADER_ELECTION_RETRY_PERIOD_MS: "500",
      WEBHOOK_DRAIN_TIMEOUT_MS: "5000",
    },
  });
  cleanups.push(async () => {
    if (p.child.exitCode === null) p.kill("SIGKILL");
    await p.exited;
  });
  return p;
}

const isLeader = (p: OperatorProcess) => p.lines.some((l) => l.msg === "became leader");

async function pair(ns: string) {
  const a = await candidate(ns, "op-a");
  await a.waitForLog((l) => l.msg === "became leader", 10_000, "leadership");
  const b = await candidate(ns, "op-b");
  return { leader: a, standby: b };
}

function webhookIds(r: Receiver): Map<string, number> {
  const m = new Map<string, number>();
  for (const q of r.requests) m.set(String(q.headers["webhook-id"]), (m.get(String(q.headers["webhook-id"])) ?? 0) + 1);
  return m;
}

async function load(ns: string, r: Receiver, n: number): Promise<Set<string>> {
  const names = Array.from({ length: n }, (_, i) => `ld-${String(i).padStart(3, "0")}`);
  const ids = new Set(names.map((x) => `evt-${x}`));
  // Created while paused, then released at once: the load does not wait for kubectl.
  await apply(subscription(ns, "load", { url: r.url(), maxInFlight: 10, paused: true }));
  await create(names.map((x) => delivery(ns, x, "load", { eventId: `evt-${x}` })));
  await apply(subscription(ns, "load", { url: r.url(), maxInFlight: 10, paused: false }));
  return ids;
}

describe("leader election and failover", () => {
  it("the standby does no delivery work while the leader runs", async () => {
    const ns = await createNamespace("standby");
    cleanups.push(() => deleteNamespace(ns));
    const r = await Receiver.start(() => 200);
    cleanups.push(() => r.close());
    const { leader, standby } = await pair(ns);
    await load(ns, r, 10);
    await waitFor(async () => (await listObjs("whdel", ns)).every((d) => d.status?.phase === "Succeeded"), { description: "10 delivered" });
    const [lm, sm] = [await leader.metrics(), await standby.metrics()];
    expect(sample(lm, "hookline_leader")).toBe(1);
    expect(sample(sm, "hookline_leader")).toBe(0);
    expect(sample(lm, "webhook_delivery_attempts_total")).toBe(10);
    expect(sample(sm, "webhook_delivery_attempts_total")).toBe(0);
    expect(sample(sm, "hookline_kube_api_requests_total", { resource: "webhookdeliveries/status" })).toBe(0);
    expect(isLeader(standby)).toBe(false);
    // The standby serves probes and metrics.
    expect((await fetch(`http://127.0.0.1:${standby.metricsPort}/metrics`)).status).toBe(200);
  });

  /** Two candidates, 200 deliveries; the leader gets `signal` once 40 have arrived. */
  async function failover(prefix: string, signal: NodeJS.Signals, takeoverMs: number) {
    const ns = await createNamespace(prefix);
    cleanups.push(() => deleteNamespace(ns));
    const r = await Receiver.start(() => ({ status: 200, delayMs: 50 }));
    cleanups.push(() => r.close());
    const { leader, standby } = await pair(ns);
    const ids = await load(ns, r, 200);
    await r.waitForRequests(40);
    leader.kill(signal);
    const exit = await leader.exited;
    await standby.waitForLog((l) => l.msg === "became leader", takeoverMs, "standby takes over");
    await waitFor(async () => (await listObjs("whdel", ns)).filter((d) => d.status?.phase === "Succeeded").length === 200, { description: "200 Succeeded", timeoutMs: 60_000 });
    const seen = webhookIds(r);
    expect(seen.size).toBe(200);
    expect([...seen.keys()].every((id) => ids.has(id))).toBe(true);
    // A request in flight at the kill may be answered after the exit: skip the first 100 ms.
    const firstAfter = r.requests.find((q) => q.at > exit.at + (signal === "SIGKILL" ? 100 : 0));
    expect(firstAfter).toBeDefined();
    return { exit, firstAfterMs: firstAfter!.at - exit.at, duplicates: [...seen.values()].reduce((s, n) => s + n - 1, 0), maxPerId: Math.max(...seen.values()) };
  }

  it("SIGTERM of the leader under load: the standby delivers within 2 s of its exit; 200 Succeeded, no lost or foreign ids", async () => {
    const { exit, firstAfterMs, duplicates } = await failover("failover-term", "SIGTERM", 5_000);
    expect(exit.code).toBe(0);
    expect(firstAfterMs).toBeLessThan(2_000);
    expect(duplicates).toBe(0); // a drained leader writes every outcome before it lets go
  });

  it("SIGKILL of the leader under load: the standby takes over within the lease duration; at most one duplicate per in-flight delivery", async () => {
    const { firstAfterMs, duplicates, maxPerId } = await failover("failover-kill", "SIGKILL", LEASE_MS + 3_000);
    expect(firstAfterMs).toBeLessThan(LEASE_MS + 1_500);
    expect(duplicates).toBeLessThanOrEqual(10); // maxInFlight: at most the requests in flight at the kill
    expect(maxPerId).toBeLessThanOrEqual(2);
  });

  it("SIGSTOP of the leader past its Lease (a long pause): the standby takes over, and once it runs again the old leader starts no request", async () => {
    const ns = await createNamespace("failover-stop");
    cleanups.push(() => deleteNamespace(ns));
    const r = await Receiver.start(() => ({ status: 200, delayMs: 100 }));
    cleanups.push(() => r.close());
    const { leader, standby } = await pair(ns);
    // A backlog that drains at about 20 a second: when the pause ends, the old leader still has
    // requests in flight, and deliveries waiting for their slots.
    await apply(subscription(ns, "slow", { url: r.url(), maxInFlight: 2, paused: true }));
    await create(Array.from({ length: 300 }, (_, i) => delivery(ns, `d-${String(i).padStart(3, "0")}`, "slow")));
    await apply(subscription(ns, "slow", { url: r.url(), maxInFlight: 2, paused: false }));
    await r.waitForRequests(20);

    leader.kill("SIGSTOP");
    try {
      await standby.waitForLog((l) => l.msg === "became leader", LEASE_MS + 10_000, "the standby's leadership");
      await r.waitForRequests(r.requests.length + 10);
    } finally {
      leader.kill("SIGCONT");
    }
    const resumedAt = Date.now();
    await leader.waitForLog((l) => typeof l.msg === "string" && l.msg.startsWith("lost leadership"), 10_000, "the old leader seeing it lost the Lease");
    // Every attempt the old leader logged after it ran again had started before the pause.
    const started = leader.lines.filter((l) => l.msg === "webhook_attempt").map((l) => Date.parse(l.time as string) - (l.durationMs as number));
    expect(started.length).toBeGreaterThan(0);
    expect(started.filter((t) => t >= resumedAt - 50)).toEqual([]);
  });
});
