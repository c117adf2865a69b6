// Reconciles one WebhookSubscription key: validates its spec and Secret (the Ready condition),
// and rolls the endpoint's in-memory state up into status: breaker, health, EndpointHealthy,
// delivery counts. Called at a bounded rate (see Manager.endpointChanged), at once on breaker
// and health transitions. Writes only when something changed.
import { secretRefMissing } from "../core/attempt/policy.js";
import { cachedFilter } from "../core/filter.js";
import { cachedTransform } from "../core/transform.js";
import type { Logger } from "pino";
import { ANNOTATIONS, REPLAY_REASON_MAX_LENGTH, REPLAY_REASON_MIN_LENGTH } from "../api/names.js";
import type { Condition } from "../api/fields.js";
import type { SubscriptionStatus } from "../api/subscription.js";
import { adviceCondition } from "../core/advice.js";
import * as breaker from "../core/endpoint/breaker.js";
import { conditionDiffers, getCondition, setCondition, type ConditionInput } from "../core/conditions.js";
import * as health from "../core/endpoint/health.js";
import { toRfc3339 } from "../core/rfc3339.js";
import { isThrottled, type Throttle } from "../core/endpoint/throttle.js";
import { ApiError, ignoreNotFound } from "../kube/client.js";
import type { EventSink } from "../kube/events.js";
import { createMergePatch } from "../kube/merge-patch.js";
import type { StatusWriter } from "../kube/status-writer.js";
import { splitKey } from "../kube/types.js";
import type { Metrics } from "../observability/metrics.js";
import type { Result } from "../runtime/controller.js";
import type { Expectations } from "../runtime/expectations.js";
import type { Caches } from "../delivery/caches.js";
import { SUBSCRIPTIONS, subscriptionRef, type SubscriptionObject } from "../delivery/objects.js";
import type { EndpointRegistry } from "../delivery/engine/endpoints.js";
import { SECRET_REQUIRED_MESSAGE, type Credentials } from "../delivery/engine/credentials.js";
import type { SecretCache } from "../delivery/engine/secrets.js";

export interface DeadLetterCounts {
  deadLetterCount(subKey: string): number;
}

export interface SubscriptionReconcilerDeps {
  caches: Caches;
  endpoints: EndpointRegistry;
  secrets: SecretCache;
  /** Checks the Secrets of headersFrom, tls and oauth2 for the Ready condition. */
  credentials: Credentials;
  statusWriter: StatusWriter;
  events: EventSink;
  expectations: Expectations;
  metrics: Metrics;
  deadLetters: DeadLetterCounts;
  log: Logger;
  /** Bulk replay: handles the replay-dead-letters annotation; returns when to look again. */
  bulkReplay?: (sub: SubscriptionObject, signal: AbortSignal) => Promise<Result | void>;
  /** Stream mode: the subscription's events in its JetStream consumer not acknowledged yet (part of deliveries.pending). */
  streamPending?: (key: string) => number;
  /** Reads a subscription from the API server (the last rollup of a drain cannot wait for the cache). */
  read?: (key: string) => Promise<SubscriptionObject | undefined>;
  now?: () => number;
}

export class SubscriptionReconciler {
  private readonly now: () => number;

  constructor(private readonly d: SubscriptionReconcilerDeps) {
    this.now = d.now ?? Date.now;
  }

  async reconcile(key: string, signal: AbortSignal): Promise<Result | void> {
    const { namespace, name } = splitKey(key);
    const sub = this.d.caches.subscription(key);
    if (!sub) {
      this.d.endpoints.remove(key);
      this.d.metrics.forgetSubscription(namespace, name);
      return;
    }
    if (this.d.expectations.check(key, sub.metadata.resourceVersion, sub.metadata.uid) === "wait") {
      // The watch (or a relist) brings our write and queues the key; at the latest, it expires.
      this.d.log.debug({ subscription: key, resourceVersion: sub.metadata.resourceVersion }, "waiting for the cache to show our last status write");
      return { requeueAfter: this.d.expectations.untilExpiry(key) };
    }
    const replayResult = this.d.bulkReplay ? await this.d.bulkReplay(sub, signal) : undefined;
    const reset = await this.resetRequest(sub);
    await this.rollUp(key, sub, reset);
    if (reset) await this.resetDone(sub, reset);
    // While the endpoint's Retry-After hold runs, look again when it ends (the condition turns False).
    const until = this.d.endpoints.get(key)?.throttle?.until;
    const heldFor = until !== undefined && until > this.now() ? until - this.now() + 50 : undefined;
    if (heldFor !== undefined && (replayResult?.requeueAfter === undefined || heldFor < replayResult.requeueAfter)) return { requeueAfter: heldFor };
    return replayResult ?? undefined;
  }

  /** The reset-endpoint annotation's reason when valid; a bad one is refused (Event) and removed. */
  private async resetRequest(sub: SubscriptionObject): Promise<string | undefined> {
    const reason = sub.metadata.annotations?.[ANNOTATIONS.resetEndpoint];
    if (reason === undefined) return undefined;
    if (reason.trim().length >= REPLAY_REASON_MIN_LENGTH && reason.length <= REPLAY_REASON_MAX_LENGTH) return reason;
    this.d.events.record(subscriptionRef(sub), "Warning", "ResetRefused", `${ANNOTATIONS.resetEndpoint} refused: a reason of ${REPLAY_REASON_MIN_LENGTH} to ${REPLAY_REASON_MAX_LENGTH} characters is required, e.g. ${ANNOTATIONS.resetEndpoint}="endpoint fixed, INC-42"`);
    await this.removeResetAnnotation(sub);
    return undefined;
  }

  /** After the status says so: the Event, and the annotation removed (the request is handled). */
  private async resetDone(sub: SubscriptionObject, reason: string): Promise<void> {
    const before = sub.status?.breaker?.state ?? "Closed";
    this.d.events.record(subscriptionRef(sub), "Normal", "EndpointReset", `breaker closed and endpoint re-enabled (breaker was ${before}, health ${sub.status?.health?.state ?? "Healthy"}): ${reason}`);
    await this.removeResetAnnotation(sub);
  }

  /** Deliveries not finished: the active ones in the cache, plus stream mode's events not acknowledged yet. */
  private pendingOf(key: string): number {
    return this.d.caches.deliveriesOf(key).size + (this.d.streamPending?.(key) ?? 0);
  }

  /** Creation time of the subscription's oldest unfinished delivery (a scan of its cached set). */
  private oldestPending(key: string): number | undefined {
    let oldest: number | undefined;
    for (const k of this.d.caches.deliveriesOf(key)) {
      const t = Date.parse(this.d.caches.delivery(k)?.metadata.creationTimestamp ?? "");
      if (Number.isFinite(t) && (oldest === undefined || t < oldest)) oldest = t;
    }
    return oldest;
  }

  private async removeResetAnnotation(sub: SubscriptionObject): Promise<void> {
    await ignoreNotFound(this.d.statusWriter.patchMetadata(SUBSCRIPTIONS, sub.metadata.namespace!, sub.metadata.name, { annotations: { [ANNOTATIONS.resetEndpoint]: null } }));
  }

  /** Writes the rolled-up status of every subscription whose endpoint changed since its last write. */
  async flushDirty(budgetMs: number): Promise<void> {
    const deadline = AbortSignal.timeout(budgetMs);
    const dirty = [...this.d.endpoints.all()].filter((ep) => ep.dirty || ep.succeededDelta || ep.discardedDelta);
    await Promise.allSettled(dirty.map((ep) => this.rollUpOnly(ep.key, deadline)));
  }

  /**
   * The last rollup of a leadership term (drain): the cached copy may be behind (the next leader
   * writes too), so a conflict reads the subscription again instead of losing the counts.
   */
  async rollUpOnly(key: string, signal: AbortSignal): Promise<void> {
    let sub = this.d.caches.subscription(key);
    for (let i = 0; sub && !signal.aborted; i++) {
      try {
        return await this.rollUp(key, sub);
      } catch (err) {
        if (!(err instanceof ApiError && err.isConflict) || !this.d.read || i >= 2) throw err;
        sub = await this.d.read(key);
      }
    }
  }

  /** Ready: the spec is usable, its Secret can sign (or nothing is signed) and its receiver credentials can be read. */
  private async readyCondition(namespace: string, sub: SubscriptionObject): Promise<ConditionInput> {
    const parsed = this.d.caches.subscriptionSpec(sub);
    if (!parsed.ok) return { type: "Ready", status: "False", reason: "InvalidSpec", message: parsed.message };
    const accepted = (detail: string): ConditionInput =>
      parsed.spec.paused ? { type: "Ready", status: "True", reason: "Paused", message: "accepted; paused: deliveries are held" } : { type: "Ready", status: "True", reason: "Ready", message: `accepted; ${detail}` };
    const policy = this.d.caches.policy(sub);
    // The CRD cannot compile a CEL filter of ours: checked here, the message names the position.
    const filter = parsed.spec.filter === undefined ? undefined : cachedFilter(parsed.spec.filter);
    if (filter && !filter.ok) return { type: "Ready", status: "False", reason: "InvalidFilter", message: `spec.filter ${filter.message}; this subscription gets no events until it is fixed` };
    const transform = parsed.spec.transform === undefined ? undefined : cachedTransform(parsed.spec.transform);
    if (transform && !transform.ok) return { type: "Ready", status: "False", reason: "InvalidTransform", message: `spec.transform ${transform.message}; deliveries wait until it is fixed` };
    if (policy && secretRefMissing(policy)) return { type: "Ready", status: "False", reason: "SecretRequired", message: `${SECRET_REQUIRED_MESSAGE}; deliveries wait until it is fixed` };
    const lookup = policy?.secretRef ? await this.d.secrets.keys(namespace, policy.secretRef) : undefined;
    if (lookup && lookup.kind !== "ok") return { type: "Ready", status: "False", reason: lookup.reason ?? "SecretNotFound", message: `${lookup.message}; deliveries wait until ${lookup.reason ? "it is fixed" : "it exists"}` };
    // The receiver's credentials (headersFrom, tls, oauth2): the message names the field and the Secret.
    const creds = policy ? await this.d.credentials.resolve(namespace, policy) : undefined;
    if (creds?.kind === "missing") return { type: "Ready", status: "False", reason: creds.reason, message: `${creds.message}; deliveries wait until it is fixed` };
    if (!lookup) return accepted("requests are not signed (signature.scheme None)");
    return accepted(`signing with ${lookup.keys.length} key${lookup.keys.length > 1 ? "s (rotation)" : ""}`);
  }

  private async rollUp(key: string, sub: SubscriptionObject, resetReason?: string): Promise<void> {
    const { namespace, name } = splitKey(key);
    const now = this.now();
    const generation = sub.metadata.generation;
    const prev: SubscriptionStatus = sub.status ?? {};
    const ready = await this.readyCondition(namespace, sub);
    const policy = this.d.caches.policy(sub);
    if (!this.d.endpoints.get(key)) this.d.metrics.initSubscription(namespace, name);
    const ep = this.d.endpoints.ensure(key, sub.metadata.uid, sub.status, policy, now);
    const lastReset = resetReason === undefined ? undefined : { reason: resetReason, at: new Date(now).toISOString(), breaker: ep.breaker.state, health: ep.health.state };
    if (resetReason !== undefined) this.d.endpoints.reset(ep);
    const hs = health.toStatus(ep.health);
    const endpointHealthy = endpointHealthyCondition(ep.health, hs, prev.health !== undefined);
    const succeededDelta = ep.succeededDelta;
    const discardedDelta = ep.discardedDelta;
    const deadLettered = this.d.deadLetters.deadLetterCount(key);
    // Settings that work against each other (core/advice.ts): a condition, and a Warning Event when it appears or changes.
    const parsed = this.d.caches.subscriptionSpec(sub);
    const advice = adviceCondition(policy, parsed.ok && parsed.spec.circuitBreaker.cooldown !== undefined);
    const throttle = isThrottled(ep.throttle, now) ? ep.throttle : undefined;
    let conditions = setCondition(prev.conditions, ready, now, generation);
    conditions = setCondition(conditions, endpointHealthy, now, generation);
    conditions = setCondition(conditions, advice, now, generation);
    conditions = withThrottled(conditions, throttle, now, generation);
    const next: SubscriptionStatus = {
      ...prev,
      observedGeneration: generation,
      conditions,
      breaker: breaker.toStatus(ep.breaker),
      health: hs,
      deliveries: {
        pending: this.pendingOf(key),
        succeeded: (prev.deliveries?.succeeded ?? 0) + succeededDelta,
        deadLettered,
        discarded: (prev.deliveries?.discarded ?? 0) + discardedDelta,
      },
      ...(lastReset ? { lastReset } : {}),
      throttle: throttleStatus(throttle),
    };
    this.d.metrics.setSubscriptionGauges(namespace, name, {
      breaker: breaker.breakerGaugeValue(ep.breaker.state),
      health: health.healthGaugeValue(ep.health.state),
      deadLetters: deadLettered,
    });
    this.d.metrics.setSubscriptionNumbers(namespace, name, {
      breaker: ep.breaker.state,
      health: ep.health.state,
      deadLetters: deadLettered,
      backlog: next.deliveries!.pending,
      oldestPendingCreatedAt: this.oldestPending(key),
      lastSuccessAt: ep.health.lastSuccessAt,
    });

    const readyChanged = conditionDiffers(prev.conditions, ready, generation) && getCondition(prev.conditions, "Ready")?.reason !== ready.reason;
    const adviceGiven = advice.status === "True" && conditionDiffers(prev.conditions, advice);
    const patch = createMergePatch(prev, next);
    ep.dirty = false;
    ep.urgent = false;
    if (this.d.log.isLevelEnabled("debug")) this.d.log.debug({ subscription: key, changed: patch !== undefined, deliveries: next.deliveries }, "rolled up");
    if (patch === undefined) return;
    try {
      const updated = await this.d.statusWriter.patchStatus(SUBSCRIPTIONS, namespace, name, patch, sub.metadata.resourceVersion);
      this.d.expectations.expect(key, updated.metadata.resourceVersion, sub.metadata.uid);
      ep.succeededDelta -= succeededDelta;
      ep.discardedDelta -= discardedDelta;
    } catch (err) {
      ep.dirty = true;
      if (err instanceof ApiError && err.isNotFound) return;
      throw err;
    }
    if (readyChanged) {
      this.d.events.record(subscriptionRef(sub), ready.status === "True" ? "Normal" : "Warning", ready.reason, ready.message ?? ready.reason);
    }
    if (adviceGiven) this.d.events.record(subscriptionRef(sub), "Warning", advice.reason, advice.message ?? advice.reason);
  }
}

/**
 * EndpointThrottled: True while the endpoint's Retry-After hold runs (since it began: the
 * transition time; until: in the message), False once it ended. Absent until the first hold.
 */
function withThrottled(conditions: Condition[], t: Throttle | undefined, now: number, generation: number | undefined): Condition[] {
  // Absent until the endpoint first asks to slow down; then True while held, False after.
  if (!t && !getCondition(conditions, "EndpointThrottled")) return conditions;
  return setCondition(conditions, throttledCondition(t), t?.since ?? now, generation);
}

/** status.throttle: the hold while it runs, so a new leader keeps it. */
function throttleStatus(t: Throttle | undefined): SubscriptionStatus["throttle"] {
  return t ? { since: toRfc3339(t.since), until: toRfc3339(t.until), status: t.status, retryAfter: t.retryAfter } : undefined;
}

function throttledCondition(t: Throttle | undefined): ConditionInput {
  if (t) {
    return {
      type: "EndpointThrottled",
      status: "True",
      reason: "RetryAfter",
      message: `the endpoint answered ${t.status} with Retry-After: ${t.retryAfter} at ${toRfc3339(t.since)}: no new attempt to it before ${toRfc3339(t.until)}`,
    };
  }
  return { type: "EndpointThrottled", status: "False", reason: "NotThrottled", message: "the endpoint takes requests again" };
}

/** EndpointHealthy: what the endpoint's health says, with the next probe while it is Disabled. */
function endpointHealthyCondition(h: health.HealthState, hs: health.HealthStatus, hadHealth: boolean): ConditionInput {
  if (h.totalAttempts === 0 && !hadHealth) return { type: "EndpointHealthy", status: "Unknown", reason: "NoAttempts", message: "no delivery attempted yet" };
  if (h.state === "Healthy") return { type: "EndpointHealthy", status: "True", reason: "Healthy", message: "the endpoint answers" };
  if (h.state === "Degraded") return { type: "EndpointHealthy", status: "False", reason: "Degraded", message: `${h.consecutiveFailures} consecutive failures` };
  const gone = h.disabledReason === "Gone";
  return { type: "EndpointHealthy", status: "False", reason: gone ? "Gone" : "Disabled", message: `disabled${gone ? " after 410 Gone" : ` after ${h.consecutiveFailures} consecutive failures`}; next probe at ${hs.nextProbeAt ?? "soon"}` };
}
