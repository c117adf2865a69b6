// The DLQ specification's letter, against the real API server and the real operator: dedupe of
// dead letters by SHA-256 of webhook id + payload in a bulk replay (attempted counts the deduped),
// the cluster-wide cap WEBHOOK_DLQ_MAX_ENTRIES with the oldest deleted before the new one is
// stored, a replayed dead letter kept with its record until its own retention, the held-attempts
// counter for an Open breaker under Defer, and the whole attempt history with one log line each.
import { KubeConfig } from "@kubernetes/client-node";
import { describe, expect, inject, it } from "vitest";
import { KubeClient } from "../../src/kube/client.js";
import { Reflector, type RawItem } from "../../src/kube/reflector.js";
import { collectionPath } from "../../src/kube/types.js";
import { DELIVERIES } from "../../src/delivery/objects.js";
import { createLogger } from "../../src/observability/logger.js";
import { kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, delivery, events, getObj, listObjs, subscription, waitForPhase } from "../helpers/kube.js";
import { operatorFixture } from "../helpers/fixture.js";

const failFast = { retry: { maxAttempts: 1 }, circuitBreaker: { failureThreshold: 100 } };
const annotate = (ns: string, kind: string, name: string, ...kv: string[]) => kubectlOk(["annotate", kind, name, "-n", ns, ...kv]);

describe("the DLQ specification's letter", () => {
  const f = operatorFixture("dlq-letter", { statusIntervalMs: 300, env: { WEBHOOK_HEALTH_PROBE_INTERVAL_MS: "1000" } });

  it("a bulk replay dedupes dead letters by webhook id + payload: the second is marked Deduped by the first; attempted = succeeded + failed + deduped", async () => {
    const { ns } = f;
    let fixed = false;
    const r = await f.receiver(() => (fixed ? 200 : 500));
    await apply([
      subscription(ns, "dups", { url: r.url(), ...failFast }),
      delivery(ns, "dup-1", "dups", { eventId: "evt-dup", payload: { order: 7 } }),
      delivery(ns, "dup-2", "dups", { eventId: "evt-dup", payload: { order: 7 } }),
      delivery(ns, "dup-3", "dups", { eventId: "evt-dup", payload: { order: 8 } }),
    ]);
    await waitForPhase(ns, ["dup-1", "dup-2", "dup-3"], "DeadLettered");
    // Annotated as soon as kubectl sees the three: the replay reads what it walks, and each twin
    // it dedupes against, from the API server, not from the operator's watch, which may be behind
    // (when it read the watch, under CI's load it once walked one of the three and deduped it
    // against a twin still held as pending).
    fixed = true;
    const seen = r.requests.length;
    await annotate(ns, "whsub", "dups", "hookline.dev/replay-dead-letters=dedupe the twins", "hookline.dev/replay-concurrency=1");
    const s = await waitFor(async () => {
      const st = (await getObj("whsub", ns, "dups"))?.status?.lastReplay;
      return st?.finishedAt ? st : undefined;
    }, { description: "bulk replay finished" });
    expect(s).toMatchObject({ attempted: 3, succeeded: 2, failed: 0, deduped: 1 });
    expect(s.attempted).toBe(s.succeeded + s.failed + s.deduped);
    expect(r.requests.length - seen).toBe(2);
    const deduped = (await listObjs("whdel", ns)).filter((d) => d.status?.lastReplay?.result === "Deduped");
    expect(deduped).toHaveLength(1);
    expect(["dup-1", "dup-2"]).toContain(deduped[0]!.metadata.name);
    expect(deduped[0]!.status!.lastReplay.dedupedBy).toBe(deduped[0]!.metadata.name === "dup-1" ? "dup-2" : "dup-1");
    // Deduped by its delivered twin, it is no dead letter any more: Discarded, reason Duplicate.
    expect(deduped[0]!.status).toMatchObject({ phase: "Discarded", discard: { reason: "Duplicate" } });
    expect(deduped[0]!.status!.discard.message).toContain(deduped[0]!.status!.lastReplay.dedupedBy);
    await waitFor(async () => (await events(ns, deduped[0]!.metadata.name)).some((e) => e.reason === "ReplayDeduped" && e.type === "Normal"), { description: "a Normal ReplayDeduped Event" });
    await waitFor(async () => (await getObj("whsub", ns, "dups"))?.status?.deliveries?.deadLettered === 0, { description: "the dead-letter count drops to 0" });
    // The next bulk replay finds nothing to send: the duplicate is not sent again.
    await annotate(ns, "whsub", "dups", "--overwrite", "hookline.dev/replay-dead-letters=once more, nothing left");
    const again = await waitFor(async () => {
      const st = (await getObj("whsub", ns, "dups"))?.status?.lastReplay;
      return st?.reason === "once more, nothing left" && st.finishedAt ? st : undefined;
    }, { description: "second bulk replay finished" });
    expect(again).toMatchObject({ attempted: 0, deduped: 0 });
    expect(r.requests.length - seen).toBe(2);
  });

  it("a replayed dead letter keeps its record (replays, lastReplay, deadLetter) until its own retention, also after a successful replay", async () => {
    const { ns } = f;
    let fixed = false;
    const r = await f.receiver((q) => (fixed || JSON.parse(q.body).data.order !== "kept" ? 200 : 500));
    await apply([subscription(ns, "keeps", { url: r.url(), ...failFast, retention: { succeeded: "2s", deadLettered: "1h" } }), delivery(ns, "kept", "keeps")]);
    await waitForPhase(ns, "kept", "DeadLettered");
    await annotate(ns, "whdel", "kept", "hookline.dev/replay=still failing, try once");
    await waitFor(async () => (await getObj("whdel", ns, "kept"))?.status?.replays === 1, { description: "one failed replay" });
    fixed = true;
    await waitFor(async () => (await getObj("whdel", ns, "kept"))?.metadata.annotations?.["hookline.dev/replay"] === undefined, { description: "annotation removed" });
    await annotate(ns, "whdel", "kept", "hookline.dev/replay=fixed now, INC-5");
    await waitForPhase(ns, "kept", "Succeeded");
    // A delivery that succeeded after the replay did is deleted at its retention (2 s); the
    // replayed dead letter is not: it keeps retention.deadLettered.
    await apply(delivery(ns, "control", "keeps"));
    await waitForPhase(ns, "control", "Succeeded");
    await waitFor(async () => (await getObj("whdel", ns, "control")) === undefined, { description: "control deleted by retention", timeoutMs: 60_000 });
    const kept = (await getObj("whdel", ns, "kept"))!;
    expect(kept.status).toMatchObject({ phase: "Succeeded", replays: 1, deadLetter: { reason: "Exhausted" }, lastReplay: { reason: "fixed now, INC-5", result: "Succeeded" } });
    expect(kept.status!.history.filter((a: { replay?: boolean }) => a.replay)).toHaveLength(2);
  });

  it("counts deliveries held by an Open breaker under Defer once each (webhook_delivery_held_total reason circuit_open), without spending an attempt", async () => {
    const { ns, op } = f;
    const r = await f.receiver(() => 500);
    await apply([subscription(ns, "held", { url: r.url(), retry: { maxAttempts: 1 }, circuitBreaker: { failureThreshold: 1, cooldown: "300s", whenOpen: "Defer" } }), delivery(ns, "opener", "held")]);
    await waitForPhase(ns, "opener", "DeadLettered");
    await waitFor(async () => (await getObj("whsub", ns, "held"))?.status?.breaker?.state === "Open", { description: "breaker open" });
    const names = ["h-1", "h-2", "h-3", "h-4"];
    await apply(names.map((n) => delivery(ns, n, "held")));
    for (const n of names) await waitFor(async () => (await getObj("whdel", ns, n))?.status?.conditions?.some((c: { reason: string }) => c.reason === "BreakerOpen"), { description: `${n} held` });
    expect(await op.metric("webhook_delivery_held_total", { subscription: "held", reason: "circuit_open" })).toBe(4);
    // Looked at again (an annotation change reconciles each): still one held attempt each.
    const planned = (n: string) => op.logs.filter((l) => l.includes('"msg":"planned"') && l.includes(`"delivery":"${ns}/${n}"`)).length;
    const before = names.map(planned);
    for (const n of names) await annotate(ns, "whdel", n, "note=looked at");
    await waitFor(() => names.every((n, i) => planned(n) > before[i]!), { description: "each planned again" });
    for (const n of names) expect((await getObj("whdel", ns, n))!.status!.attempts ?? 0).toBe(0);
    expect(await op.metric("webhook_delivery_held_total", { subscription: "held", reason: "circuit_open" })).toBe(4);
    expect(await op.metric("webhook_delivery_attempts_total", { subscription: "held", reason: "circuit_open" })).toBe(0);
    expect(r.requests).toHaveLength(1);
  });

  it("keeps the whole attempt history up to maxAttempts and writes one info line per attempt (event id, attempt, result, status; the specification's type, endpoint, statusCode)", async () => {
    const { ns, op } = f;
    const r = await f.receiver(() => 500);
    await apply([
      subscription(ns, "history", { url: r.url("/hooks/s3cr3t-path?token=s3cr3t-query"), retry: { maxAttempts: 15, initialBackoff: "10ms", maxBackoff: "20ms", jitterPercent: 0 }, circuitBreaker: { failureThreshold: 100 } }),
      delivery(ns, "long-life", "history", { eventId: "evt-long-life" }),
    ]);
    const d = (await waitForPhase(ns, "long-life", "DeadLettered", 60_000))[0]!;
    expect(d.status!.history.map((a: { number: number }) => a.number)).toEqual(Array.from({ length: 15 }, (_, i) => i + 1));
    expect(d.status!.history.every((a: { responseStatus: number; outcome: string }) => a.responseStatus === 500 && a.outcome === "Failed")).toBe(true);
    const lines = op.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === "webhook_attempt" && l.eventId === "evt-long-life");
    expect(lines.map((l) => l.attempt)).toEqual(Array.from({ length: 15 }, (_, i) => i + 1));
    // The URL with its path and query values redacted: a webhook URL often carries its secret there.
    const endpoint = `http://127.0.0.1:${new URL(r.url()).port}/REDACTED?token=REDACTED`;
    for (const l of lines) {
      expect(l).toMatchObject({ level: "info", result: "Failed", status: 500, statusCode: 500, reason: "http_5xx", type: "order.paid", endpoint, delivery: `${ns}/long-life`, subscription: `${ns}/history` });
    }
    expect(op.logs.some((l) => l.includes("s3cr3t"))).toBe(false);
  });
});

describe("the cluster-wide dead-letter cap (WEBHOOK_DLQ_MAX_ENTRIES)", () => {
  const f = operatorFixture("dlq-cap", { statusIntervalMs: 300, env: { WEBHOOK_DLQ_MAX_ENTRIES: "3", WEBHOOK_HEALTH_PROBE_INTERVAL_MS: "1000" } });

  it("deletes the oldest dead letter, of any subscription, before a new one is stored", async () => {
    const { ns, op } = f;
    const r = await f.receiver(() => 500);
    await apply([subscription(ns, "s1", { url: r.url(), ...failFast }), subscription(ns, "s2", { url: r.url(), ...failFast })]);
    // The order in which the API server stored the changes, as its watch delivers them.
    const kc = new KubeConfig();
    kc.loadFromFile(inject("kubeconfig"));
    const client = await KubeClient.create(kc);
    const seen: Array<{ type: "add" | "update" | "delete"; name: string; phase: string | undefined }> = [];
    const watch = new Reflector<RawItem>({
      client,
      name: "test",
      path: collectionPath(DELIVERIES, ns),
      transform: (item) => item,
      log: createLogger({ level: "silent" }),
      handler: {
        add: (o) => seen.push({ type: "add", name: o.metadata.name, phase: (o.status as { phase?: string } | undefined)?.phase }),
        update: (_old, o) => seen.push({ type: "update", name: o.metadata.name, phase: (o.status as { phase?: string } | undefined)?.phase }),
        delete: (o) => seen.push({ type: "delete", name: o.metadata.name, phase: (o.status as { phase?: string } | undefined)?.phase }),
      },
    });
    watch.start();
    try {
      await watch.waitForSync();
      const plan = [["dl-1", "s1"], ["dl-2", "s2"], ["dl-3", "s1"], ["dl-4", "s2"], ["dl-5", "s1"]] as const;
      for (const [name, sub] of plan) {
        await apply(delivery(ns, name, sub));
        await waitForPhase(ns, name, "DeadLettered");
      }
      await waitFor(async () => (await listObjs("whdel", ns)).length === 3, { description: "3 dead letters kept" });
      expect((await listObjs("whdel", ns)).map((d) => d.metadata.name).sort()).toEqual(["dl-3", "dl-4", "dl-5"]);
      await waitFor(() => seen.filter((e) => e.type === "delete").length === 2, { description: "two deletes watched" });
      // Before: the oldest went before the new one became a dead letter.
      const at = (pred: (e: (typeof seen)[number]) => boolean) => seen.findIndex(pred);
      expect(at((e) => e.type === "delete" && e.name === "dl-1")).toBeLessThan(at((e) => e.name === "dl-4" && e.phase === "DeadLettered"));
      expect(at((e) => e.type === "delete" && e.name === "dl-2")).toBeLessThan(at((e) => e.name === "dl-5" && e.phase === "DeadLettered"));
      // Never more than 3 stored at once.
      const dead = new Set<string>();
      for (const e of seen) {
        if (e.type === "delete") dead.delete(e.name);
        else if (e.phase === "DeadLettered") dead.add(e.name);
        expect(dead.size).toBeLessThanOrEqual(3);
      }
      const dropped = [...(await events(ns, "s1")), ...(await events(ns, "s2"))].filter((e) => e.reason === "DeadLetterDropped");
      expect(dropped.map((e) => e.message).sort()).toEqual([expect.stringContaining("dead letter dl-1 deleted to make room"), expect.stringContaining("dead letter dl-2 deleted to make room")]);
      for (const e of dropped) expect(e.message).toContain("WEBHOOK_DLQ_MAX_ENTRIES=3");
      expect(await op.metric("webhook_dlq_operations_total", { operation: "drop_overflow" })).toBe(2);
    } finally {
      await watch.stop();
      await client.destroy();
    }
  });
});
