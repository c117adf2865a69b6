// Replays, from kubectl:
//   kubectl annotate whdel NAME hookline.dev/replay="REASON"            one dead letter
//   kubectl annotate whsub NAME hookline.dev/replay-dead-letters="REASON" [hookline.dev/replay-concurrency=N]
// A replay is one immediate attempt outside the retry schedule. A bulk replay takes every dead
// letter of the subscription, oldest first, in batches of N in parallel; its progress lives in
// the subscription's status.lastReplay (with the batch in flight), and each replayed delivery
// carries the replay's id, so a restarted operator resumes it without repeating or losing one.
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { ANNOTATIONS, REPLAY_CONCURRENCY, REPLAY_REASON_MAX_LENGTH, REPLAY_REASON_MIN_LENGTH } from "../api/names.js";
import type { SubscriptionReplayStatus } from "../api/subscription.js";
import { applyAttempt } from "../core/outcome.js";
import { matchesEventType } from "../core/policy.js";
import { toRfc3339 } from "../core/rfc3339.js";
import { ignoreNotFound, type KubeClient } from "../kube/client.js";
import type { EventSink } from "../kube/events.js";
import type { StatusWriter } from "../kube/status-writer.js";
import { objectKey, type ResourceType } from "../kube/types.js";
import type { Metrics } from "../observability/metrics.js";
import type { Result } from "../runtime/controller.js";
import type { Expectations } from "../runtime/expectations.js";
import type { AttemptExecutor } from "./attempt.js";
import type { Caches } from "./caches.js";
import type { EndpointRegistry } from "./endpoints.js";
import type { Finals, OutcomeMeta } from "./finals.js";
import { DELIVERIES, deliveryRef, SUBSCRIPTIONS, subscriptionKey, subscriptionRef, type DeliveryObject, type SubscriptionObject } from "./objects.js";
import type { OutcomeWriter } from "./outcome-writer.js";
import { loadRequestBody, payloadKey } from "./payload.js";
import { traceOf } from "./trace.js"; // [tracing]
import type { SecretCache } from "./secrets.js";

/** What replay needs of the index of finished deliveries. */
export interface DeadLetterIndex {
  /** Whether a finished delivery carries a replay annotation not yet handled. */
  replayRequested(key: string): boolean;
  deadLetterCount(subKey: string): number;
  /** Dead-letter keys of a subscription, oldest first. */
  deadLettersOf(subKey: string): string[];
}

export interface ReplayerDeps {
  client: KubeClient;
  caches: Caches;
  terminal: DeadLetterIndex;
  endpoints: EndpointRegistry;
  secrets: SecretCache;
  executor: AttemptExecutor;
  outcomes: OutcomeWriter<OutcomeMeta>;
  finals: Finals;
  statusWriter: StatusWriter;
  events: EventSink;
  metrics: Metrics;
  expectations: Expectations;
  log: Logger;
  /** Re-run the subscription's reconcile (status rollup) soon. */
  touchSubscription: (subKey: string) => void;
  /** Queue a delivery key in the delivery controller (one worker per key, like any change). */
  enqueueDelivery: (key: string) => void;
  now?: () => number;
}

export function validReason(reason: string | undefined): reason is string {
  return reason !== undefined && reason.trim().length >= REPLAY_REASON_MIN_LENGTH && reason.length <= REPLAY_REASON_MAX_LENGTH;
}

/** Why a replay reason is refused, naming the bounds and what was given. */
export function reasonProblem(reason: string): string {
  return `a reason of ${REPLAY_REASON_MIN_LENGTH} to ${REPLAY_REASON_MAX_LENGTH} characters is required (this one has ${reason.trim().length < REPLAY_REASON_MIN_LENGTH ? reason.trim().length : reason.length}), e.g. hookline.dev/replay="endpoint fixed, INC-42"`;
}

type ReplayResult = "succeeded" | "failed" | "deduped" | "skipped";

/** The replay-concurrency annotation: default 5, clamped to 1..50; undefined when not a number. */
export function parseConcurrency(value: string | undefined): number | undefined {
  if (value === undefined || value.trim() === "") return REPLAY_CONCURRENCY.default;
  if (!/^-?\d+$/.test(value.trim())) return undefined;
  return Math.min(REPLAY_CONCURRENCY.max, Math.max(REPLAY_CONCURRENCY.min, Number(value.trim())));
}

export class Replayer {
  private readonly now: () => number;
  /** Bulk replays running in this process, by subscription key. */
  private readonly running = new Map<string, Promise<void>>();
  private abort = new AbortController();
  private stopping = false;
  /** Dead letters of bulk replays waiting for their turn in the delivery work queue. */
  private readonly intents = new Map<string, { replay: { reason: string; requestId: string }; done: (r: ReplayResult) => void }>();

  constructor(private readonly d: ReplayerDeps) {
    this.now = d.now ?? Date.now;
  }

  /**
   * Whether a delivery key is replay's to reconcile: a bulk replay's dead letter, a finished
   * delivery annotated for replay, or an active one annotated (refused: it is not dead-lettered).
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
    if (!obj || obj.status?.phase !== "DeadLettered" || obj.status.lastReplay?.requestId === intent.replay.requestId) return this.settle(key, "skipped");
    let result: ReplayResult;
    try {
      const r = await this.attempt(key, obj, intent.replay, signal);
      if (r.outcome === "parked") return; // woken when a request slot frees
      result = r.outcome;
    } catch (err) {
      this.d.log.warn({ delivery: key, err: (err as Error).message }, "replay failed");
      result = "failed";
    }
    this.settle(key, result);
  }

  private settle(key: string, result: ReplayResult): void {
    const intent = this.intents.get(key);
    this.intents.delete(key);
    intent?.done(result);
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
   * One attempt on a dead letter, outside the retry schedule. A replay is an operator's explicit
   * request: it bypasses backoff, breaker and health, but not the request slots: it waits
   * (parked, woken when one frees) like any attempt.
   */
  private async attempt(key: string, obj: DeliveryObject, replay: { reason: string; requestId?: string }, signal: AbortSignal): Promise<{ outcome: "succeeded" | "failed" | "skipped" | "parked"; detail?: string }> {
    const parsed = this.d.caches.deliverySpec(obj);
    if (!parsed.ok) return { outcome: "skipped", detail: parsed.message };
    const namespace = obj.metadata.namespace!;
    const subKey = subscriptionKey(namespace, parsed.spec.subscriptionRef.name);
    const subObj = this.d.caches.subscription(subKey);
    const view = this.d.caches.subscriptionView(subObj);
    if (view.kind !== "ok" || !subObj) return { outcome: "skipped", detail: view.kind === "missing" ? "its subscription does not exist" : "its subscription is invalid" };
    const policy = view.policy;
    if (policy.paused) return { outcome: "skipped", detail: "its subscription is paused; replay it after resuming the subscription" };
    if (!matchesEventType(policy.eventTypes, parsed.spec.eventType)) return { outcome: "skipped", detail: `its subscription does not list event type ${parsed.spec.eventType}; add the type first` };
    let keys: Buffer[] = [];
    if (policy.secretRef) {
      const lookup = await this.d.secrets.keys(namespace, policy.secretRef);
      if (lookup.kind !== "ok") return { outcome: "skipped", detail: lookup.message };
      keys = lookup.keys;
    }
    const ep = this.d.endpoints.ensure(subKey, subObj.metadata.uid, subObj.status, policy, this.now());
    const slot = this.d.endpoints.slotFor(ep, policy.maxInFlight, key);
    if (slot !== "free") {
      this.d.endpoints.park(ep, key, slot);
      return { outcome: "parked" };
    }
    const written = await this.d.executor.run(
      { key, endpoint: ep, policy, commit: { breaker: ep.breaker, health: ep.health, bucket: ep.bucket }, probe: false, viaReplay: true, keys, message: (s) => loadRequestBody(this.d.client, obj, s), signal, trace: traceOf(obj) }, // [tracing] trace: the executor's span is the replay's
      async (attempt) => {
        const compute = (status: DeliveryObject["status"]) => applyAttempt({ status, generation: obj.metadata.generation, now: this.now(), attempt, policy, random: Math.random, replay });
        const w = await this.d.outcomes.writeOrKeep(key, obj, compute, { subKey, replay: true });
        if (w?.final) this.d.finals.record(w.obj, w.final, subKey, true);
        return w;
      },
    );
    return { outcome: written?.obj.status?.phase === "Succeeded" ? "succeeded" : "failed" };
  }

  /**
   * Called from the subscription reconcile: starts, resumes or refuses a bulk replay. The run
   * itself continues in the background; the subscription key is queued again when it ends.
   */
  async bulk(sub: SubscriptionObject, _signal: AbortSignal): Promise<Result | void> {
    if (this.stopping) return;
    const signal = this.abort.signal;
    const subKey = objectKey(sub.metadata);
    const annotation = sub.metadata.annotations?.[ANNOTATIONS.replayDeadLetters];
    const persisted = sub.status?.lastReplay;
    const inProgress = persisted && !persisted.finishedAt && persisted.id ? persisted : undefined;

    if (this.running.has(subKey) || (inProgress && annotation !== undefined)) {
      if (annotation !== undefined) {
        this.d.events.record(subscriptionRef(sub), "Warning", "ReplayRefused", `a bulk replay ("${inProgress?.reason ?? "running"}") is still running; annotate again when it has finished`);
        await this.removeAnnotation(SUBSCRIPTIONS, sub.metadata.namespace!, sub.metadata.name, ANNOTATIONS.replayDeadLetters, ANNOTATIONS.replayConcurrency);
      }
      if (this.running.has(subKey)) return;
    }
    const paused = this.isPaused(sub);
    if (inProgress) {
      // A paused subscription holds its bulk replay too; unpausing it resumes the replay.
      if (!paused) this.start(subKey, inProgress, signal);
      return;
    }
    if (annotation === undefined) return;

    const concurrency = parseConcurrency(sub.metadata.annotations?.[ANNOTATIONS.replayConcurrency]);
    const refuse = async (why: string) => {
      this.d.events.record(subscriptionRef(sub), "Warning", "ReplayRefused", why);
      await this.removeAnnotation(SUBSCRIPTIONS, sub.metadata.namespace!, sub.metadata.name, ANNOTATIONS.replayDeadLetters, ANNOTATIONS.replayConcurrency);
    };
    if (!validReason(annotation)) return refuse(`bulk replay refused: ${reasonProblem(annotation)}`);
    if (paused) return refuse("bulk replay refused: the subscription is paused; resume it, then annotate again");
    if (concurrency === undefined) {
      return refuse(`bulk replay refused: ${ANNOTATIONS.replayConcurrency}="${sub.metadata.annotations?.[ANNOTATIONS.replayConcurrency]}" is not a number (1..50, default 5)`);
    }
    const state: SubscriptionReplayStatus = {
      reason: annotation,
      requestedAt: toRfc3339(this.now()),
      concurrency,
      attempted: 0,
      succeeded: 0,
      failed: 0,
      deduped: 0,
      id: randomUUID(),
      inFlight: [],
    };
    // Persist first: from here a restart resumes this replay instead of losing it.
    await this.writeProgress(sub, state, true);
    await this.removeAnnotation(SUBSCRIPTIONS, sub.metadata.namespace!, sub.metadata.name, ANNOTATIONS.replayDeadLetters, ANNOTATIONS.replayConcurrency);
    this.d.events.record(subscriptionRef(sub), "Normal", "ReplayStarted", `replaying ${this.d.terminal.deadLetterCount(subKey)} dead letters, ${concurrency} at a time: ${annotation}`);
    this.start(subKey, state, signal);
  }

  private start(subKey: string, state: SubscriptionReplayStatus, signal: AbortSignal): void {
    const run = this.run(subKey, { ...state }, signal)
      .catch((err: Error) => this.d.log.warn({ subscription: subKey, err: err.message }, "bulk replay interrupted; it resumes on the next reconcile"))
      .finally(() => {
        this.running.delete(subKey);
        this.d.touchSubscription(subKey);
      });
    this.running.set(subKey, run);
  }

  /**
   * Stops bulk replays: no new batch starts; the batches in flight get `graceMs` to finish, then
   * their requests are interrupted (recorded so a resumed replay redoes them).
   */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    const all = Promise.allSettled([...this.running.values()]);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise((r) => (timer = setTimeout(r, graceMs)))]);
    clearTimeout(timer);
    this.abort.abort(new Error("operator stopping"));
    // Replays not started yet are not done: a resumed bulk replay does them.
    for (const key of [...this.intents.keys()]) this.settle(key, "skipped");
    await all;
  }

  private isPaused(sub: SubscriptionObject): boolean {
    const parsed = this.d.caches.subscriptionSpec(sub);
    return parsed.ok && parsed.spec.paused === true;
  }

  /** Ready for a new leadership term. */
  restart(): void {
    this.stopping = false;
    this.abort = new AbortController();
  }

  private async run(subKey: string, state: SubscriptionReplayStatus, signal: AbortSignal): Promise<void> {
    const id = state.id!;
    const concurrency = state.concurrency ?? REPLAY_CONCURRENCY.default;
    const redo = await this.recount(state);
    const done = new Set<string>();
    for (;;) {
      if (signal.aborted || this.stopping) throw new Error("operator stopping");
      const sub = this.d.caches.subscription(subKey);
      if (sub && this.isPaused(sub)) {
        this.d.events.record(subscriptionRef(sub), "Normal", "ReplayHeld", `bulk replay "${state.reason}" is held while the subscription is paused; it resumes when the subscription is resumed`);
        return;
      }
      const candidates = [...redo.splice(0), ...this.d.terminal.deadLettersOf(subKey)].filter((k) => !done.has(k));
      if (candidates.length === 0) break;
      const batch = await this.nextBatch(candidates, done, id, concurrency);
      if (batch.length === 0) continue;
      state.inFlight = batch.map((o) => objectKey(o.metadata));
      await this.writeProgressByKey(subKey, state);
      const pending = this.pendingTwins(subKey);
      const results = await Promise.all(batch.map((obj) => this.replayOne(obj, state, pending)));
      for (const r of results) this.count(state, r);
      state.inFlight = [];
      await this.writeProgressByKey(subKey, state);
    }
    state.finishedAt = toRfc3339(this.now());
    state.inFlight = [];
    await this.writeProgressByKey(subKey, state);
    const sub = this.d.caches.subscription(subKey);
    if (sub) {
      this.d.events.record(
        subscriptionRef(sub),
        state.failed ? "Warning" : "Normal",
        "ReplayFinished",
        `bulk replay "${state.reason}": attempted ${state.attempted}, succeeded ${state.succeeded}, failed ${state.failed}, deduped ${state.deduped}`,
      );
    }
  }

  /** The batch in flight at a crash: counts what it did; returns what it did not (to redo). */
  private async recount(state: SubscriptionReplayStatus): Promise<string[]> {
    const redo: string[] = [];
    for (const key of state.inFlight ?? []) {
      const obj = await this.d.outcomes.fetch(key);
      const r = obj?.status?.lastReplay;
      if (obj && r?.requestId === state.id && r?.result) this.count(state, r.result === "Deduped" ? "deduped" : r.result === "Succeeded" ? "succeeded" : "failed");
      else if (obj?.status?.phase === "DeadLettered") redo.push(key);
    }
    state.inFlight = [];
    return redo;
  }

  /** Reads candidates until a batch is full of dead letters this replay has not handled yet. */
  private async nextBatch(candidates: string[], done: Set<string>, id: string, concurrency: number): Promise<DeliveryObject[]> {
    const batch: DeliveryObject[] = [];
    for (const key of candidates) {
      if (batch.length >= concurrency) break;
      done.add(key);
      const obj = await this.d.outcomes.fetch(key);
      if (obj && obj.status?.phase === "DeadLettered" && obj.status.lastReplay?.requestId !== id) batch.push(obj);
    }
    return batch;
  }

  private count(state: SubscriptionReplayStatus, r: "succeeded" | "failed" | "deduped" | "skipped"): void {
    if (r === "skipped") return;
    if (r === "deduped") state.deduped++;
    else {
      state.attempted++;
      state[r]++;
    }
  }

  /** (event id, payload) of every pending delivery of the subscription. */
  private pendingTwins(subKey: string): Set<string> {
    const out = new Set<string>();
    for (const key of this.d.caches.deliveriesOf(subKey)) {
      const obj = this.d.caches.delivery(key);
      if (obj) out.add(payloadKey(obj));
    }
    return out;
  }

  private async replayOne(obj: DeliveryObject, state: SubscriptionReplayStatus, pending: Set<string>): Promise<ReplayResult> {
    const key = objectKey(obj.metadata);
    const replay = { reason: state.reason, requestId: state.id! };
    if (pending.has(payloadKey(obj))) {
      await this.d.outcomes.write(key, obj, (s) => ({
        status: { ...(s ?? {}), lastReplay: { ...replay, at: toRfc3339(this.now()), result: "Deduped" } },
      }));
      this.d.events.record(deliveryRef(obj), "Normal", "ReplayDeduped", `not replayed: an equal delivery (same event id and payload) is pending`);
      return "deduped";
    }
    this.d.metrics.dlqOperations.inc({ operation: "replay" });
    // Through the delivery work queue: never beside another worker on the same key, and within
    // the request slots like any attempt.
    return new Promise<ReplayResult>((done) => {
      this.intents.set(key, { replay, done });
      this.d.enqueueDelivery(key);
    });
  }

  private async writeProgressByKey(subKey: string, state: SubscriptionReplayStatus): Promise<void> {
    const sub = this.d.caches.subscription(subKey);
    if (!sub) throw new Error("subscription deleted");
    await this.writeProgress(sub, state, false);
  }

  /** Writes status.lastReplay (replacing it whole, without a resourceVersion: we own the field). */
  private async writeProgress(sub: SubscriptionObject, state: SubscriptionReplayStatus, fresh: boolean): Promise<void> {
    const prev = sub.status?.lastReplay ?? {};
    const cleared = fresh ? Object.fromEntries(Object.keys(prev).map((k) => [k, null])) : {};
    const lastReplay = { ...cleared, ...state, ...(state.finishedAt ? {} : { finishedAt: null }) };
    const updated = await this.d.statusWriter.patchStatus(SUBSCRIPTIONS, sub.metadata.namespace!, sub.metadata.name, { lastReplay });
    // The patch went in without a precondition; the cache catches up through the watch.
    this.d.expectations.expect(objectKey(sub.metadata), updated.metadata.resourceVersion);
  }

  private async removeAnnotation(type: ResourceType, namespace: string, name: string, ...keys: string[]): Promise<void> {
    await ignoreNotFound(this.d.statusWriter.patchMetadata(type, namespace, name, { annotations: Object.fromEntries(keys.map((k) => [k, null])) }));
  }
}
