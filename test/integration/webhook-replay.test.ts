// WebhookReplay, the declarative replay, against the real API server and the real operator: the
// issue's example (selector, window, reasons, a target subscription with its own signing), a
// replay of delivered events, a dry run, dedupe by webhook id + payload (attempted counts the
// deduped), resuming across an operator restart, RBAC without edit on deliveries, waiting for a
// target and for an older replay, and the largest inputs the API server takes.
import { randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { createNamespace, deleteNamespace, kubectl, kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, delivery, events, getObj, listObjs, secret, subscription, TEST_SECRET, waitForPhase, type Obj } from "../helpers/kube.js";
import { operatorFixture } from "../helpers/fixture.js";
import { startOperator } from "../helpers/operator.js";
import { Receiver, type ReceivedRequest } from "../helpers/receiver.js";

const V2_SECRET = `whsec_${randomBytes(24).toString("base64")}`;
// Fails fast and never opens the breaker, so dead letters pile up.
const failFast = { retry: { maxAttempts: 1 }, circuitBreaker: { failureThreshold: 100 } };
const env = { WEBHOOK_HEALTH_PROBE_INTERVAL_MS: "1000" };

function replay(namespace: string, name: string, spec: Record<string, unknown>): unknown {
  return { apiVersion: "hookline.dev/v1alpha1", kind: "WebhookReplay", metadata: { name, namespace }, spec };
}

async function completed(ns: string, name: string, timeoutMs = 60_000): Promise<Obj> {
  return waitFor(
    async () => {
      const r = await getObj("whrep", ns, name);
      return r?.status?.phase === "Completed" || r?.status?.phase === "Failed" ? r : undefined;
    },
    { description: `WebhookReplay ${name} finished`, timeoutMs },
  );
}

const idOf = (q: ReceivedRequest) => String(q.headers["webhook-id"]);
const orderOf = (q: ReceivedRequest) => (JSON.parse(q.body) as { data: { order: string } }).data.order;

describe("WebhookReplay", () => {
  const f = operatorFixture("whrep", { statusIntervalMs: 500, env });

  it("the issue's example: the selector, the window and the reasons pick the dead letters; the target gets them with its own signature; the sources keep their phase", async () => {
    const { ns } = f;
    // 500: Exhausted after its one attempt; 400 at once: PermanentFailure (not in the reasons).
    const acme = await f.receiver((q) => (orderOf(q) === "refused" ? 400 : 500));
    const v2 = await f.receiver(() => 200);
    await apply([
      secret(ns, "acme-signing"),
      secret(ns, "v2-signing", { secret: V2_SECRET }),
      subscription(ns, "acme", { url: acme.url(), secretRef: { name: "acme-signing" }, eventTypes: ["order.*", "invoice.*"], ...failFast }),
      subscription(ns, "acme-v2", { url: v2.url(), secretRef: { name: "v2-signing" } }),
      delivery(ns, "early", "acme", { eventId: "evt-early" }),
    ]);
    await waitForPhase(ns, "early", "DeadLettered");
    const after = Date.parse((await getObj("whdel", ns, "early"))!.status!.finishedAt) + 1;
    await apply([
      delivery(ns, "paid", "acme", { eventId: "evt-paid" }),
      delivery(ns, "shipped", "acme", { eventType: "order.shipped", eventId: "evt-shipped" }),
      delivery(ns, "invoice", "acme", { eventType: "invoice.paid", eventId: "evt-invoice" }),
      delivery(ns, "refused", "acme", { eventId: "evt-refused" }),
    ]);
    const before = await waitForPhase(ns, ["paid", "shipped", "invoice", "refused"], "DeadLettered");
    expect(before.find((b) => b.metadata.name === "refused")!.status!.deadLetter.reason).toBe("PermanentFailure");
    // The window ends before this one dead-lettered.
    const cut = Math.max(...before.map((b) => Date.parse(b.status!.finishedAt))) + 1;
    await apply(delivery(ns, "late", "acme", { eventId: "evt-late" }));
    const late = (await waitForPhase(ns, "late", "DeadLettered"))[0]!;
    expect(Date.parse(late.status!.finishedAt)).toBeGreaterThanOrEqual(cut);
    await apply(
      replay(ns, "inc-42", {
        reason: "INC-42: acme endpoint fixed",
        selector: { subscriptions: ["acme"], eventTypes: ["order.*"], reasons: ["Exhausted", "BreakerOpen"] },
        finishedAfter: new Date(after).toISOString(),
        finishedBefore: new Date(cut).toISOString(),
        phases: ["DeadLettered"],
        target: { subscription: "acme-v2" },
        concurrency: 5,
        dryRun: false,
      }),
    );
    await kubectlOk(["wait", "--for=condition=Complete", "whrep/inc-42", "-n", ns, "--timeout=60s"]);
    const r = (await getObj("whrep", ns, "inc-42"))!;
    expect(r.status).toMatchObject({ phase: "Completed", matched: 2, attempted: 2, succeeded: 2, failed: 0, deduped: 0, skipped: 0 });
    expect(r.status!.startedAt <= r.status!.finishedAt).toBe(true);
    expect(r.status!.conditions.find((c: { type: string }) => c.type === "Complete")).toMatchObject({ status: "True", reason: "Completed", observedGeneration: 1 });

    // The target got exactly the two, same webhook ids, signed with its own secret.
    expect(v2.requests.map(idOf).sort()).toEqual(["evt-paid", "evt-shipped"]);
    for (const q of v2.requests) {
      expect(() => new Webhook(V2_SECRET).verify(q.body, q.headers as Record<string, string>)).not.toThrow();
      expect(() => new Webhook(TEST_SECRET).verify(q.body, q.headers as Record<string, string>)).toThrow();
    }
    // The sources: still dead letters, the attempt and the replay recorded.
    for (const name of ["paid", "shipped"]) {
      const d = (await getObj("whdel", ns, name))!;
      const prev = before.find((b) => b.metadata.name === name)!;
      expect(d.status).toMatchObject({ phase: "DeadLettered", attempts: 1, finishedAt: prev.status!.finishedAt });
      expect(d.status!.replays ?? 0).toBe(0);
      expect(d.status!.lastReplay).toMatchObject({ reason: "INC-42: acme endpoint fixed", requestId: r.metadata.uid, replay: "inc-42", target: "acme-v2", result: "Succeeded" });
      expect(d.status!.history.at(-1)).toMatchObject({ replay: true, target: "acme-v2", responseStatus: 200, number: 2 });
    }
    for (const name of ["early", "invoice", "refused", "late"]) expect((await getObj("whdel", ns, name))!.status!.lastReplay).toBeUndefined();
    const evs = await events(ns, "inc-42");
    expect(evs.map((e) => e.reason)).toEqual(expect.arrayContaining(["ReplayStarted", "ReplayFinished"]));
    expect(evs.find((e) => e.reason === "ReplayFinished")!.message).toContain("matched 2: attempted 2 (succeeded 2, failed 0, deduped 0), skipped 0");

    // kubectl get whrep: the printer columns, and the category lists the kind.
    const table = await kubectlOk(["get", "whrep", "-n", ns, "inc-42"]);
    expect(table.split("\n")[0]).toMatch(/^NAME\s+PHASE\s+MATCHED\s+ATTEMPTED\s+SUCCEEDED\s+FAILED\s+DEDUPED\s+AGE$/);
    expect(table.split("\n")[1]).toMatch(/^inc-42\s+Completed\s+2\s+2\s+2\s+0\s+0\s+\S+$/);
    const wide = await kubectlOk(["get", "whrep", "-n", ns, "inc-42", "-o", "wide"]);
    expect(wide).toMatch(/SKIPPED\s+TARGET\s+DRY RUN\s+REASON/);
    expect(wide).toMatch(/acme-v2\s+false\s+INC-42: acme endpoint fixed/);
    expect(await kubectlOk(["get", "hookline", "-n", ns, "-o", "name"])).toContain("webhookreplay.hookline.dev/inc-42");
    // An audit record: the spec cannot change.
    const edit = await kubectl(["patch", "whrep", "inc-42", "-n", ns, "--type=merge", "-p", '{"spec":{"concurrency":9}}']);
    expect(edit.code).not.toBe(0);
    expect(edit.stderr).toContain("spec is immutable: a WebhookReplay is an audit record");
  });

  it("replays dead letters and sends delivered events again (phases DeadLettered and Succeeded), each at most once", async () => {
    const { ns } = f;
    let fixed = false;
    const r = await f.receiver((q) => (fixed || !orderOf(q).startsWith("bad") ? 200 : 500));
    const names = ["ok-1", "ok-2", "bad-1", "bad-2"];
    await apply([subscription(ns, "mixed", { url: r.url(), ...failFast }), ...names.map((n) => delivery(ns, n, "mixed"))]);
    await waitForPhase(ns, ["ok-1", "ok-2"], "Succeeded");
    await waitForPhase(ns, ["bad-1", "bad-2"], "DeadLettered");
    fixed = true;
    const seen = r.requests.length;
    await apply(replay(ns, "both", { reason: "receiver lost a day of data", selector: { subscriptions: ["mixed"] }, phases: ["DeadLettered", "Succeeded"], concurrency: 3 }));
    const done = await completed(ns, "both");
    expect(done.status).toMatchObject({ phase: "Completed", matched: 4, attempted: 4, succeeded: 4, failed: 0, deduped: 0, skipped: 0 });
    expect(r.requests.slice(seen).map(orderOf).sort()).toEqual([...names].sort());
    for (const n of ["bad-1", "bad-2"]) {
      const d = (await getObj("whdel", ns, n))!;
      // A dead letter delivered by the replay: Succeeded, its dead-letter record kept.
      expect(d.status).toMatchObject({ phase: "Succeeded", deadLetter: { reason: "Exhausted" }, lastReplay: { result: "Succeeded", requestId: done.metadata.uid } });
    }
    for (const n of ["ok-1", "ok-2"]) {
      const d = (await getObj("whdel", ns, n))!;
      expect(d.status).toMatchObject({ phase: "Succeeded", attempts: 1, lastReplay: { result: "Succeeded", requestId: done.metadata.uid } });
      expect(d.status!.history).toHaveLength(2);
    }
  });

  it("a dry run counts what matches and sends nothing", async () => {
    const { ns } = f;
    const r = await f.receiver(() => 500);
    const names = Array.from({ length: 6 }, (_, i) => `dry-${i}`);
    await apply([subscription(ns, "dry", { url: r.url(), ...failFast }), ...names.map((n) => delivery(ns, n, "dry"))]);
    await waitForPhase(ns, names, "DeadLettered");
    const seen = r.requests.length;
    await apply(replay(ns, "count-only", { reason: "how many would go?", selector: { subscriptions: ["dry"] }, dryRun: true }));
    const done = await completed(ns, "count-only");
    expect(done.status).toMatchObject({ phase: "Completed", matched: 6, attempted: 0, succeeded: 0, failed: 0 });
    expect(done.status!.conditions.find((c: { type: string }) => c.type === "Complete")).toMatchObject({ status: "True", reason: "DryRun" });
    expect(r.requests.length).toBe(seen);
    for (const n of names) expect((await getObj("whdel", ns, n))!.status!.lastReplay).toBeUndefined();
  });

  it("dedupes by webhook id + payload: the second of two equal dead letters is marked Deduped by the first (Discarded, Duplicate), and attempted = succeeded + failed + deduped", async () => {
    const { ns } = f;
    const r = await f.receiver((q) => (JSON.parse(q.body).data.fail ? 500 : 200));
    let fixed = false;
    const gate = await f.receiver((q) => (fixed ? r.script(q) : 500));
    await apply([
      subscription(ns, "twins", { url: gate.url(), ...failFast, deadLetter: { maxReplays: 5 } }),
      delivery(ns, "a-1", "twins", { eventId: "evt-a", payload: { order: "a" } }),
      delivery(ns, "a-2", "twins", { eventId: "evt-a", payload: { order: "a" } }),
      delivery(ns, "a-other-payload", "twins", { eventId: "evt-a", payload: { order: "a", v: 2 } }),
      delivery(ns, "f-1", "twins", { eventId: "evt-f", payload: { order: "f", fail: true } }),
      delivery(ns, "f-2", "twins", { eventId: "evt-f", payload: { order: "f", fail: true } }),
    ]);
    const names = ["a-1", "a-2", "a-other-payload", "f-1", "f-2"];
    await waitForPhase(ns, names, "DeadLettered");
    fixed = true;
    const seen = gate.requests.length;
    await apply(replay(ns, "dedupe", { reason: "dedupe check, INC-7", selector: { subscriptions: ["twins"] }, concurrency: 1 }));
    const done = await completed(ns, "dedupe");
    expect(done.status).toMatchObject({ matched: 5, attempted: 5, succeeded: 2, failed: 1, deduped: 2, skipped: 0 });
    // One request per (id, payload): a-1 or a-2, a-other-payload, f-1 or f-2.
    expect(gate.requests.length - seen).toBe(3);
    const marked = (await listObjs("whdel", ns)).filter((d) => d.status?.lastReplay?.result === "Deduped");
    expect(marked).toHaveLength(2);
    for (const d of marked) {
      const by = d.status!.lastReplay.dedupedBy as string;
      expect(["a-1", "a-2", "f-1", "f-2"]).toContain(by);
      expect(by.slice(0, 1)).toBe(d.metadata.name.slice(0, 1));
      expect(by).not.toBe(d.metadata.name);
      expect(d.status!.lastReplay.requestId).toBe(done.metadata.uid);
      // A duplicate, not a dead letter: its twin carries the event (and is the dead letter if it failed).
      expect(d.status).toMatchObject({ phase: "Discarded", discard: { reason: "Duplicate" } });
    }
    const deadLetters = (await listObjs("whdel", ns)).filter((d) => names.includes(d.metadata.name) && d.status?.phase === "DeadLettered").map((d) => d.metadata.name);
    expect(deadLetters).toHaveLength(1);
    expect(["f-1", "f-2"]).toContain(deadLetters[0]);
  });

  it("resumes across an operator restart: every dead letter replayed exactly once, the summary right", async () => {
    const ns = await createNamespace("whrep-restart");
    let fixed = false;
    const r = await Receiver.start(() => (fixed ? { status: 200, delayMs: 200 } : 500));
    let op = await startOperator({ namespaces: [ns], statusIntervalMs: 500, env: { ...env, WEBHOOK_DRAIN_TIMEOUT_MS: "5000" } });
    try {
      const names = Array.from({ length: 20 }, (_, i) => `rs-${String(i).padStart(2, "0")}`);
      await apply([subscription(ns, "resume", { url: r.url(), ...failFast }), ...names.map((n) => delivery(ns, n, "resume"))]);
      await waitForPhase(ns, names, "DeadLettered");
      fixed = true;
      const seen = r.requests.length;
      r.maxConcurrent = 0;
      await apply(replay(ns, "restart", { reason: "restart in the middle", concurrency: 2 }));
      await waitFor(async () => ((await getObj("whrep", ns, "restart"))?.status?.attempted ?? 0) >= 4, { description: "replay under way" });
      await op.stop();
      const midway = (await getObj("whrep", ns, "restart"))!.status!;
      expect(midway.phase).toBe("Running");
      op = await startOperator({ namespaces: [ns], statusIntervalMs: 500, env });
      const done = await completed(ns, "restart");
      expect(done.status).toMatchObject({ phase: "Completed", matched: 20, attempted: 20, succeeded: 20, failed: 0, deduped: 0, skipped: 0 });
      const perEvent = new Map<string, number>();
      for (const q of r.requests.slice(seen)) perEvent.set(idOf(q), (perEvent.get(idOf(q)) ?? 0) + 1);
      expect(perEvent.size).toBe(20);
      expect([...perEvent.values()].every((n) => n === 1)).toBe(true);
      // spec.concurrency: never more at once, before the restart or after it.
      expect(r.maxConcurrent).toBe(2);
    } finally {
      await op.stop();
      await r.close();
      await deleteNamespace(ns);
    }
  });

  it("RBAC: the replayer role creates WebhookReplays and replays without any write on deliveries", async () => {
    const { ns } = f;
    let fixed = false;
    const r = await f.receiver(() => (fixed ? 200 : 500));
    await apply([
      subscription(ns, "rbac", { url: r.url(), ...failFast }),
      delivery(ns, "rbac-1", "rbac"),
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "oncall", namespace: ns } },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        metadata: { name: "replayer", namespace: ns },
        rules: [
          { apiGroups: ["hookline.dev"], resources: ["webhookreplays"], verbs: ["get", "list", "watch", "create"] },
          { apiGroups: ["hookline.dev"], resources: ["webhooksubscriptions", "webhookdeliveries"], verbs: ["get", "list", "watch"] },
        ],
      },
      { apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding", metadata: { name: "oncall-replayer", namespace: ns }, roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "replayer" }, subjects: [{ kind: "ServiceAccount", name: "oncall", namespace: ns }] },
    ]);
    await waitForPhase(ns, "rbac-1", "DeadLettered");
    fixed = true;
    const as = `--as=system:serviceaccount:${ns}:oncall`;
    const annotate = await kubectl(["annotate", "whdel", "rbac-1", "-n", ns, "hookline.dev/replay=not allowed to", as]);
    expect(annotate.code).not.toBe(0);
    expect(annotate.stderr).toMatch(/forbidden/i);
    await kubectlOk(["create", "-f", "-", as], { input: JSON.stringify(replay(ns, "by-oncall", { reason: "on call replays INC-9", selector: { subscriptions: ["rbac"] } })) });
    const done = await completed(ns, "by-oncall");
    expect(done.status).toMatchObject({ matched: 1, succeeded: 1 });
    expect((await getObj("whdel", ns, "rbac-1"))!.status!.phase).toBe("Succeeded");
  });

  it("waits for its target (Pending, naming spec.target.subscription) and for an older replay of the same subscriptions, then runs", async () => {
    const { ns } = f;
    let fixed = false;
    // The first replay's requests wait until the second is seen queued, so the first is Running
    // throughout whatever the machine's pace (CI once saw it finish before the second came).
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const r = await f.receiver(() => (fixed ? held.then(() => 200) : 500));
    const later = await f.receiver(() => 200);
    const names = ["w-1", "w-2", "w-3", "w-4"];
    await apply([subscription(ns, "waits", { url: r.url(), ...failFast }), ...names.map((n) => delivery(ns, n, "waits"))]);
    await waitForPhase(ns, names, "DeadLettered");
    fixed = true;
    await apply(replay(ns, "first", { reason: "the older replay", selector: { subscriptions: ["waits"] }, concurrency: 1 }));
    await waitFor(async () => (await getObj("whrep", ns, "first"))?.status?.phase === "Running", { description: "first running" });
    await apply(replay(ns, "second", { reason: "the newer replay", selector: { subscriptions: ["waits"] }, target: { subscription: "not-yet" } }));
    const queued = await waitFor(async () => {
      const s = (await getObj("whrep", ns, "second"))?.status;
      return s?.conditions?.find((c: { type: string; reason: string }) => c.type === "Progressing" && c.reason === "Queued") ? s : undefined;
    }, { description: "second queued" });
    expect(queued.phase).toBe("Pending");
    expect(queued.conditions.find((c: { type: string }) => c.type === "Progressing").message).toContain("WebhookReplay first");
    release();
    await completed(ns, "first");
    const waiting = await waitFor(async () => {
      const s = (await getObj("whrep", ns, "second"))?.status;
      return s?.conditions?.find((c: { type: string; reason: string }) => c.type === "Progressing" && c.reason === "TargetNotFound") ? s : undefined;
    }, { description: "second waits for its target" });
    expect(waiting.phase).toBe("Pending");
    expect(waiting.conditions.find((c: { type: string }) => c.type === "Progressing").message).toContain("spec.target.subscription: WebhookSubscription not-yet does not exist");
    await waitFor(async () => (await events(ns, "second")).some((e) => e.reason === "ReplayWaiting" && e.type === "Warning"), { description: "ReplayWaiting Event" });
    await apply(subscription(ns, "not-yet", { url: later.url() }));
    const done = await completed(ns, "second");
    // The first replay delivered them all: none is a dead letter any more.
    expect(done.status).toMatchObject({ phase: "Completed", matched: 0, attempted: 0 });
    expect(later.requests).toHaveLength(0);
  });

  it("takes the largest inputs: 256 subscriptions in the selector, a 1,024-character non-ASCII reason", async () => {
    const { ns } = f;
    let fixed = false;
    const r = await f.receiver(() => (fixed ? 200 : 500));
    await apply([subscription(ns, "big", { url: r.url(), ...failFast }), delivery(ns, "big-1", "big")]);
    await waitForPhase(ns, "big-1", "DeadLettered");
    fixed = true;
    // 1,024 UTF-16 code units, the emoji (a surrogate pair) kept whole.
    let reason = `INC-1 ${"Zoë 日本 😀 ".repeat(200)}`.slice(0, 1024);
    if (/[\ud800-\udbff]$/.test(reason)) reason = `${reason.slice(0, 1023)}!`;
    expect(reason).toHaveLength(1024);
    const subs = ["big", ...Array.from({ length: 255 }, (_, i) => `absent-${i}`)];
    await apply(replay(ns, "largest", { reason, selector: { subscriptions: subs, eventTypes: Array.from({ length: 100 }, (_, i) => (i === 99 ? "order.*" : `type-${i}.*`)) } }));
    const done = await completed(ns, "largest");
    expect(done.status).toMatchObject({ matched: 1, succeeded: 1 });
    expect((await getObj("whdel", ns, "big-1"))!.status!.lastReplay.reason).toBe(reason);
    const tooMany = await kubectl(["create", "-f", "-"], { input: JSON.stringify(replay(ns, "too-many", { reason: "too many of them", selector: { subscriptions: [...subs, "one-more"] } })) });
    expect(tooMany.code).not.toBe(0);
    expect(tooMany.stderr).toMatch(/spec.selector.subscriptions: Too many: 257/);
    const blank = await kubectl(["create", "-f", "-"], { input: JSON.stringify(replay(ns, "blank", { reason: "       " })) });
    expect(blank.stderr).toContain("spec.reason");
  });
});
