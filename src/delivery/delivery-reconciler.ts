// Reconciles one WebhookDelivery key: read the cached delivery, its subscription, Secret and
// endpoint; plan(); then act: wait (no write), park, record a wait condition, dead-letter,
// discard, or attempt (sign, POST, classify) and write the outcome in one status patch.
import type { Logger } from "pino";
import type { DeliveryStatus } from "../api/delivery.js";
import { ANNOTATIONS, API_VERSION, DELIVERY } from "../api/names.js";
import * as breaker from "../core/breaker.js";
import { attemptStatusLabel, classify, endpointSignal, type Classification } from "../core/classify.js";
import { conditionDiffers, getCondition } from "../core/conditions.js";
import * as health from "../core/health.js";
import { applyAttempt, deadLetter, discard, essentials, movedPast, waiting, type AttemptResult, type Final, type OutcomeResult, SUCCEEDED } from "../core/outcome.js";
import { endpointWait } from "../core/waiting.js";
import { plan, type Action, type SecretView, type SubscriptionView } from "../core/plan.js";
import { matchesEventType, resolvePolicy, type Policy, type PolicyDefaults } from "../core/policy.js";
import { signHmacSha256Hex, signStandardWebhooks } from "../core/signing.js";
import { fromRfc3339 } from "../core/rfc3339.js";
import { ApiError, type KubeClient } from "../kube/client.js";
import type { EventSink } from "../kube/events.js";
import { createMergePatch } from "../kube/merge-patch.js";
import type { StatusWriter } from "../kube/status-writer.js";
import { objectPath, type ObjectRef } from "../kube/types.js";
import type { Metrics } from "../observability/metrics.js";
import type { Result } from "../runtime/controller.js";
import type { Expectations } from "../runtime/expectations.js";
import { DELIVERIES, type Caches, type DeliveryObject, type SubscriptionObject } from "./caches.js";
import { withCredentials, type Credentials, type ResolvedCredentials } from "./credentials.js"; // [receiver-credentials]
import type { Endpoint, EndpointRegistry } from "./endpoints.js";
import { loadRequestBody, payloadView, type RequestBody } from "./payload.js";
import type { SecretCache } from "./secrets.js";
import type { Sender } from "./sender.js";

export interface ReplayHook {
  /** Whether a bulk replay waits for this key (it may still be in the active cache). */
  requested(key: string): boolean;
  reconcile(key: string, signal: AbortSignal): Promise<Result | void>;
}

export interface DeliveryReconcilerDeps {
  client: KubeClient;
  caches: Caches;
  endpoints: EndpointRegistry;
  secrets: SecretCache;
  /** [receiver-credentials] headersFrom, tls, oauth2 and proxy: resolved and sent by src/delivery/credentials.ts. */
  credentials: Credentials;
  sender: Sender;
  statusWriter: StatusWriter;
  events: EventSink;
  expectations: Expectations;
  metrics: Metrics;
  log: Logger;
  defaults: PolicyDefaults;
  userAgent: string;
  interruptedAction: "requeue" | "dead-letter";
  /** Called when an endpoint's breaker or health changed (urgent) or its counters moved. */
  endpointChanged: (subKey: string, urgent: boolean) => void;
  /** Replays: requested by annotation (finished deliveries) or by a bulk replay in progress. */
  replay?: ReplayHook;
  now?: () => number;
  random?: () => number;
}

/** A missing Secret is not watched: look again after 1 s, 2 s, 4 s ... up to 30 s. */
const SECRET_RECHECK = { initialMs: 1_000, maxMs: 30_000 };

export function deliveryRef(obj: DeliveryObject): ObjectRef {
  return { apiVersion: API_VERSION, kind: DELIVERY.kind, namespace: obj.metadata.namespace!, name: obj.metadata.name, uid: obj.metadata.uid, resourceVersion: obj.metadata.resourceVersion };
}

/** An attempt's outcome not recorded yet, with the status it was computed from. */
interface Unwritten {
  compute: (status: DeliveryStatus | undefined) => OutcomeResult;
  basis: DeliveryStatus | undefined;
  subKey: string;
  replay: boolean;
}

export class DeliveryReconciler {
  /** Outcomes of attempts whose status write failed: written before anything else is tried. */
  private readonly unwritten = new Map<string, Unwritten>();
  /**
   * Set while outcome writes fail (API server unreachable): no new attempt starts until the
   * outcomes already made are recorded, so what lives only in memory stays small.
   */
  private writesFailing = false;
  /** Consecutive Secret rechecks per delivery key, for the recheck backoff. */
  private readonly secretWaits = new Map<string, number>();
  private readonly now: () => number;
  private readonly random: () => number;

  constructor(private readonly d: DeliveryReconcilerDeps) {
    this.now = d.now ?? Date.now;
    this.random = d.random ?? Math.random;
  }

  async reconcile(key: string, signal: AbortSignal): Promise<Result | void> {
    try {
      return await this.reconcileKey(key, signal);
    } finally {
      // Woken for a global slot but did not take it: the slot goes to the next waiter.
      this.d.endpoints.settle(key);
    }
  }

  private async reconcileKey(key: string, signal: AbortSignal): Promise<Result | void> {
    const pending = this.unwritten.get(key);
    if (pending) return this.writeUnwritten(key, pending);
    let obj = this.d.caches.delivery(key);
    if (!obj) {
      this.unwritten.delete(key);
      this.secretWaits.delete(key);
      return this.d.replay?.reconcile(key, signal);
    }
    // A bulk replay's dead letter the cache has not seen leave the active set yet.
    if (this.d.replay?.requested(key)) return this.d.replay.reconcile(key, signal);
    switch (this.d.expectations.check(key, obj.metadata.resourceVersion)) {
      case "wait":
        return; // the watch brings our own write; the key is queued again then
      case "expired":
        obj = await this.fetch(key);
        if (!obj) return;
        break;
      case "ok":
        break;
    }
    if (obj.metadata.deletionTimestamp) return;

    if (this.writesFailing && this.unwritten.size > 0) return { requeueAfter: 2_000 };

    if (obj.metadata.annotations?.[ANNOTATIONS.replay] !== undefined) await this.refuseReplay(obj, "it is not dead-lettered");

    const [namespace] = key.split("/") as [string];
    const parsed = this.d.caches.deliverySpec(obj);
    if (!parsed.ok) {
      // The CRD refuses such specs; an object from an older CRD is discarded with the reason.
      const result = discard(obj.status, obj.metadata.generation, this.now(), "InvalidSpec", parsed.message);
      await this.finish(key, obj, result, undefined);
      return;
    }
    const spec = parsed.spec;
    const subKey = `${namespace}/${spec.subscriptionRef.name}`;
    const subObj = this.d.caches.subscription(subKey);
    const subView = this.subscriptionView(subObj);
    const policy = subView.kind === "ok" ? subView.policy : undefined;
    const now = this.now();
    const status = obj.status ?? {};
    const nextAttemptAt = fromRfc3339(status.nextAttemptAt);
    const due = nextAttemptAt === undefined || nextAttemptAt <= now;

    let secret: SecretView = { kind: "none" };
    let keys: Buffer[] = [];
    if (policy?.secretRef && due && !policy.paused) {
      const lookup = await this.d.secrets.keys(namespace, policy.secretRef);
      if (lookup.kind === "ok") {
        secret = { kind: "ok" };
        keys = lookup.keys;
      } else secret = lookup;
    }
    // [receiver-credentials] read with the signing Secret; a missing or unusable one makes the delivery wait the same way.
    const creds = await this.d.credentials.resolveDue(namespace, due ? policy : undefined);
    secret = withCredentials(secret, creds);
    const endpoint = policy && subObj ? this.d.endpoints.ensure(subKey, subObj.metadata.uid, subObj.status, policy, now) : undefined;
    const action = plan({
      now,
      delivery: { phase: status.phase, attempts: status.attempts ?? 0, nextAttemptAt, eventType: spec.eventType, ...payloadView(obj) },
      subscription: subView,
      secret,
      endpoint: endpoint ? this.d.endpoints.view(endpoint, key) : undefined,
    });
    if (this.d.log.isLevelEnabled("debug")) this.d.log.debug({ delivery: key, action: action.type, ...("why" in action ? { why: action.why } : {}), ...("at" in action ? { inMs: action.at - now } : {}) }, "planned");
    if (action.type !== "Attempt" && action.type !== "Park") this.d.endpoints.kick(endpoint, policy?.maxInFlight ?? 0);
    return this.act(action, { key, obj, policy, endpoint, subKey, subObj, keys, creds, signal, now }); // [receiver-credentials] creds
  }

  private async act(
    action: Action,
    c: { key: string; obj: DeliveryObject; policy: Policy | undefined; endpoint: Endpoint | undefined; subKey: string; subObj: SubscriptionObject | undefined; keys: Buffer[]; creds: ResolvedCredentials | undefined; signal: AbortSignal; now: number }, // [receiver-credentials] creds
  ): Promise<Result | void> {
    switch (action.type) {
      case "Nothing":
        return;
      case "WaitUntil":
        await this.reportWait(action, c);
        return { requeueAfter: Math.max(0, action.at - c.now) };
      case "Park":
        // Parked before the report is written: a slot freed meanwhile wakes it (no idle slot).
        this.d.endpoints.park(c.endpoint!, c.key, action.why);
        await this.reportWait(action, c);
        return;
      case "Wait": {
        const generation = c.obj.metadata.generation;
        if (conditionDiffers(c.obj.status?.conditions, { type: SUCCEEDED, status: "Unknown", reason: action.reason, message: action.message }, generation)) {
          const written = await this.writeOutcome(c.key, c.obj, (s) => ({ status: waiting(s, generation, this.now(), action.reason, action.message) }));
          if (written) {
            this.d.events.record(deliveryRef(c.obj), action.reason === "Paused" ? "Normal" : "Warning", action.reason, `${action.message}; the delivery waits and nothing is lost`);
          }
        }
        // Subscriptions are watched: their changes wake the delivery. Secrets are not: look again.
        if (action.reason !== "SecretNotFound") return;
        const n = this.secretWaits.get(c.key) ?? 0;
        this.secretWaits.set(c.key, n + 1);
        return { requeueAfter: Math.min(SECRET_RECHECK.maxMs, SECRET_RECHECK.initialMs * 2 ** n) };
      }
      case "DeadLetter": {
        if (action.reason === "BreakerOpen") {
          this.d.metrics.attempts.inc({ namespace: c.obj.metadata.namespace, subscription: c.subKey.split("/")[1], status: "failure", reason: "circuit_open" });
        }
        const result = deadLetter(c.obj.status, c.obj.metadata.generation, this.now(), action.reason, action.message);
        await this.finish(c.key, c.obj, result, c.subKey);
        return;
      }
      case "Discard": {
        const result = discard(c.obj.status, c.obj.metadata.generation, this.now(), action.reason, action.message);
        await this.finish(c.key, c.obj, result, c.subKey);
        return;
      }
      case "Attempt":
        this.secretWaits.delete(c.key);
        return this.attempt(c.key, c.obj, c.policy!, c.endpoint!, c.subKey, action, c.keys, c.creds, c.signal); // [receiver-credentials] creds
    }
  }

  /** Writes what a due delivery held by its endpoint waits for, once per reason (core/waiting.ts). */
  private async reportWait(action: Action, c: { key: string; obj: DeliveryObject; policy: Policy | undefined; now: number }): Promise<void> {
    const due = fromRfc3339(c.obj.status?.nextAttemptAt) ?? fromRfc3339(c.obj.metadata.creationTimestamp) ?? c.now;
    const w = endpointWait(action, { now: c.now, overdueMs: c.now - due, maxInFlight: c.policy?.maxInFlight ?? 0, ...(c.policy?.rateLimit ? { ratePerSecond: c.policy.rateLimit.perSecond } : {}) });
    if (!w || getCondition(c.obj.status?.conditions, SUCCEEDED)?.reason === w.reason) return;
    const generation = c.obj.metadata.generation;
    try {
      await this.writeOutcome(c.key, c.obj, (s) => ({ status: waiting(s, generation, this.now(), w.reason, w.message) }));
    } catch (err) {
      // Informational: the delivery waits the same without it, and its next plan reports again.
      this.d.log.warn({ delivery: c.key, reason: w.reason, err: (err as Error).message }, "could not record why the delivery waits");
    }
  }

  private subscriptionView(subObj: SubscriptionObject | undefined): SubscriptionView {
    if (!subObj || subObj.metadata.deletionTimestamp) return { kind: "missing" };
    const parsed = this.d.caches.subscriptionSpec(subObj);
    if (!parsed.ok) return { kind: "invalid", message: parsed.message };
    return { kind: "ok", policy: this.policyOf(subObj, parsed.spec) };
  }

  private readonly policies = new WeakMap<object, Policy>();
  private policyOf(subObj: SubscriptionObject, spec: Parameters<typeof resolvePolicy>[0]): Policy {
    let p = this.policies.get(subObj);
    if (!p) {
      p = resolvePolicy(spec, this.d.defaults);
      this.policies.set(subObj, p);
    }
    return p;
  }

  /** One attempt: sign, POST, classify, update the endpoint, write the outcome. */
  private async attempt(key: string, obj: DeliveryObject, policy: Policy, ep: Endpoint, subKey: string, action: Extract<Action, { type: "Attempt" }>, keys: Buffer[], creds: ResolvedCredentials | undefined, signal: AbortSignal): Promise<Result | void> { // [receiver-credentials] creds
    const written = await this.attemptOnce(key, obj, policy, ep, subKey, action, keys, creds, signal); // [receiver-credentials] creds
    return written ? this.afterOutcome(written) : undefined;
  }

  /**
   * The endpoint slot is held until the outcome is recorded, so a crash leaves at most
   * maxInFlight deliveries per endpoint whose outcome is unknown (and re-sent, same webhook-id).
   */
  private async attemptOnce(key: string, obj: DeliveryObject, policy: Policy, ep: Endpoint, subKey: string, action: Extract<Action, { type: "Attempt" }>, keys: Buffer[], creds: ResolvedCredentials | undefined, signal: AbortSignal, replay?: { reason: string; requestId?: string }): Promise<{ obj: DeliveryObject; final?: Final } | undefined> { // [receiver-credentials] creds
    const [namespace, subscription] = subKey.split("/") as [string, string];
    this.d.endpoints.acquire(ep, action.commit, key);
    if (action.commit.breakerTransition) this.breakerTransition(ep, subKey, action.commit.breakerTransition);
    try {
      const body = await this.requestBody(obj, signal, () => action.probe && this.recordOnEndpoint(ep, subKey, policy, "interrupted", true, false));
      if (!body) return undefined;
      const result = await this.send(body, policy, keys, creds, signal); // [receiver-credentials] creds
      const c = result.classification;
      // Metrics and the endpoint's breaker and health: one signal per real attempt.
      if (c === "interrupted") this.d.metrics.attempts.inc({ namespace, subscription, status: "failure", reason: "interrupted" });
      else {
        this.d.metrics.attempts.inc({ namespace, subscription, status: attemptStatusLabel(c), reason: c.reason });
        this.d.metrics.attemptDuration.observe({ namespace, subscription }, result.durationMs / 1000);
      }
      this.recordOnEndpoint(ep, subKey, policy, c, action.probe, replay !== undefined);
      const outcome = (status: DeliveryStatus | undefined) =>
        applyAttempt({ status, generation: obj.metadata.generation, now: this.now(), attempt: result, policy, random: this.random, interruptedAction: this.d.interruptedAction, ...(replay ? { replay } : {}) });
      const written = await this.writeOutcomeOrKeep(key, obj, outcome, subKey, replay !== undefined);
      if (written?.final) this.onFinal(written.obj, written.final, subKey, replay !== undefined);
      return written;
    } finally {
      this.d.endpoints.release(ep, policy.maxInFlight);
    }
  }

  /**
   * The body of this attempt only: the cache keeps no payload, so it is read from the API server
   * and dropped after the attempt. Undefined when the delivery is gone; `abandon` runs whenever
   * no request will be sent (a probe granted to it is given back).
   */
  private async requestBody(obj: DeliveryObject, signal: AbortSignal, abandon: () => void): Promise<RequestBody | undefined> {
    let body: RequestBody | undefined;
    try {
      body = await loadRequestBody(this.d.client, obj, signal);
    } finally {
      if (!body) abandon();
    }
    return body;
  }

  /** Signs and sends; never throws. */
  private async send({ id, body }: RequestBody, policy: Policy, keys: Buffer[], creds: ResolvedCredentials | undefined, signal: AbortSignal): Promise<AttemptResult> { // [receiver-credentials] creds
    const startedAt = this.now();
    const timestampSeconds = Math.floor(startedAt / 1000);
    const headers: Record<string, string> = {
      ...policy.headers,
      "content-type": "application/json",
      "user-agent": this.d.userAgent,
    };
    if (keys.length) {
      Object.assign(
        headers,
        policy.scheme === "StandardWebhooks" ? signStandardWebhooks({ id, timestampSeconds, body, secrets: keys }) : signHmacSha256Hex({ id, timestampSeconds, body, secret: keys[0]! }),
      );
    } else if (policy.scheme === "StandardWebhooks") {
      Object.assign(headers, { "webhook-id": id, "webhook-timestamp": String(timestampSeconds) });
    } else {
      Object.assign(headers, { "x-webhook-id": id, "x-webhook-timestamp": String(timestampSeconds) });
    }
    // [receiver-credentials] Secret headers, TLS identity, proxy, OAuth2 token (one refresh and re-send on a 401): src/delivery/credentials.ts.
    const sent = await this.d.credentials.send(creds, { url: policy.url, headers, body, timeoutMs: policy.timeoutMs, signal });
    if (sent.kind === "response") {
      return { startedAt, durationMs: sent.durationMs, responseStatus: sent.status, ...(sent.retryAfter ? { retryAfter: sent.retryAfter } : {}), classification: classify({ kind: "response", status: sent.status }) };
    }
    if (sent.interrupted) return { startedAt, durationMs: sent.durationMs, error: sent.message, classification: "interrupted" };
    return { startedAt, durationMs: sent.durationMs, error: sent.message, classification: classify({ kind: "error", code: sent.code, name: sent.code }) };
  }

  private recordOnEndpoint(ep: Endpoint, subKey: string, policy: Policy, c: Classification | "interrupted", probe: boolean, viaReplay: boolean): void {
    const now = this.now();
    const signal = c === "interrupted" ? "none" : endpointSignal(c);
    const hcfg = health.healthConfig(this.d.endpoints.view(ep).healthProbeIntervalMs);
    const before = { breaker: ep.breaker.state, health: ep.health.state };
    let bt: breaker.BreakerTransition | undefined;
    let ht: health.HealthTransition | undefined;
    switch (signal) {
      case "success": {
        const b = breaker.recordReport(ep.breaker, now, policy.breaker, { success: true, probe, explicit: viaReplay });
        const h = health.recordSuccess(ep.health, now);
        ep.breaker = b.state;
        ep.health = h.state;
        bt = b.transition;
        ht = h.transition;
        break;
      }
      case "failure":
      case "gone": {
        const b = breaker.recordReport(ep.breaker, now, policy.breaker, { success: false, probe, explicit: viaReplay });
        const h = health.recordFailure(ep.health, now, signal === "gone" ? "gone" : "failure", hcfg);
        ep.breaker = b.state;
        ep.health = h.state;
        bt = b.transition;
        ht = h.transition;
        break;
      }
      case "none":
        if (probe) ep.breaker = breaker.releaseProbe(ep.breaker);
        break;
    }
    if (bt) this.breakerTransition(ep, subKey, bt);
    if (ht) this.healthTransition(ep, subKey, ht);
    // The endpoint recovered: every delivery held by it looks again now, also those waiting on
    // a timer for the next probe (up to WEBHOOK_HEALTH_PROBE_INTERVAL_MS away).
    if (ht?.to === "Healthy" || bt?.to === "Closed") this.d.endpoints.wakeAll(this.d.caches.deliveriesOf(subKey));
    // A probe reported back or the breaker moved: everyone parked on this endpoint looks again.
    if (probe || bt || before.breaker !== ep.breaker.state || before.health !== ep.health.state) this.d.endpoints.wakeEndpoint(ep);
    if (signal !== "none") {
      ep.dirty = true;
      this.d.endpointChanged(subKey, !!(bt || ht));
    }
  }

  private breakerTransition(ep: Endpoint, subKey: string, t: breaker.BreakerTransition): void {
    const [namespace, name] = subKey.split("/") as [string, string];
    this.d.metrics.setSubscriptionGauges(namespace, name, { breaker: breaker.breakerGaugeValue(t.to) });
    const ref = this.subscriptionRef(subKey);
    if (ref) {
      const detail =
        t.to === "Open" ? `after ${ep.breaker.consecutiveFailures} consecutive failures; next probe at ${new Date(ep.breaker.nextProbeAt ?? this.now()).toISOString()}`
        : t.to === "HalfOpen" ? "cooldown over: one probe request goes through"
        : "the probe succeeded: deliveries flow again";
      this.d.events.record(ref, t.to === "Closed" ? "Normal" : "Warning", `Breaker${t.to}`, `circuit breaker ${t.from} -> ${t.to}: ${detail}`);
    }
    ep.dirty = true;
    ep.urgent = true;
    this.d.log.info({ subscription: subKey, from: t.from, to: t.to }, "breaker transition");
  }

  private healthTransition(ep: Endpoint, subKey: string, t: health.HealthTransition): void {
    const [namespace, name] = subKey.split("/") as [string, string];
    this.d.metrics.setSubscriptionGauges(namespace, name, { health: t.to === "Healthy" ? 0 : t.to === "Degraded" ? 1 : 2 });
    const ref = this.subscriptionRef(subKey);
    if (ref) {
      const why =
        t.to === "Disabled" ?
          ep.health.disabledReason === "Gone" ?
            "the endpoint answered 410 Gone; deliveries wait and the endpoint is probed periodically"
          : `${ep.health.consecutiveFailures} consecutive failures; deliveries wait and the endpoint is probed periodically`
        : t.to === "Degraded" ? `${ep.health.consecutiveFailures} consecutive failures`
        : "an attempt succeeded";
      this.d.events.record(ref, t.to === "Healthy" ? "Normal" : "Warning", `Endpoint${t.to}`, `endpoint ${t.from} -> ${t.to}: ${why}`);
    }
    ep.urgent = true;
  }

  private subscriptionRef(subKey: string): ObjectRef | undefined {
    const sub = this.d.caches.subscription(subKey);
    if (!sub) return undefined;
    return { apiVersion: API_VERSION, kind: "WebhookSubscription", namespace: sub.metadata.namespace!, name: sub.metadata.name, uid: sub.metadata.uid };
  }

  /** Writes a final status without an attempt (dead letter before sending, discard). */
  private async finish(key: string, obj: DeliveryObject, result: OutcomeResult, subKey: string | undefined): Promise<void> {
    const written = await this.writeOutcome(key, obj, () => result);
    if (written?.final && subKey) this.onFinal(written.obj, written.final, subKey, false);
    else if (written?.final) this.d.events.record(deliveryRef(written.obj), "Warning", written.final.reason, written.final.message);
  }

  /** Hooks for a delivery that reached a final phase. */
  onFinal(obj: DeliveryObject, final: Final, subKey: string, replay: boolean): void {
    const [namespace, subscription] = subKey.split("/") as [string, string];
    this.d.metrics.deliveriesFinished.inc({ namespace, subscription, phase: final.phase, reason: final.reason });
    if (final.phase === "Succeeded") this.d.metrics.delivered(namespace, subscription, obj.metadata.creationTimestamp);
    const ep = this.d.endpoints.get(subKey);
    if (final.phase === "Succeeded") {
      if (ep) ep.succeededDelta++;
      if (replay) this.d.events.record(deliveryRef(obj), "Normal", "Replayed", final.message);
    } else if (final.phase === "DeadLettered") {
      if (!replay) this.d.metrics.dlqOperations.inc({ operation: "enqueue" });
      this.d.events.record(deliveryRef(obj), "Warning", replay ? "ReplayFailed" : "DeadLettered", final.message);
    } else {
      if (ep) ep.discardedDelta++;
      if (final.reason === "Poison") this.d.metrics.dlqOperations.inc({ operation: "drop_poison" });
      this.d.events.record(deliveryRef(obj), "Warning", final.reason === "Poison" ? "ReplayFailed" : "Discarded", final.message);
    }
    this.d.endpointChanged(subKey, false);
  }

  /** Records an outcome kept from an earlier write that failed, on a fresh read of the delivery. */
  private async writeUnwritten(key: string, pending: Unwritten): Promise<Result | void> {
    let written: { obj: DeliveryObject; final?: Final } | undefined;
    try {
      const obj = await this.fetch(key);
      written = obj ? await this.writeOutcome(key, obj, pending.compute, pending.basis) : undefined;
    } catch (err) {
      if (err instanceof ApiError && err.isRefused) this.writesFailing = false; // it answers: no outage
      throw err;
    }
    this.unwritten.delete(key);
    this.writesFailing = false;
    if (!written) return;
    if (written.final) this.onFinal(written.obj, written.final, pending.subKey, pending.replay);
    return this.afterOutcome(written);
  }

  private afterOutcome(written: { obj: DeliveryObject; final?: Final }): Result | void {
    const next = fromRfc3339(written.obj.status?.nextAttemptAt);
    if (written.final || next === undefined) return;
    return { requeueAfter: Math.max(0, next - this.now()) };
  }

  /**
   * Writes an attempt's outcome; if the API server cannot be reached the outcome is kept and
   * written first on the next reconcile, so the delivery is not attempted again meanwhile.
   */
  private async writeOutcomeOrKeep(key: string, obj: DeliveryObject, compute: (s: DeliveryStatus | undefined) => OutcomeResult, subKey: string, replay: boolean) {
    try {
      const written = await this.writeOutcome(key, obj, compute);
      this.writesFailing = false;
      return written;
    } catch (err) {
      this.unwritten.set(key, { compute, basis: obj.status, subKey, replay });
      // Only an outage holds back every attempt. A write the API server refuses concerns this
      // object alone: it is retried for this key (with the per-key backoff), never re-sent.
      if (err instanceof ApiError && err.isRefused) {
        this.d.events.record(deliveryRef(obj), "Warning", "StatusWriteRefused", `the API server refused the attempt's status (${err.message}); the outcome is kept and written again, the request is not re-sent`);
        this.unwritten.set(key, { compute: (s) => essentials(compute(s)), basis: obj.status, subKey, replay });
      } else this.writesFailing = true;
      throw err;
    }
  }


  /**
   * Merge-patches status computed from the freshest copy: the patch carries the
   * resourceVersion it was computed from; on Conflict the object is read again and the outcome
   * re-applied to it. Returns undefined when the delivery no longer exists.
   */
  async writeOutcome(key: string, obj: DeliveryObject, compute: (s: DeliveryStatus | undefined) => OutcomeResult, basis: DeliveryStatus | undefined = obj.status): Promise<{ obj: DeliveryObject; final?: Final } | undefined> {
    const [namespace, name] = key.split("/") as [string, string];
    let current: DeliveryObject | undefined = obj;
    for (let i = 0; i < 5 && current; i++) {
      if (movedPast(basis, current.status)) {
        this.d.log.info({ delivery: key, phase: current.status?.phase, attempt: current.status?.lastAttempt?.number }, "outcome dropped: the delivery moved on while it was written");
        // The cache is behind what we just read: wait for the watch to bring this version (or
        // read it again) before planning, never plan another attempt from the stale copy.
        if (current.metadata.resourceVersion) this.d.expectations.expect(key, current.metadata.resourceVersion);
        return { obj: current };
      }
      const computed = compute(current.status);
      const result = { ...computed, status: this.d.statusWriter.fit(DELIVERIES, computed.status) };
      const patch = createMergePatch(current.status ?? {}, result.status);
      if (patch === undefined) return { obj: current, ...(result.final ? { final: result.final } : {}) };
      try {
        const { metadata } = await this.d.statusWriter.patchStatusMetadataOnly(DELIVERIES, namespace, name, patch, current.metadata.resourceVersion);
        this.d.expectations.expect(key, metadata.resourceVersion);
        const updated: DeliveryObject = { ...current, metadata, status: result.status };
        return { obj: updated, ...(result.final ? { final: result.final } : {}) };
      } catch (err) {
        if (err instanceof ApiError && err.isNotFound) return undefined;
        if (!(err instanceof ApiError && err.isConflict)) throw err;
        current = await this.fetch(key);
      }
    }
    if (!current) return undefined;
    throw new Error(`status of ${key} kept changing under us (5 conflicts in a row)`);
  }

  async fetch(key: string): Promise<DeliveryObject | undefined> {
    const [namespace, name] = key.split("/") as [string, string];
    try {
      return await this.d.client.request<DeliveryObject>({ method: "GET", path: objectPath(DELIVERIES, namespace, name) });
    } catch (err) {
      if (err instanceof ApiError && err.isNotFound) return undefined;
      throw err;
    }
  }

  /** Removes a replay annotation that cannot be honoured, with a Warning Event. */
  async refuseReplay(obj: DeliveryObject, why: string): Promise<void> {
    const reason = obj.metadata.annotations?.[ANNOTATIONS.replay] ?? "";
    this.d.events.record(deliveryRef(obj), "Warning", "ReplayRefused", `replay "${reason.slice(0, 200)}" refused: ${why}`);
    try {
      await this.d.statusWriter.patchMetadata(DELIVERIES, obj.metadata.namespace!, obj.metadata.name, { annotations: { [ANNOTATIONS.replay]: null } });
    } catch (err) {
      if (!(err instanceof ApiError && err.isNotFound)) throw err;
    }
  }

  /** For the replay module: one attempt on a dead letter, outside the retry schedule. */
  async replayAttempt(key: string, obj: DeliveryObject, replay: { reason: string; requestId?: string }, signal: AbortSignal): Promise<{ outcome: "succeeded" | "failed" | "skipped" | "parked"; detail?: string }> {
    const parsed = this.d.caches.deliverySpec(obj);
    if (!parsed.ok) return { outcome: "skipped", detail: parsed.message };
    const namespace = obj.metadata.namespace!;
    const subKey = `${namespace}/${parsed.spec.subscriptionRef.name}`;
    const subObj = this.d.caches.subscription(subKey);
    const view = this.subscriptionView(subObj);
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
    const creds = await this.d.credentials.resolve(namespace, policy); // [receiver-credentials]
    if (creds.kind === "missing") return { outcome: "skipped", detail: creds.message }; // [receiver-credentials]
    const ep = this.d.endpoints.ensure(subKey, subObj.metadata.uid, subObj.status, policy, this.now());
    // A replay is an operator's explicit request: it bypasses backoff, breaker and health gates,
    // but not the request slots: it waits (parked, woken when one frees) like any attempt.
    const slot = this.d.endpoints.slotFor(ep, policy.maxInFlight, key);
    if (slot !== "free") {
      this.d.endpoints.park(ep, key, slot);
      return { outcome: "parked" };
    }
    const commit = { breaker: ep.breaker, health: ep.health, bucket: ep.bucket };
    const written = await this.attemptOnce(key, obj, policy, ep, subKey, { type: "Attempt", probe: false, commit }, keys, creds, signal, replay); // [receiver-credentials] creds
    return { outcome: written?.obj.status?.phase === "Succeeded" ? "succeeded" : "failed" };
  }
}
