// Dead letters and replay, driven with kubectl as an operator on call would.
import { describe, expect, it } from "vitest";
import { createNamespace, deleteNamespace, kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, create, delivery, events, getObj, listObjs, subscription } from "../helpers/kube.js";
import { operatorFixture } from "../helpers/fixture.js";
import { startOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";

const del = async (ns: string, name: string) => getObj("whdel", ns, name);
const phase = (ns: string, name: string, p: string, timeoutMs = 30_000) =>
  waitFor(async () => {
    const d = await del(ns, name);
    return d?.status?.phase === p ? d : undefined;
  }, { description: `${name} ${p}`, timeoutMs });
const noAnnotation = (ns: string, kind: string, name: string, key: string) =>
  waitFor(async () => (await getObj(kind, ns, name))?.metadata.annotations?.[key] === undefined, { description: `${key} removed from ${name}` });
const annotate = (ns: string, kind: string, name: string, ...kv: string[]) => kubectlOk(["annotate", kind, name, "-n", ns, ...kv]);
// Fails fast, never opens the breaker, so dead letters pile up. (After 10 failures in a row the
// endpoint is Disabled and probed once per WEBHOOK_HEALTH_PROBE_INTERVAL_MS: 1 s here.)
const env = { WEBHOOK_HEALTH_PROBE_INTERVAL_MS: "1000" };
const failFast = { retry: { maxAttempts: 1 }, circuitBreaker: { failureThreshold: 100 } };

describe("replay", () => {
  const f = operatorFixture("replay", { statusIntervalMs: 500, env });

  it("replays one dead letter with kubectl, then the rest in bulk, never more than the concurrency at once", async () => {
    const { ns, op } = f;
    let fixed = false;
    const r = await f.receiver(() => (fixed ? { status: 200, delayMs: 100 } : 500));
    const names = Array.from({ length: 12 }, (_, i) => `dl-${String(i).padStart(2, "0")}`);
    await apply([subscription(ns, "outage", { url: r.url(), ...failFast }), ...names.map((n) => delivery(ns, n, "outage"))]);
    for (const n of names) await phase(ns, n, "DeadLettered");
    expect((await getObj("whsub", ns, "outage"))?.status?.health?.state).toBe("Disabled");
    await waitFor(async () => (await getObj("whsub", ns, "outage"))?.status?.deliveries?.deadLettered === 12, { description: "12 dead letters counted" });
    expect(await op.metric("webhook_dlq_entries", { subscription: "outage" })).toBe(12);
    const found = await kubectlOk(["get", "whdel", "-n", ns, "--field-selector", "status.phase=DeadLettered,spec.subscriptionRef.name=outage", "-o", "name"]);
    expect(found.trim().split("\n")).toHaveLength(12);
    const firstId = r.requests.find((q) => JSON.parse(q.body).data.order === "dl-00")!.headers["webhook-id"];
    fixed = true;

    const before = r.requests.length;
    await annotate(ns, "whdel", "dl-00", "hookline.dev/replay=endpoint fixed, INC-42");
    const replayed = await phase(ns, "dl-00", "Succeeded");
    expect(replayed.status!.lastReplay).toMatchObject({ reason: "endpoint fixed, INC-42" });
    expect(r.requests[before]!.headers["webhook-id"]).toBe(firstId);
    await noAnnotation(ns, "whdel", "dl-00", "hookline.dev/replay");
    await waitFor(async () => (await events(ns, "dl-00")).some((e) => e.reason === "Replayed"), { description: "Replayed Event" });

    const beforeBulk = r.requests.length;
    r.maxConcurrent = 0;
    await annotate(ns, "whsub", "outage", "hookline.dev/replay-dead-letters=outage INC-42 over", "hookline.dev/replay-concurrency=3");
    const summary = await waitFor(async () => {
      const s = (await getObj("whsub", ns, "outage"))?.status?.lastReplay;
      return s?.finishedAt ? s : undefined;
    }, { description: "bulk replay finished" });
    expect(summary).toMatchObject({ reason: "outage INC-42 over", attempted: 11, succeeded: 11, failed: 0, deduped: 0 });
    expect(r.requests.length - beforeBulk).toBe(11);
    expect(r.maxConcurrent).toBeLessThanOrEqual(3);
    expect(r.maxConcurrent).toBe(3);
    for (const n of names) expect((await del(ns, n))?.status?.phase).toBe("Succeeded");
    await noAnnotation(ns, "whsub", "outage", "hookline.dev/replay-dead-letters");
    expect(await op.metric("webhook_dlq_operations_total", { operation: "replay" })).toBe(12);
  });

  it("refuses a short reason, a pending delivery and a Discarded one, with Warning Events and no change", async () => {
    const { ns } = f;
    const r = await f.receiver(() => 500);
    await apply([
      subscription(ns, "refusals", { url: r.url(), ...failFast }),
      subscription(ns, "slowpoke", { url: r.url(), retry: { maxAttempts: 5, initialBackoff: "1h", maxBackoff: "2h" }, circuitBreaker: { failureThreshold: 100 } }),
      subscription(ns, "picky", { url: r.url() }),
      delivery(ns, "short", "refusals"),
      delivery(ns, "pending", "slowpoke"),
    ]);
    // Discarded: a payload over 256 KiB (kubectl create: apply would copy it into an annotation).
    await create(delivery(ns, "discarded", "picky", { payload: { blob: "x".repeat(300 * 1024) } }));
    const dead = await phase(ns, "short", "DeadLettered");
    await phase(ns, "pending", "Retrying");
    await phase(ns, "discarded", "Discarded");
    const seen = r.requests.length;
    await annotate(ns, "whdel", "short", "hookline.dev/replay=ok");
    await annotate(ns, "whdel", "pending", "hookline.dev/replay=please replay this");
    await annotate(ns, "whdel", "discarded", "hookline.dev/replay=please replay this");
    for (const n of ["short", "pending", "discarded"]) {
      await noAnnotation(ns, "whdel", n, "hookline.dev/replay");
      const ev = await waitFor(async () => (await events(ns, n)).find((e) => e.reason === "ReplayRefused"), { description: `ReplayRefused on ${n}` });
      expect(ev.type).toBe("Warning");
    }
    expect((await events(ns, "short")).find((e) => e.reason === "ReplayRefused")!.message).toMatch(/5 to 1024 characters/);
    expect((await events(ns, "pending")).find((e) => e.reason === "ReplayRefused")!.message).toMatch(/not dead-lettered/);
    expect((await events(ns, "discarded")).find((e) => e.reason === "ReplayRefused")!.message).toMatch(/Discarded/);
    const after = await del(ns, "short");
    expect(after!.status).toEqual(dead.status);
    expect(r.requests.length).toBe(seen);
  });

  it("counts a dead letter whose twin (same event id and payload) is pending as deduped, and does not send it", async () => {
    const { ns } = f;
    const r = await f.receiver(() => 500);
    // failureThreshold 1: the first failure opens the breaker (Defer), so the twin stays pending.
    await apply([
      subscription(ns, "twins", { url: r.url(), retry: { maxAttempts: 1 }, circuitBreaker: { failureThreshold: 2, cooldown: "300s" } }),
      delivery(ns, "orig", "twins", { eventId: "evt-twin", payload: { n: 1 } }),
      delivery(ns, "other", "twins", { eventId: "evt-other", payload: { n: 2 } }),
    ]);
    await phase(ns, "orig", "DeadLettered");
    await phase(ns, "other", "DeadLettered");
    await waitFor(async () => (await getObj("whsub", ns, "twins"))?.status?.breaker?.state === "Open", { description: "breaker open" });
    await apply(delivery(ns, "twin", "twins", { eventId: "evt-twin", payload: { n: 1 } }));
    await waitFor(async () => (await getObj("whsub", ns, "twins"))?.status?.deliveries?.pending === 1, { description: "twin pending" });
    const seen = r.requests.length;
    await annotate(ns, "whsub", "twins", "hookline.dev/replay-dead-letters=dedupe check run");
    const s = await waitFor(async () => {
      const st = (await getObj("whsub", ns, "twins"))?.status?.lastReplay;
      return st?.finishedAt ? st : undefined;
    }, { description: "bulk replay finished" });
    // attempted counts the deduped one too (the DLQ specification: attempted = succeeded + failed + deduped).
    expect(s).toMatchObject({ deduped: 1, attempted: 2, failed: 1, succeeded: 0 });
    expect(r.requests.length).toBe(seen + 1);
    expect(JSON.parse(r.requests.at(-1)!.body).id).toBe("evt-other");
    expect((await del(ns, "orig"))?.status?.lastReplay?.result).toBe("Deduped");
    // Its twin is pending with the same event: the dead letter is a duplicate now, not a dead letter.
    expect((await del(ns, "orig"))?.status).toMatchObject({ phase: "Discarded", discard: { reason: "Duplicate" } });
  });

  it("discards a dead letter as Poison after maxReplays failed replays and never replays it again", async () => {
    const { ns, op } = f;
    const r = await f.receiver(() => 500);
    await apply([subscription(ns, "poison", { url: r.url(), ...failFast, deadLetter: { maxReplays: 2 } }), delivery(ns, "toxic", "poison")]);
    await phase(ns, "toxic", "DeadLettered");
    await annotate(ns, "whdel", "toxic", "hookline.dev/replay=first try again");
    await waitFor(async () => (await del(ns, "toxic"))?.status?.replays === 1, { description: "one failed replay" });
    await noAnnotation(ns, "whdel", "toxic", "hookline.dev/replay");
    expect((await del(ns, "toxic"))?.status?.phase).toBe("DeadLettered");
    await annotate(ns, "whdel", "toxic", "hookline.dev/replay=second try again");
    const d = await phase(ns, "toxic", "Discarded");
    expect(d.status!.discard.reason).toBe("Poison");
    expect(d.status!.replays).toBe(2);
    expect(await op.metric("webhook_dlq_operations_total", { operation: "drop_poison" })).toBe(1);
    await noAnnotation(ns, "whdel", "toxic", "hookline.dev/replay");
    const seen = r.requests.length;
    await annotate(ns, "whdel", "toxic", "hookline.dev/replay=third try again");
    await noAnnotation(ns, "whdel", "toxic", "hookline.dev/replay");
    expect(r.requests.length).toBe(seen);
    expect((await del(ns, "toxic"))?.status?.phase).toBe("Discarded");
  });

  it("keeps the newest maxEntries dead letters, deleting the oldest with an Event", async () => {
    const { ns, op } = f;
    const r = await f.receiver(() => 500);
    await apply(subscription(ns, "small-dlq", { url: r.url(), ...failFast, deadLetter: { maxEntries: 5 } }));
    const names = Array.from({ length: 7 }, (_, i) => `ovf-${i}`);
    for (const n of names) {
      await apply(delivery(ns, n, "small-dlq"));
      await phase(ns, n, "DeadLettered");
    }
    await waitFor(async () => (await listObjs("whdel", ns, ["--field-selector", "spec.subscriptionRef.name=small-dlq"])).length === 5, { description: "5 dead letters kept" });
    const kept = (await listObjs("whdel", ns, ["--field-selector", "spec.subscriptionRef.name=small-dlq"])).map((o) => o.metadata.name).sort();
    expect(kept).toEqual(names.slice(2));
    await waitFor(async () => (await events(ns, "small-dlq")).filter((e) => e.reason === "DeadLetterDropped").length === 2, { description: "2 DeadLetterDropped Events" });
    expect(await op.metric("webhook_dlq_operations_total", { operation: "drop_overflow" })).toBe(2);
    expect(await op.metric("webhook_dlq_operations_total", { operation: "enqueue" })).toBeGreaterThanOrEqual(7);
  });

  it("refuses a second bulk replay while one runs, and a concurrency that is not a number", async () => {
    const { ns } = f;
    const r = await f.receiver(() => ({ status: 500, delayMs: 300 }));
    await apply([subscription(ns, "busy", { url: r.url(), ...failFast }), ...["q0", "q1", "q2", "q3"].map((n) => delivery(ns, n, "busy"))]);
    for (const n of ["q0", "q1", "q2", "q3"]) await phase(ns, n, "DeadLettered");
    await annotate(ns, "whsub", "busy", "hookline.dev/replay-dead-letters=first bulk run", "hookline.dev/replay-concurrency=1");
    await waitFor(async () => (await getObj("whsub", ns, "busy"))?.status?.lastReplay?.reason === "first bulk run", { description: "first run started" });
    await noAnnotation(ns, "whsub", "busy", "hookline.dev/replay-dead-letters");
    await annotate(ns, "whsub", "busy", "hookline.dev/replay-dead-letters=second bulk run");
    await waitFor(async () => (await events(ns, "busy")).some((e) => e.reason === "ReplayRefused" && /still running/.test(e.message)), { description: "second run refused" });
    await noAnnotation(ns, "whsub", "busy", "hookline.dev/replay-dead-letters");
    await waitFor(async () => (await getObj("whsub", ns, "busy"))?.status?.lastReplay?.finishedAt, { description: "first run finished" });
    expect((await getObj("whsub", ns, "busy"))?.status?.lastReplay).toMatchObject({ reason: "first bulk run", attempted: 4, failed: 4 });
    await annotate(ns, "whsub", "busy", "hookline.dev/replay-dead-letters=third bulk run", "hookline.dev/replay-concurrency=lots");
    await waitFor(async () => (await events(ns, "busy")).some((e) => e.reason === "ReplayRefused" && /not a number/.test(e.message)), { description: "bad concurrency refused" });
    expect((await getObj("whsub", ns, "busy"))?.status?.lastReplay?.reason).toBe("first bulk run");
  });
});

describe("bulk replay across an operator restart", () => {
  it("resumes: every one of 30 dead letters is replayed exactly once and the summary is right", async () => {
    const ns = await createNamespace("replay-restart");
    let fixed = false;
    const r = await Receiver.start(() => (fixed ? { status: 200, delayMs: 150 } : 500));
    let op = await startOperator({ namespaces: [ns], statusIntervalMs: 500, env: { ...env, WEBHOOK_DRAIN_TIMEOUT_MS: "5000" } });
    try {
      const names = Array.from({ length: 30 }, (_, i) => `rr-${String(i).padStart(2, "0")}`);
      // The first failure opens the breaker; with whenOpen: DeadLetter the rest dead-letter at once.
      await apply([
        subscription(ns, "resume", { url: r.url(), retry: { maxAttempts: 1 }, circuitBreaker: { failureThreshold: 1, cooldown: "300s", whenOpen: "DeadLetter" } }),
        ...names.map((n) => delivery(ns, n, "resume")),
      ]);
      for (const n of names) await phase(ns, n, "DeadLettered");
      fixed = true;
      const seen = r.requests.length;
      await annotate(ns, "whsub", "resume", "hookline.dev/replay-dead-letters=restart in the middle", "hookline.dev/replay-concurrency=3");
      await waitFor(async () => ((await getObj("whsub", ns, "resume"))?.status?.lastReplay?.attempted ?? 0) >= 6, { description: "replay under way" });
      await op.stop();
      const midway = (await getObj("whsub", ns, "resume"))!.status!.lastReplay;
      expect(midway.finishedAt).toBeUndefined();
      op = await startOperator({ namespaces: [ns], statusIntervalMs: 500, env });
      const done = await waitFor(async () => {
        const s = (await getObj("whsub", ns, "resume"))?.status?.lastReplay;
        return s?.finishedAt ? s : undefined;
      }, { description: "bulk replay finished after restart", timeoutMs: 60_000 });
      expect(done).toMatchObject({ attempted: 30, succeeded: 30, failed: 0, deduped: 0 });
      const replayRequests = r.requests.slice(seen);
      const perEvent = new Map<string, number>();
      for (const q of replayRequests) perEvent.set(String(q.headers["webhook-id"]), (perEvent.get(String(q.headers["webhook-id"])) ?? 0) + 1);
      expect(perEvent.size).toBe(30);
      expect([...perEvent.values()].every((n) => n === 1)).toBe(true);
      for (const n of names) expect((await getObj("whdel", ns, n))?.status?.phase).toBe("Succeeded");
    } finally {
      await op.stop();
      await r.close();
      await deleteNamespace(ns);
    }
  });
});

