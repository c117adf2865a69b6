// Replays: the one engine behind every way to ask for one.
//   kubectl annotate whdel NAME hookline.dev/replay="REASON"            one dead letter
//   kubectl annotate whsub NAME hookline.dev/replay-dead-letters="REASON" [hookline.dev/replay-concurrency=N]
//   a WebhookReplay object (replay-objects.ts)                            a selector, a window, a target
// A replay is one immediate attempt outside the retry schedule. A run (a bulk annotation or a
// WebhookReplay) walks its candidates (replay-candidates.ts: dead letters oldest first, then
// Succeeded deliveries by name), in batches of `concurrency` in parallel, each through the
// delivery work queue (one worker per key, the endpoint's request slots and Retry-After hold).
// Its progress (counts, the cursor, the batch in flight) is persisted by the run's owner, and
// each delivery it handles carries the run's id in status.lastReplay.requestId, so a restarted
// operator or a new leader resumes it without repeating or losing one.
//
// Dedupe (the DLQ specification's): two deliveries with the same SHA-256 of webhook id and
// payload and the same destination are one replay: the first is sent, a later one is marked
// Deduped by it (status.lastReplay.dedupedBy) and counted as attempted, as is one whose twin is
// still pending at the destination.
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { ANNOTATIONS, isTerminalPhase, REPLAY_CONCURRENCY, REPLAY_REASON_MAX_LENGTH, REPLAY_REASON_MIN_LENGTH } from "../api/names.js";
import type { SubscriptionReplayStatus } from "../api/subscription.js";
import { discard, type ReplayInput } from "../core/attempt/outcome.js";
import { matchesEventType } from "../core/attempt/policy.js";
import type { ReplaySelection } from "../core/replay-selector.js";
import { formatCursor } from "../core/replay-selector.js";
import { toRfc3339 } from "../core/rfc3339.js";
import { ignoreNotFound, type KubeClient } from "../kube/client.js";
import type { EventSink } from "../kube/events.js";
import type { StatusWriter } from "../kube/status-writer.js";
import { objectKey, splitKey, type ResourceType } from "../kube/types.js";
import type { Metrics } from "../observability/metrics.js";
import type { Result } from "../runtime/controller.js";
import type { Expectations } from "../runtime/expectations.js";
import type { Caches } from "../delivery/caches.js";
import type { Finals, OutcomeMeta } from "../delivery/finals.js";
import { DELIVERIES, deliveryRef, SUBSCRIPTIONS, subscriptionKey, subscriptionRef, type DeliveryObject, type SubscriptionObject } from "../delivery/objects.js";
import type { OutcomeWriter } from "../delivery/outcome-writer.js";
import { dedupeKey, loadRequestBody } from "../delivery/payload.js";
import { replayCandidates, type Candidate } from "./candidates.js";
import { traceOf } from "../delivery/trace.js"; // [tracing]
import { sharedAbortController } from "../runtime/shared-abort.js";
import type { DeliveryStep } from "../delivery/engine/step.js";

/** What replay needs of the index of finished deliveries. */
export interface DeadLetterIndex {
  /** Whether a finished delivery carries a replay annotation not yet handled. */
  replayRequested(key: string): boolean;
}

export interface ReplayerDeps {
  client: KubeClient;
  caches: Caches;
  terminal: DeadLetterIndex;
  /** The delivery step the transports use: Secrets, admission (admitReplay), attempt, outcome. */
  step: DeliveryStep;
  outcomes: OutcomeWriter<OutcomeMeta>;
  finals: Finals;
  statusWriter: StatusWriter;
  events: EventSink;
  metrics: Metrics;
  expectations: Expectations;
  log: Logger;
  /** Re-run the subscription's reconcile (status rollup) soon. */
  touchSubscription: (subKey: string) => void;
  /** A run ended: the WebhookReplays of its namespace waiting for it look again. */
  runEnded?: (namespace: string) => void;
  /** Queue a delivery key in the delivery controller (one worker per key, like any change). */
  enqueueDelivery: (key: string) => void;
}

export function validReason(reason: string | undefined): reason is string {
  return reason !== undefined && reason.trim().length >= REPLAY_REASON_MIN_LENGTH && reason.length <= REPLAY_REASON_MAX_LENGTH;
}

/** Why a replay reason is refused, naming the bounds and what was given. */
export function reasonProblem(reason: string): string {
  return `a reason of ${REPLAY_REASON_MIN_LENGTH} to ${REPLAY_REASON_MAX_LENGTH} characters is required (this one has ${reason.trim().length < REPLAY_REASON_MIN_LENGTH ? reason.trim().length : reason.length}), e.g. hookline.dev/replay="endpoint fixed, INC-42"`;
}

/** What happened to one candidate: `interrupted` (a shutdown) is redone by the resumed run. */
export type ReplayResult = "succeeded" | "failed" | "deduped" | "skipped" | "interrupted";

/** The replay-concurrency annotation: default 5, clamped to 1..50; undefined when not a number. */
export function parseConcurrency(value: string | undefined): number | undefined {
  if (value === undefined || value.trim() === "") return REPLAY_CONCURRENCY.default;
  if (!/^-?\d+$/.test(value.trim())) return undefined;
  return Math.min(REPLAY_CONCURRENCY.max, Math.max(REPLAY_CONCURRENCY.min, Number(value.trim())));
}

/**
 * Whether one of `cached` (the deliveries the cache holds as pending at the destination with
 * dedupe key `dk`), other than the candidate `key`, is still pending: each is read again before
 * it counts, since the cache is a watch that may be behind. A twin that finished a moment ago,
 * or the candidate itself still held as pending, would otherwise dedupe a dead letter that
 * nothing else carries (under CI's load a bulk replay once discarded one so).
 */
export async function pendingTwin(key: string, dk: string, cached: readonly string[], read: (key: string) => Promise<DeliveryObject | undefined>): Promise<boolean> {
  for (const twin of cached) {
    if (twin === key) continue;
    const obj = await read(twin);
    if (obj && !obj.metadata.deletionTimestamp && !isTerminalPhase(obj.status?.phase) && dedupeKey(obj) === dk) return true;
  }
  return false;
}

/** A run's counts and where it is; persisted by its owner after every batch. */
export interface ReplayProgress {
  matched: number;
  attempted: number;
  succeeded: number;
  failed: number;
  deduped: number;
  skipped: number;
  cursor: string | undefined;
  inFlight: string[];
}

export function emptyProgress(): ReplayProgress {
  return { matched: 0, attempted: 0, succeeded: 0, failed: 0, deduped: 0, skipped: 0, cursor: undefined, inFlight: [] };
}

/** The progress as both status kinds store it (a subscription's lastBulkReplay, a WebhookReplay's status). */
export function progressStatus(p: ReplayProgress, finishedAt: string | undefined) {
  return {
    attempted: p.attempted,
    succeeded: p.succeeded,
    failed: p.failed,
    deduped: p.deduped,
    skipped: p.skipped,
    inFlight: p.inFlight,
    ...(p.cursor ? { cursor: p.cursor } : {}),
    ...(finishedAt ? { finishedAt } : {}),
  };
}

/** One run: a bulk annotation or a WebhookReplay, as the engine sees it. */
export interface ReplayJob {
  /** The run's key in this process (`subscription/ns/name`, `replay/ns/name`). */
  runKey: string;
  /** Recorded on every delivery it handles (status.lastReplay.requestId). */
  id: string;
  namespace: string;
  reason: string;
  /** The WebhookReplay's name (status.lastReplay.replay). */
  name?: string;
  concurrency: number;
  dryRun: boolean;
  selection: ReplaySelection;
  /** Send to this subscription instead of each delivery's own. */
  target?: string;
  /** Subscriptions whose deliveries it replays or sends to (undefined: every one of the namespace). */
  touches: ReadonlySet<string> | undefined;
  progress: ReplayProgress;
  /** Persists the progress; `done`: the run ended. Throws when its owner is gone. */
  save(p: ReplayProgress, done: boolean): Promise<void>;
  /** Why the run must pause now (it resumes on its owner's next reconcile), if it must. */
  held?(): string | undefined;
  /** A candidate was skipped, and why (its owner says it once per reason). */
  skippedBecause?(detail: string): void;
  /** The run ended in this process, done or not (its owner looks again: resume, or the next run). */
  ended?(): void;
}

/** A dead letter of a run waiting for its turn in the delivery work queue. */
interface Intent {
  replay: ReplayInput;
  phase: string;
  done: (r: { result: ReplayResult; detail?: string }) => void;
}

/** How many candidates a dry run counts between two progress writes. */
const DRY_RUN_SAVE_EVERY = 500;

export class Replayer {
  /** The step's clock. */
  private readonly now: () => number;
  /** Runs in this process, by run key, with what they touch. */
  private readonly running = new Map<string, { promise: Promise<void>; job: ReplayJob }>();
  private abort = sharedAbortController();
  private stopping = false;
  private readonly intents = new Map<string, Intent>();

  constructor(private readonly d: ReplayerDeps) {
    this.now = d.step.now;
  }

  /**
   * Whether a delivery key is replay's to reconcile: a run's candidate, a finished delivery
   * annotated for replay, or an active one annotated (refused: it is not dead-lettered).
   */
  claims(key: string): boolean {
    if (this.intents.has(key)) return true;
    const active = this.d.caches.delivery(key);
    if (!active) return this.d.terminal.replayRequested(key);
    return active.metadata.annotations?.[ANNOTATIONS.replay] !== undefined && !active.metadata.deletionTimestamp;
  }

  /** The delivery controller's reconcile for a key replay claims (one worker per key, like any change). */
  async reconcile(key: string, signal: AbortSignal): Promise<Result | void> {
    const intent = this.intents.get(key);
    if (!intent) {
      const active = this.d.caches.delivery(key);
      if (active) return this.refuse(active, `it is not dead-lettered (phase ${active.status?.phase ?? "Pending"})`);
      return this.single(key, signal);
    }
    const obj = await this.d.outcomes.fetch(key);
    if (!obj || obj.status?.phase !== intent.phase || obj.status.lastReplay?.requestId === intent.replay.requestId) {
      return this.settle(key, { result: "skipped", detail: obj ? `it is ${obj.status?.phase ?? "Pending"} now` : "it was deleted" });
    }
    try {
      const r = await this.attempt(key, obj, intent.replay, signal);
      if (r.outcome === "parked") return; // woken when a request slot frees
      if (r.outcome === "wait") return { requeueAfter: r.inMs }; // the endpoint's Retry-After hold
      this.settle(key, { result: r.outcome, ...(r.detail ? { detail: r.detail } : {}) });
    } catch (err) {
      this.d.log.warn({ delivery: key, err: (err as Error).message }, "replay failed");
      this.settle(key, { result: "failed" });
    }
  }

  private settle(key: string, r: { result: ReplayResult; detail?: string }): void {
    const intent = this.intents.get(key);
    this.intents.delete(key);
    intent?.done(r);
  }

  /** A replay annotation on a delivery that is not in the active cache (finished). */
  private async single(key: string, signal: AbortSignal): Promise<Result | void> {
    if (!this.d.terminal.replayRequested(key)) return;
    const obj = await this.d.outcomes.fetch(key);
    const reason = obj?.metadata.annotations?.[ANNOTATIONS.replay];
    if (!obj || reason === undefined) return;
    const phase = obj.status?.phase;
    if (!validReason(reason)) return this.refuse(obj, reasonProblem(reason));
    if (phase === "Discarded") return this.refuse(obj, `it is Discarded (${obj.status?.discard?.reason ?? "unknown reason"}) and is never replayed`);
    if (phase !== "DeadLettered") return this.refuse(obj, `it is not dead-lettered (phase ${phase ?? "Pending"})`);
    const result = await this.attempt(key, obj, { reason }, signal);
    if (result.outcome === "parked") return; // woken when a request slot frees
    if (result.outcome === "wait") return { requeueAfter: result.inMs };
    if (result.outcome === "interrupted") return; // the annotation stays: the next leader does it
    this.d.metrics.dlqOperations.inc({ operation: "replay" });
    if (result.outcome === "skipped") return this.refuse(obj, result.detail ?? "it cannot be replayed now");
    await this.removeAnnotation(DELIVERIES, obj.metadata.namespace!, obj.metadata.name, ANNOTATIONS.replay);
  }

  /** Removes a replay annotation that cannot be honoured, with a Warning Event. */
  private async refuse(obj: DeliveryObject, why: string): Promise<void> {
    const reason = obj.metadata.annotations?.[ANNOTATIONS.replay] ?? "";
    this.d.events.record(deliveryRef(obj), "Warning", "ReplayRefused", `replay "${reason.slice(0, 200)}" refused: ${why}`);
    await this.removeAnnotation(DELIVERIES, obj.metadata.namespace!, obj.metadata.name, ANNOTATIONS.replay);
  }

  /**
   * One attempt outside the retry schedule, to the delivery's own subscription or a target. A
   * replay is an operator's explicit request: it bypasses backoff, breaker and health, but not
   * the request slots (it parks, woken when one frees) nor the endpoint's Retry-After hold.
   */
  private async attempt(
    key: string,
    obj: DeliveryObject,
    replay: ReplayInput,
    signal: AbortSignal,
  ): Promise<{ outcome: "succeeded" | "failed" | "skipped" | "interrupted" | "parked"; detail?: string } | { outcome: "wait"; inMs: number }> {
    const parsed = this.d.caches.deliverySpec(obj);
    if (!parsed.ok) return { outcome: "skipped", detail: parsed.message };
    const namespace = obj.metadata.namespace!;
    const destination = replay.target ?? parsed.spec.subscriptionRef.name;
    const whose = replay.target ? `the target subscription ${replay.target}` : "its subscription";
    const subKey = subscriptionKey(namespace, destination);
    const subObj = this.d.caches.subscription(subKey);
    const view = this.d.caches.subscriptionView(subObj);
    if (view.kind !== "ok" || !subObj) return { outcome: "skipped", detail: view.kind === "missing" ? `${whose} does not exist` : `${whose} is invalid` };
    const policy = view.policy;
    if (policy.paused) return { outcome: "skipped", detail: `${whose} is paused; replay it after resuming the subscription` };
    if (!matchesEventType(policy.eventTypes, parsed.spec.eventType)) return { outcome: "skipped", detail: `${whose} does not list event type ${parsed.spec.eventType}; add the type first` };
    // The same lookup as the transports': signing keys and receiver credentials.
    const { secret, keys, creds } = await this.d.step.gather(namespace, policy, true);
    // Only the receiver credentials are missing: nothing is sent and the replay is tried again.
    if (creds?.kind === "missing" && secret === creds) throw new Error(creds.message);
    if (secret.kind === "missing") return { outcome: "skipped", detail: secret.message };
    // The replay's admission (core/attempt/plan.ts admitReplay), committed in the same turn as the attempt.
    const { action, endpoint } = this.d.step.planReplay(key, { key: subKey, object: { uid: subObj.metadata.uid, status: subObj.status }, view }, policy);
    if (action.type === "WaitUntil") return { outcome: "wait", inMs: Math.max(1, action.at - this.now()) };
    if (action.type === "Park") {
      this.d.step.park(endpoint, key, action.why, () => this.d.enqueueDelivery(key));
      return { outcome: "parked" };
    }
    const answer: { delivered?: boolean | "interrupted" } = {};
    const written = await this.d.step.run(
      {
        key,
        endpoint,
        policy,
        action,
        secrets: { keys, creds }, // [receiver-credentials]
        message: (s) => loadRequestBody(this.d.client, obj, s, this.d.caches.payloads),
        signal,
        status: obj.status,
        replay,
        trace: traceOf(obj), // [tracing] the executor's span is the replay's
      },
      async (attempt) => {
        const c = attempt.classification;
        const delivered = (answer.delivered = c === "interrupted" ? "interrupted" : c.verdict === "delivered");
        const compute = (status: DeliveryObject["status"]) => this.d.step.outcome(status, obj.metadata.generation, attempt, policy, replay);
        const ownSubKey = subscriptionKey(namespace, parsed.spec.subscriptionRef.name);
        const w = await this.d.outcomes.writeOrKeep(key, obj, compute, { subKey: ownSubKey, replay: true });
        if (w?.final) this.d.finals.record(w.obj, w.final, ownSubKey, true);
        else if (w && delivered !== "interrupted") this.recordedOnly(w.obj, replay, delivered, attempt.responseStatus ?? attempt.error);
        return w;
      },
    );
    if (!written) return { outcome: "skipped", detail: "it was deleted" };
    if (answer.delivered === "interrupted") return { outcome: "interrupted" };
    return { outcome: answer.delivered ? "succeeded" : "failed" };
  }

  /** A replay that changed no phase (to a target, or a delivered event again) says what it did. */
  private recordedOnly(obj: DeliveryObject, replay: ReplayInput, delivered: boolean, answer: number | string | undefined): void {
    const where = replay.target ? `to subscription ${replay.target}` : "again";
    const what = typeof answer === "number" ? `HTTP ${answer}` : (answer ?? "no response");
    this.d.events.record(deliveryRef(obj), delivered ? "Normal" : "Warning", delivered ? "Replayed" : "ReplayFailed", `sent ${where} (${what}); its phase stays ${obj.status?.phase ?? "Pending"}`);
  }

  // ------------------------------------------------------------------------------------------
  // Runs

  /** Whether a run is going on in this process under `runKey`. */
  isRunning(runKey: string): boolean {
    return this.running.has(runKey);
  }

  /** A run in this process that touches one of `subs` in `namespace` (undefined: any subscription), other than `except`. */
  conflicting(namespace: string, subs: ReadonlySet<string> | undefined, except?: string): ReplayJob | undefined {
    for (const [runKey, { job }] of this.running) {
      if (runKey === except || job.namespace !== namespace) continue;
      if (!subs || !job.touches || [...subs].some((s) => job.touches!.has(s))) return job;
    }
    return undefined;
  }

  /** Starts a run in the background (its owner persisted that it started, so a restart resumes it). */
  start(job: ReplayJob): void {
    if (this.stopping || this.running.has(job.runKey)) return;
    const promise = this.run(job, this.abort.signal)
      .catch((err: Error) => this.d.log.warn({ replay: job.runKey, err: err.message }, "replay run interrupted; it resumes on the next reconcile"))
      .finally(() => {
        this.running.delete(job.runKey);
        job.ended?.();
        this.d.runEnded?.(job.namespace);
      });
    this.running.set(job.runKey, { promise, job });
  }

  /**
   * Stops the runs: no new batch starts; the batches in flight get `graceMs` to finish, then
   * their requests are interrupted (recorded so a resumed run redoes them).
   */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    const all = Promise.allSettled([...this.running.values()].map((r) => r.promise));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise((r) => (timer = setTimeout(r, graceMs)))]);
    clearTimeout(timer);
    this.abort.abort(new Error("operator stopping"));
    // Replays not started yet are not done: a resumed run does them.
    for (const key of [...this.intents.keys()]) this.settle(key, { result: "interrupted" });
    await all;
  }

  /** Ready for a new leadership term. */
  restart(): void {
    this.stopping = false;
    this.abort = sharedAbortController();
  }

  private async run(job: ReplayJob, signal: AbortSignal): Promise<void> {
    const p = job.progress;
    const seen = new Map<string, string>();
    this.checkStop(job, signal, true);
    const redo = await this.recount(job);
    if (redo.length) await this.replayBatch(job, redo, signal, seen);
    let batch: Candidate[] = [];
    let counted = 0;
    for await (const c of replayCandidates({ client: this.d.client, now: this.now }, job.namespace, job.selection, p.cursor)) {
      this.checkStop(job, signal, false);
      if (job.dryRun) {
        p.matched++;
        p.cursor = formatCursor(c.cursor);
        if (++counted % DRY_RUN_SAVE_EVERY === 0) await job.save(p, false);
        continue;
      }
      batch.push(c);
      if (batch.length < job.concurrency) continue;
      await this.takeBatch(job, batch, seen, signal);
      batch = [];
    }
    if (batch.length) await this.takeBatch(job, batch, seen, signal);
    await job.save(p, true);
  }

  /** Throws when the run must stop: a shutdown, or (`held`: at a batch boundary) its owner holds it. */
  private checkStop(job: ReplayJob, signal: AbortSignal, held: boolean): void {
    if (signal.aborted || this.stopping) throw new Error("operator stopping");
    const why = held ? job.held?.() : undefined;
    if (why) throw new Error(`held: ${why}`);
  }

  /** Counts a batch as matched and persists it as in flight (a restart redoes it), then replays it. */
  private async takeBatch(job: ReplayJob, batch: Candidate[], seen: Map<string, string>, signal: AbortSignal): Promise<void> {
    this.checkStop(job, signal, true);
    const p = job.progress;
    p.matched += batch.length;
    p.cursor = formatCursor(batch.at(-1)!.cursor);
    p.inFlight = batch.map((c) => c.key);
    await job.save(p, false);
    await this.replayBatch(job, p.inFlight, signal, seen);
  }

  /** Replays the batch in flight (all in parallel; one failing never stops the others) and counts it. */
  private async replayBatch(job: ReplayJob, keys: string[], signal: AbortSignal, seen: Map<string, string>): Promise<void> {
    const p = job.progress;
    p.inFlight = keys;
    const twins = new Map<string, Map<string, string[]>>();
    const results = await Promise.all(keys.map((k) => this.replayOne(job, k, seen, twins)));
    // Interrupted by a shutdown: nothing is counted; the batch stays in flight for the resumed run.
    if (results.some((r) => r.result === "interrupted") || signal.aborted) throw new Error("operator stopping");
    for (const r of results) {
      count(p, r.result);
      if (r.result === "skipped" && r.detail) job.skippedBecause?.(r.detail);
    }
    p.inFlight = [];
    await job.save(p, false);
  }

  /** The batch in flight at a crash: counts what it did; returns what it did not (to redo). */
  private async recount(job: ReplayJob): Promise<string[]> {
    const p = job.progress;
    const redo: string[] = [];
    for (const key of p.inFlight) {
      const obj = await this.d.outcomes.fetch(key);
      const r = obj?.status?.lastReplay;
      if (obj && r?.requestId === job.id && r.result) count(p, r.result === "Deduped" ? "deduped" : r.result === "Succeeded" ? "succeeded" : "failed");
      else if (obj && (obj.status?.phase === "DeadLettered" || obj.status?.phase === "Succeeded")) redo.push(key);
      else count(p, "skipped");
    }
    p.inFlight = [];
    return redo;
  }

  /** One candidate: read it again, dedupe it, or replay it through the delivery work queue. */
  private async replayOne(job: ReplayJob, key: string, seen: Map<string, string>, twins: Map<string, Map<string, string[]>>): Promise<{ result: ReplayResult; detail?: string }> {
    const obj = await this.d.outcomes.fetch(key);
    if (!obj) return { result: "skipped", detail: "a delivery was deleted after it matched" };
    const phase = obj.status?.phase;
    const lastReplay = obj.status?.lastReplay;
    if (lastReplay?.requestId === job.id && lastReplay.result) return { result: lastReplay.result === "Deduped" ? "deduped" : lastReplay.result === "Succeeded" ? "succeeded" : "failed" };
    if ((phase !== "DeadLettered" && phase !== "Succeeded") || !job.selection.phases.has(phase)) return { result: "skipped", detail: `a delivery was ${phase ?? "Pending"} when its turn came` };
    const destination = job.target ?? obj.spec?.subscriptionRef?.name ?? "";
    const replay: ReplayInput = { reason: job.reason, requestId: job.id, ...(job.name ? { name: job.name } : {}), ...(job.target ? { target: job.target } : {}) };
    const dk = dedupeKey(obj);
    if (dk !== undefined) {
      if (await pendingTwin(key, dk, this.pendingTwins(job.namespace, destination, twins).get(dk) ?? [], (k) => this.d.outcomes.fetch(k))) return this.markDeduped(obj, replay, undefined);
      const first = seen.get(`${destination}\u0000${dk}`);
      if (first !== undefined) return this.markDeduped(obj, replay, first);
      seen.set(`${destination}\u0000${dk}`, obj.metadata.name);
    }
    this.d.metrics.dlqOperations.inc({ operation: "replay" });
    // Through the delivery work queue: never beside another worker on the same key, and within
    // the request slots like any attempt.
    return new Promise((done) => {
      this.intents.set(key, { replay, phase, done });
      this.d.enqueueDelivery(key);
    });
  }

  /** The destination's pending deliveries in the cache, by dedupe key (once per batch and destination). */
  private pendingTwins(namespace: string, destination: string, cache: Map<string, Map<string, string[]>>): Map<string, string[]> {
    let out = cache.get(destination);
    if (out) return out;
    out = new Map<string, string[]>();
    for (const key of this.d.caches.deliveriesOf(subscriptionKey(namespace, destination))) {
      const obj = this.d.caches.delivery(key);
      const dk = obj ? dedupeKey(obj) : undefined;
      if (dk === undefined) continue;
      const same = out.get(dk);
      if (same) same.push(key);
      else out.set(dk, [key]);
    }
    cache.set(destination, out);
    return out;
  }

  /**
   * A candidate whose twin (same webhook id, payload and destination) this replay sends, or
   * which is pending there. A dead letter replayed to its own subscription is then a duplicate:
   * it leaves DeadLettered for Discarded (reason Duplicate), so the dead-letter count drops and
   * the next bulk replay does not send the event again. Nothing is lost: the twin carries the
   * event, and is a dead letter itself if it fails. Anything else keeps its phase.
   */
  private async markDeduped(obj: DeliveryObject, replay: ReplayInput, by: string | undefined): Promise<{ result: ReplayResult }> {
    const key = objectKey(obj.metadata);
    const { target, name, ...rest } = replay;
    const now = this.now();
    const lastReplay = { ...rest, at: toRfc3339(now), result: "Deduped" as const, ...(by ? { dedupedBy: by } : {}), ...(target ? { target } : {}), ...(name ? { replay: name } : {}) };
    const why = by ? `${by} has the same webhook id and payload and was replayed by the same replay` : "an equal delivery (same webhook id and payload) is pending";
    const w = await this.d.outcomes.write(key, obj, (s) => {
      if (s?.phase !== "DeadLettered" || target) return { status: { ...(s ?? {}), lastReplay } };
      const out = discard(s, obj.metadata.generation, now, "Duplicate", `a duplicate, not replayed: ${why}`);
      return { ...out, status: { ...out.status, lastReplay } };
    });
    if (!w) return { result: "skipped" };
    const subKey = subscriptionKey(splitKey(key).namespace, obj.spec?.subscriptionRef?.name ?? "");
    if (w.final) this.d.finals.record(w.obj, w.final, subKey, true);
    else this.d.events.record(deliveryRef(obj), "Normal", "ReplayDeduped", `not replayed: ${why}`);
    return { result: "deduped" };
  }

  // ------------------------------------------------------------------------------------------
  // The bulk annotation on a subscription: a run whose progress is the subscription's status.lastReplay.

  /**
   * Called from the subscription reconcile: starts, resumes or refuses a bulk replay. The run
   * itself continues in the background; the subscription key is queued again when it ends.
   */
  async bulk(sub: SubscriptionObject, _signal: AbortSignal): Promise<Result | void> {
    if (this.stopping) return;
    const subKey = objectKey(sub.metadata);
    const runKey = `subscription/${subKey}`;
    const annotation = sub.metadata.annotations?.[ANNOTATIONS.replayDeadLetters];
    const persisted = sub.status?.lastReplay;
    const inProgress = persisted && !persisted.finishedAt && persisted.id ? persisted : undefined;
    const refuse = async (why: string) => {
      this.d.events.record(subscriptionRef(sub), "Warning", "ReplayRefused", why);
      await this.removeAnnotation(SUBSCRIPTIONS, sub.metadata.namespace!, sub.metadata.name, ANNOTATIONS.replayDeadLetters, ANNOTATIONS.replayConcurrency);
    };

    if (this.running.has(runKey) || (inProgress && annotation !== undefined)) {
      if (annotation !== undefined) await refuse(`a bulk replay ("${inProgress?.reason ?? "running"}") is still running; annotate again when it has finished`);
      if (this.running.has(runKey)) return;
    }
    const paused = this.isPaused(sub);
    if (inProgress) {
      // A paused subscription holds its bulk replay too; unpausing it resumes the replay.
      if (!paused) this.start(this.bulkJob(subKey, inProgress));
      return;
    }
    if (annotation === undefined) return;

    const concurrency = parseConcurrency(sub.metadata.annotations?.[ANNOTATIONS.replayConcurrency]);
    if (!validReason(annotation)) return refuse(`bulk replay refused: ${reasonProblem(annotation)}`);
    if (paused) return refuse("bulk replay refused: the subscription is paused; resume it, then annotate again");
    if (concurrency === undefined) {
      return refuse(`bulk replay refused: ${ANNOTATIONS.replayConcurrency}="${sub.metadata.annotations?.[ANNOTATIONS.replayConcurrency]}" is not a number (1..50, default 5)`);
    }
    const other = this.conflicting(sub.metadata.namespace!, new Set([sub.metadata.name]), runKey);
    if (other) return refuse(`bulk replay refused: ${other.name ? `WebhookReplay ${other.name}` : "another replay"} is replaying this subscription's deliveries; annotate again when it has finished`);
    const state: SubscriptionReplayStatus = { reason: annotation, requestedAt: toRfc3339(this.now()), concurrency, attempted: 0, succeeded: 0, failed: 0, deduped: 0, skipped: 0, id: randomUUID(), inFlight: [] };
    // Persist first: from here a restart resumes this replay instead of losing it.
    await this.writeProgress(sub, state, true);
    await this.removeAnnotation(SUBSCRIPTIONS, sub.metadata.namespace!, sub.metadata.name, ANNOTATIONS.replayDeadLetters, ANNOTATIONS.replayConcurrency);
    // No count here: the operator's own count may be behind the API server's; the run lists what it walks.
    this.d.events.record(subscriptionRef(sub), "Normal", "ReplayStarted", `replaying the dead letters that finished before now, ${concurrency} at a time: ${annotation}`);
    this.start(this.bulkJob(subKey, state));
  }

  /** The bulk replay as a run: this subscription's dead letters that finished before it was asked for. */
  private bulkJob(subKey: string, state: SubscriptionReplayStatus): ReplayJob {
    const { namespace, name } = splitKey(subKey);
    const requestedAt = Date.parse(state.requestedAt);
    const progress: ReplayProgress = {
      matched: state.attempted + (state.skipped ?? 0),
      attempted: state.attempted,
      succeeded: state.succeeded,
      failed: state.failed,
      deduped: state.deduped,
      skipped: state.skipped ?? 0,
      cursor: state.cursor,
      inFlight: [...(state.inFlight ?? [])],
    };
    return {
      runKey: `subscription/${subKey}`,
      id: state.id!,
      namespace,
      reason: state.reason,
      concurrency: state.concurrency ?? REPLAY_CONCURRENCY.default,
      dryRun: false,
      selection: { subscriptions: new Set([name]), eventTypes: undefined, reasons: undefined, phases: new Set(["DeadLettered"]), finishedAfter: undefined, finishedBefore: (Number.isFinite(requestedAt) ? requestedAt : this.now()) + 1 },
      touches: new Set([name]),
      progress,
      save: async (p, done) => {
        const next: SubscriptionReplayStatus = { ...state, ...progressStatus(p, done ? toRfc3339(this.now()) : undefined) };
        const sub = this.d.caches.subscription(subKey);
        if (!sub) throw new Error("subscription deleted");
        await this.writeProgress(sub, next, false);
        if (done) this.bulkFinished(sub, next);
      },
      ended: () => this.d.touchSubscription(subKey),
      held: () => {
        const sub = this.d.caches.subscription(subKey);
        if (!sub || !this.isPaused(sub)) return undefined;
        this.d.events.record(subscriptionRef(sub), "Normal", "ReplayHeld", `bulk replay "${state.reason}" is held while the subscription is paused; it resumes when the subscription is resumed`);
        return "the subscription is paused";
      },
    };
  }

  private bulkFinished(sub: SubscriptionObject, s: SubscriptionReplayStatus): void {
    this.d.events.record(
      subscriptionRef(sub),
      s.failed ? "Warning" : "Normal",
      "ReplayFinished",
      `bulk replay "${s.reason}": attempted ${s.attempted} (succeeded ${s.succeeded}, failed ${s.failed}, deduped ${s.deduped}), skipped ${s.skipped ?? 0}`,
    );
  }

  private isPaused(sub: SubscriptionObject): boolean {
    const parsed = this.d.caches.subscriptionSpec(sub);
    return parsed.ok && parsed.spec.paused === true;
  }

  /** Writes status.lastReplay (replacing it whole, without a resourceVersion: we own the field). */
  private async writeProgress(sub: SubscriptionObject, state: SubscriptionReplayStatus, fresh: boolean): Promise<void> {
    const prev = sub.status?.lastReplay ?? {};
    const cleared = fresh ? Object.fromEntries(Object.keys(prev).map((k) => [k, null])) : {};
    const lastReplay = { ...cleared, ...state, ...(state.finishedAt ? {} : { finishedAt: null }) };
    const updated = await this.d.statusWriter.patchStatus(SUBSCRIPTIONS, sub.metadata.namespace!, sub.metadata.name, { lastReplay });
    // The patch went in without a precondition; the cache catches up through the watch.
    this.d.expectations.expect(objectKey(sub.metadata), updated.metadata.resourceVersion, sub.metadata.uid);
  }

  private async removeAnnotation(type: ResourceType, namespace: string, name: string, ...keys: string[]): Promise<void> {
    await ignoreNotFound(this.d.statusWriter.patchMetadata(type, namespace, name, { annotations: Object.fromEntries(keys.map((k) => [k, null])) }));
  }
}

/** attempted = succeeded + failed + deduped (the DLQ specification's 42 = 38 + 2 + 2). */
function count(p: ReplayProgress, r: ReplayResult): void {
  if (r === "interrupted") return;
  if (r === "skipped") {
    p.skipped++;
    return;
  }
  p.attempted++;
  p[r]++;
}
