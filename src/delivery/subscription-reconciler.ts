// Reconciles one WebhookSubscription key: validates its spec and Secret (the Ready condition),
// and rolls the endpoint's in-memory state up into status: breaker, health, EndpointHealthy,
// delivery counts. Called at a bounded rate (see Manager.endpointChanged), at once on breaker
// and health transitions. Writes only when something changed.
import type { Logger } from "pino";
import { ANNOTATIONS, API_VERSION, REPLAY_REASON_MAX_LENGTH, REPLAY_REASON_MIN_LENGTH, SUBSCRIPTION } from "../api/names.js";
import type { SubscriptionStatus } from "../api/subscription.js";
import * as breaker from "../core/breaker.js";
import { conditionDiffers, getCondition, setCondition, type ConditionInput } from "../core/conditions.js";
import * as health from "../core/health.js";
import type { PolicyDefaults } from "../core/policy.js";
import { resolvePolicy } from "../core/policy.js";
import { ApiError } from "../kube/client.js";
import type { EventSink } from "../kube/events.js";
import { createMergePatch } from "../kube/merge-patch.js";
import type { StatusWriter } from "../kube/status-writer.js";
import type { ObjectRef } from "../kube/types.js";
import type { Metrics } from "../observability/metrics.js";
import type { Result } from "../runtime/controller.js";
import type { Expectations } from "../runtime/expectations.js";
import { SUBSCRIPTIONS, type Caches, type SubscriptionObject } from "./caches.js";
import type { EndpointRegistry } from "./endpoints.js";
import type { Credentials } from "./credentials.js";
import type { SecretCache } from "./secrets.js";

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
  defaults: PolicyDefaults;
  /** Bulk replay: handles the replay-dead-letters annotation; returns when to look again. */
  bulkReplay?: (sub: SubscriptionObject, signal: AbortSignal) => Promise<Result | void>;
  /** Reads a subscription from the API server (the last rollup of a drain cannot wait for the cache). */
  read?: (key: string) => Promise<SubscriptionObject | undefined>;
  now?: () => number;
}

export function subscriptionRef(sub: SubscriptionObject): ObjectRef {
  return { apiVersion: API_VERSION, kind: SUBSCRIPTION.kind, namespace: sub.metadata.namespace!, name: sub.metadata.name, uid: sub.metadata.uid, resourceVersion: sub.metadata.resourceVersion };
}

export class SubscriptionReconciler {
  private readonly now: () => number;

  constructor(private readonly d: SubscriptionReconcilerDeps) {
    this.now = d.now ?? Date.now;
  }

  async reconcile(key: string, signal: AbortSignal): Promise<Result | void> {
    const [namespace, name] = key.split("/") as [string, string];
    const sub = this.d.caches.subscription(key);
    if (!sub) {
      this.d.endpoints.remove(key);
      this.d.metrics.forgetSubscription(namespace, name);
      return;
    }
    if (this.d.expectations.check(key, sub.metadata.resourceVersion) === "wait") return;
    const replayResult = this.d.bulkReplay ? await this.d.bulkReplay(sub, signal) : undefined;
    const reset = await this.resetRequest(sub);
    await this.rollUp(key, sub, reset);
    if (reset) await this.resetDone(sub, reset);
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
    try {
      await this.d.statusWriter.patchMetadata(SUBSCRIPTIONS, sub.metadata.namespace!, sub.metadata.name, { annotations: { [ANNOTATIONS.resetEndpoint]: null } });
    } catch (err) {
      if (!(err instanceof ApiError && err.isNotFound)) throw err;
    }
  }

  /** The status rollup alone (no replay handling): used to flush at shutdown. */
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

  private async rollUp(key: string, sub: SubscriptionObject, resetReason?: string): Promise<void> {
    const [namespace, name] = key.split("/") as [string, string];
    const now = this.now();
    const generation = sub.metadata.generation;
    const prev: SubscriptionStatus = sub.status ?? {};
    const parsed = this.d.caches.subscriptionSpec(sub);

    let ready: ConditionInput;
    if (!parsed.ok) {
      ready = { type: "Ready", status: "False", reason: "InvalidSpec", message: parsed.message };
    } else if (parsed.spec.secretRef) {
      const lookup = await this.d.secrets.keys(namespace, { name: parsed.spec.secretRef.name, key: parsed.spec.secretRef.key, ...(parsed.spec.secretRef.previousKey ? { previousKey: parsed.spec.secretRef.previousKey } : {}), scheme: parsed.spec.signature.scheme });
      ready =
        lookup.kind === "ok" ?
          { type: "Ready", status: "True", reason: parsed.spec.paused ? "Paused" : "Ready", message: parsed.spec.paused ? "accepted; paused: deliveries are held" : `accepted; signing with ${lookup.keys.length} key${lookup.keys.length > 1 ? "s (rotation)" : ""}` }
        : { type: "Ready", status: "False", reason: lookup.reason ?? "SecretNotFound", message: `${lookup.message}; deliveries wait until ${lookup.reason ? "it is fixed" : "it exists"}` };
    } else {
      ready = { type: "Ready", status: "True", reason: parsed.spec.paused ? "Paused" : "Ready", message: parsed.spec.paused ? "accepted; paused: deliveries are held" : "accepted; requests are not signed (no secretRef)" };
    }

    const policy = parsed.ok ? resolvePolicy(parsed.spec, this.d.defaults) : undefined;
    if (policy && ready.status === "True") {
      // The receiver's credentials (headersFrom, tls, oauth2): the message names the field and the Secret.
      const creds = await this.d.credentials.resolve(namespace, policy);
      if (creds.kind === "missing") ready = { type: "Ready", status: "False", reason: creds.reason, message: `${creds.message}; deliveries wait until it is fixed` };
    }
    if (!this.d.endpoints.get(key)) this.d.metrics.initSubscription(namespace, name);
    const ep = this.d.endpoints.ensure(key, sub.metadata.uid, sub.status, policy, now);
    const lastReset = resetReason === undefined ? undefined : { reason: resetReason, at: new Date(now).toISOString(), breaker: ep.breaker.state, health: ep.health.state };
    if (resetReason !== undefined) this.d.endpoints.reset(ep, this.d.caches.deliveriesOf(key));
    const hs = health.toStatus(ep.health);
    const endpointHealthy: ConditionInput =
      ep.health.totalAttempts === 0 && !prev.health ? { type: "EndpointHealthy", status: "Unknown", reason: "NoAttempts", message: "no delivery attempted yet" }
      : ep.health.state === "Healthy" ? { type: "EndpointHealthy", status: "True", reason: "Healthy", message: "the endpoint answers" }
      : ep.health.state === "Degraded" ? { type: "EndpointHealthy", status: "False", reason: "Degraded", message: `${ep.health.consecutiveFailures} consecutive failures` }
      : { type: "EndpointHealthy", status: "False", reason: ep.health.disabledReason === "Gone" ? "Gone" : "Disabled", message: `disabled${ep.health.disabledReason === "Gone" ? " after 410 Gone" : ` after ${ep.health.consecutiveFailures} consecutive failures`}; next probe at ${hs.nextProbeAt ?? "soon"}` };

    const succeededDelta = ep.succeededDelta;
    const discardedDelta = ep.discardedDelta;
    const deadLettered = this.d.deadLetters.deadLetterCount(key);
    let conditions = setCondition(prev.conditions, ready, now, generation);
    conditions = setCondition(conditions, endpointHealthy, now, generation);
    const next: SubscriptionStatus = {
      ...prev,
      observedGeneration: generation,
      conditions,
      breaker: breaker.toStatus(ep.breaker),
      health: hs,
      deliveries: {
        pending: this.d.caches.deliveriesOf(key).size,
        succeeded: (prev.deliveries?.succeeded ?? 0) + succeededDelta,
        deadLettered,
        discarded: (prev.deliveries?.discarded ?? 0) + discardedDelta,
      },
      ...(lastReset ? { lastReset } : {}),
    };
    this.d.metrics.setSubscriptionGauges(namespace, name, {
      breaker: breaker.breakerGaugeValue(ep.breaker.state),
      health: ep.health.state === "Healthy" ? 0 : ep.health.state === "Degraded" ? 1 : 2,
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
    const patch = createMergePatch(prev, next);
    ep.dirty = false;
    ep.urgent = false;
    if (patch === undefined) return;
    try {
      const updated = await this.d.statusWriter.patchStatus(SUBSCRIPTIONS, namespace, name, patch, sub.metadata.resourceVersion);
      this.d.expectations.expect(key, updated.metadata.resourceVersion);
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
  }
}
