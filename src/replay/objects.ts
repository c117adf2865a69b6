// Reconciles one WebhookReplay key: checks its spec (an older CRD may have let a bad one through:
// Failed, naming the field), waits while its target cannot take deliveries or while an older
// replay of the same subscriptions runs (Pending, the Progressing condition saying why), starts
// it (persisted first: Running, startedAt), and hands it to the replay engine (replay.ts) as a
// run whose progress is this object's status. A Running replay is resumed by whichever replica
// leads. Events on the object: ReplayStarted, ReplayWaiting, ReplayQueued, ReplaySkipped,
// ReplayFinished, ReplayFailed.
import type { Logger } from "pino";
import { replaySpecSchema, type ReplaySpec, type ReplayStatus } from "../api/replay.js";
import { REPLAY } from "../api/names.js";
import { conditionDiffers, setCondition, type ConditionInput } from "../core/conditions.js";
import type { ReplaySelection } from "../core/replay-selector.js";
import { fromRfc3339, toRfc3339 } from "../core/rfc3339.js";
import { ApiError } from "../kube/client.js";
import type { EventSink } from "../kube/events.js";
import type { StatusWriter } from "../kube/status-writer.js";
import { objectKey, splitKey } from "../kube/types.js";
import type { Result } from "../runtime/controller.js";
import type { Expectations } from "../runtime/expectations.js";
import { formatZodError, type Caches } from "../delivery/caches.js";
import { REPLAYS, replayRef, subscriptionKey, type ReplayObject } from "../delivery/objects.js";
import { progressStatus, type Replayer, type ReplayJob, type ReplayProgress } from "./replay.js";

export interface ReplayObjectsDeps {
  caches: Caches;
  replayer: Pick<Replayer, "isRunning" | "conflicting" | "start">;
  statusWriter: StatusWriter;
  events: EventSink;
  expectations: Expectations;
  log: Logger;
  /** Queue a WebhookReplay key again (its run ended). */
  requeue: (key: string) => void;
  now?: () => number;
}

const COMPLETE = "Complete";
/** A queued replay looks again this often at the latest. */
const QUEUED_RECHECK_MS = 5_000;
const PROGRESSING = "Progressing";

const finished = (r: ReplayObject) => r.status?.phase === "Completed" || r.status?.phase === "Failed";
const runKeyOf = (key: string) => `replay/${key}`;

/** Older first: creation time, then name (the order replays of the same subscriptions run in). */
function older(a: ReplayObject, b: ReplayObject): boolean {
  const ta = Date.parse(a.metadata.creationTimestamp ?? "") || 0;
  const tb = Date.parse(b.metadata.creationTimestamp ?? "") || 0;
  return ta < tb || (ta === tb && a.metadata.name < b.metadata.name);
}

/** The subscriptions a replay reads from or sends to; undefined: every one of the namespace. */
function touches(spec: ReplaySpec): Set<string> | undefined {
  if (!spec.selector.subscriptions?.length) return undefined;
  return new Set([...spec.selector.subscriptions, ...(spec.target ? [spec.target.subscription] : [])]);
}

const overlap = (a: ReadonlySet<string> | undefined, b: ReadonlySet<string> | undefined) => !a || !b || [...a].some((s) => b.has(s));

export class ReplayObjects {
  private readonly now: () => number;
  private readonly specs = new WeakMap<object, { ok: true; spec: ReplaySpec } | { ok: false; message: string }>();

  constructor(private readonly d: ReplayObjectsDeps) {
    this.now = d.now ?? Date.now;
  }

  /** The WebhookReplays of a namespace that have not ended (they may wait for a run or a subscription). */
  unfinishedIn(namespace: string): string[] {
    return [...this.d.caches.replaysIn(namespace)].filter((r) => !finished(r)).map((r) => objectKey(r.metadata));
  }

  async reconcile(key: string): Promise<Result | void> {
    const obj = this.d.caches.replay(key);
    // Deleted: a run still going stops at its next progress write (404).
    if (!obj || obj.metadata.deletionTimestamp || finished(obj)) return;
    if (this.d.expectations.check(key, obj.metadata.resourceVersion, obj.metadata.uid) === "wait") return { requeueAfter: this.d.expectations.untilExpiry(key) };
    if (this.d.replayer.isRunning(runKeyOf(key))) return;
    const parsed = this.spec(obj);
    if (!parsed.ok) return this.fail(obj, parsed.message);
    const { spec } = parsed;
    const targetProblem = this.targetProblem(obj, spec);
    if (obj.status?.phase === "Running" && obj.status.startedAt) {
      if (targetProblem) return this.wait(obj, targetProblem.reason, targetProblem.message, "ReplayWaiting");
      this.d.replayer.start(this.job(obj, spec, obj.status));
      return;
    }
    const blocker = this.blocker(obj, spec);
    if (blocker) {
      await this.wait(obj, "Queued", `waiting for ${blocker} to finish: replays of the same subscriptions run one at a time, oldest first`, "ReplayQueued");
      // Woken when the other ends; this is the fallback should a cache lag hide its end.
      return { requeueAfter: QUEUED_RECHECK_MS };
    }
    if (targetProblem) return this.wait(obj, targetProblem.reason, targetProblem.message, "ReplayWaiting");
    await this.begin(obj, spec);
  }

  private spec(obj: ReplayObject): { ok: true; spec: ReplaySpec } | { ok: false; message: string } {
    let p = this.specs.get(obj);
    if (!p) {
      const r = replaySpecSchema.safeParse(obj.spec);
      p = r.success ? { ok: true, spec: r.data } : { ok: false, message: formatZodError(r.error) };
      this.specs.set(obj, p);
    }
    return p;
  }

  /** Why the target cannot take deliveries now, naming the field; undefined when it can (or there is none). */
  private targetProblem(obj: ReplayObject, spec: ReplaySpec): { reason: string; message: string } | undefined {
    if (!spec.target) return undefined;
    const name = spec.target.subscription;
    const sub = this.d.caches.subscription(subscriptionKey(obj.metadata.namespace!, name));
    const view = this.d.caches.subscriptionView(sub);
    if (view.kind === "missing") return { reason: "TargetNotFound", message: `spec.target.subscription: WebhookSubscription ${name} does not exist in namespace ${obj.metadata.namespace}; the replay starts when it does` };
    if (view.kind === "invalid") return { reason: "TargetInvalid", message: `spec.target.subscription: WebhookSubscription ${name} is invalid (${view.message}); the replay starts when it is fixed` };
    if (view.policy.paused) return { reason: "TargetPaused", message: `spec.target.subscription: WebhookSubscription ${name} is paused; the replay goes on when it is resumed` };
    return undefined;
  }

  /** An older unfinished replay (or a run) of the same subscriptions, named; undefined when there is none. */
  private blocker(obj: ReplayObject, spec: ReplaySpec): string | undefined {
    const ns = obj.metadata.namespace!;
    const mine = touches(spec);
    for (const other of this.d.caches.replaysIn(ns)) {
      if (other === obj || other.metadata.name === obj.metadata.name || finished(other) || !older(other, obj)) continue;
      const p = this.spec(other);
      if (p.ok && overlap(mine, touches(p.spec))) return `${REPLAY.kind} ${other.metadata.name}`;
    }
    const run = this.d.replayer.conflicting(ns, mine, runKeyOf(objectKey(obj.metadata)));
    if (run) return run.name ? `${REPLAY.kind} ${run.name}` : `the bulk replay of subscription ${[...(run.touches ?? [])].join(", ")}`;
    // A bulk replay a previous leader started and this one has not resumed yet.
    for (const sub of this.d.caches.subscriptions.values()) {
      const lr = sub.status?.lastReplay;
      if (sub.metadata.namespace === ns && lr?.id && !lr.finishedAt && (!mine || mine.has(sub.metadata.name))) return `the bulk replay of subscription ${sub.metadata.name}`;
    }
    return undefined;
  }

  /** Pending (or a Running one held): the Progressing condition says why; an Event when the reason changes. */
  private async wait(obj: ReplayObject, reason: string, message: string, event: string): Promise<void> {
    const cond: ConditionInput = { type: PROGRESSING, status: "False", reason, message };
    if (!conditionDiffers(obj.status?.conditions, cond, obj.metadata.generation)) return;
    const pending = obj.status?.phase !== "Running";
    const conditions = setCondition(obj.status?.conditions, cond, this.now(), obj.metadata.generation);
    await this.write(obj, { observedGeneration: obj.metadata.generation, ...(pending ? { phase: "Pending" as const } : {}), conditions: pending ? setCondition(conditions, { type: COMPLETE, status: "Unknown", reason, message }, this.now(), obj.metadata.generation) : conditions });
    this.d.events.record(replayRef(obj), event === "ReplayQueued" ? "Normal" : "Warning", event, message);
  }

  /** The spec cannot be used (an older, laxer CRD let it in): Failed, naming the field. */
  private async fail(obj: ReplayObject, message: string): Promise<void> {
    const now = this.now();
    let conditions = setCondition(obj.status?.conditions, { type: COMPLETE, status: "False", reason: "InvalidSpec", message }, now, obj.metadata.generation);
    conditions = setCondition(conditions, { type: PROGRESSING, status: "False", reason: "InvalidSpec", message }, now, obj.metadata.generation);
    await this.write(obj, { observedGeneration: obj.metadata.generation, phase: "Failed", finishedAt: toRfc3339(now), conditions });
    this.d.events.record(replayRef(obj), "Warning", "ReplayFailed", `not run: ${message}`);
  }

  /** Persists that it started (a restart resumes it from here), then runs it. */
  private async begin(obj: ReplayObject, spec: ReplaySpec): Promise<void> {
    const now = this.now();
    const message = spec.dryRun ? "counting what the selector matches (dry run: nothing is sent)" : `replaying, ${spec.concurrency} at a time`;
    let conditions = setCondition(obj.status?.conditions, { type: PROGRESSING, status: "True", reason: "Running", message }, now, obj.metadata.generation);
    conditions = setCondition(conditions, { type: COMPLETE, status: "Unknown", reason: "Running", message }, now, obj.metadata.generation);
    const status: ReplayStatus = { observedGeneration: obj.metadata.generation, phase: "Running", startedAt: toRfc3339(now), matched: 0, attempted: 0, succeeded: 0, failed: 0, deduped: 0, skipped: 0, inFlight: [], conditions };
    await this.write(obj, { ...status, cursor: null, finishedAt: null });
    const where = spec.target ? ` to subscription ${spec.target.subscription}` : "";
    const which = spec.selector.subscriptions?.length ? `subscriptions ${spec.selector.subscriptions.join(", ")}` : "every subscription";
    this.d.events.record(replayRef(obj), "Normal", "ReplayStarted", `${spec.dryRun ? "dry run: counting" : "replaying"} ${spec.phases.join(" and ")} deliveries of ${which}${where}: ${spec.reason}`);
    this.d.replayer.start(this.job(obj, spec, status));
  }

  /** The replay as the engine's run; its progress is this object's status. */
  private job(obj: ReplayObject, spec: ReplaySpec, status: ReplayStatus): ReplayJob {
    const key = objectKey(obj.metadata);
    const { namespace, name } = splitKey(key);
    const startedAt = fromRfc3339(status.startedAt) ?? this.now();
    const before = spec.finishedBefore !== undefined ? Math.min(Date.parse(spec.finishedBefore), startedAt) : startedAt;
    const selection: ReplaySelection = {
      subscriptions: spec.selector.subscriptions?.length ? new Set(spec.selector.subscriptions) : undefined,
      eventTypes: spec.selector.eventTypes,
      reasons: spec.selector.reasons?.length ? new Set(spec.selector.reasons) : undefined,
      phases: new Set(spec.phases),
      finishedAfter: spec.finishedAfter !== undefined ? Date.parse(spec.finishedAfter) : undefined,
      finishedBefore: before,
    };
    const progress: ReplayProgress = {
      matched: status.matched ?? 0,
      attempted: status.attempted ?? 0,
      succeeded: status.succeeded ?? 0,
      failed: status.failed ?? 0,
      deduped: status.deduped ?? 0,
      skipped: status.skipped ?? 0,
      cursor: status.cursor,
      inFlight: [...(status.inFlight ?? [])],
    };
    let conditions = status.conditions;
    const skipReasons = new Set<string>();
    return {
      runKey: runKeyOf(key),
      id: obj.metadata.uid ?? key,
      namespace,
      reason: spec.reason,
      name,
      concurrency: spec.concurrency,
      dryRun: spec.dryRun,
      selection,
      ...(spec.target ? { target: spec.target.subscription } : {}),
      touches: touches(spec),
      progress,
      save: async (p, done) => {
        const now = this.now();
        const summary = `matched ${p.matched}: attempted ${p.attempted} (succeeded ${p.succeeded}, failed ${p.failed}, deduped ${p.deduped}), skipped ${p.skipped}`;
        if (done) {
          const reason = spec.dryRun ? "DryRun" : "Completed";
          conditions = setCondition(conditions, { type: COMPLETE, status: "True", reason, message: spec.dryRun ? `dry run: ${p.matched} deliveries match; nothing was sent` : summary }, now, obj.metadata.generation);
          conditions = setCondition(conditions, { type: PROGRESSING, status: "False", reason, message: "finished" }, now, obj.metadata.generation);
        } else conditions = setCondition(conditions, { type: PROGRESSING, status: "True", reason: "Running", message: summary }, now, obj.metadata.generation);
        const next = {
          observedGeneration: obj.metadata.generation,
          phase: done ? ("Completed" as const) : ("Running" as const),
          matched: p.matched,
          ...progressStatus(p, done ? toRfc3339(now) : undefined),
          conditions,
        };
        await this.write(obj, next);
        if (done) this.d.events.record(replayRef(obj), p.failed ? "Warning" : "Normal", "ReplayFinished", `${spec.dryRun ? "dry run, " : ""}${summary}`);
      },
      held: () => this.targetProblem(obj, spec)?.message,
      skippedBecause: (detail) => {
        if (skipReasons.has(detail) || skipReasons.size >= 20) return;
        skipReasons.add(detail);
        this.d.events.record(replayRef(obj), "Warning", "ReplaySkipped", `skipped: ${detail}`);
      },
      ended: () => this.d.requeue(key),
    };
  }

  /** Writes the status (merge patch, no precondition: the operator owns it); 404 ends the run. */
  private async write(obj: ReplayObject, status: Record<string, unknown>): Promise<void> {
    try {
      const updated = await this.d.statusWriter.patchStatus(REPLAYS, obj.metadata.namespace!, obj.metadata.name, status);
      this.d.expectations.expect(objectKey(obj.metadata), updated.metadata.resourceVersion, obj.metadata.uid);
    } catch (err) {
      if (err instanceof ApiError && err.isNotFound) throw new Error(`${REPLAY.kind} ${obj.metadata.name} was deleted`);
      throw err;
    }
  }
}
