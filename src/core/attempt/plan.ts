// plan(): what to do with one non-terminal delivery right now, decided from a snapshot of the
// delivery, its subscription, its Secret and its endpoint. Pure: the executor does the I/O and
// commits the endpoint state an Attempt carries (probe granted, token taken).
import { MAX_PAYLOAD_BYTES, OPERATOR_EVENT_PREFIX, PING_EVENT_TYPE, type DeadLetterReason, type DeliveryPhase, type DiscardReason } from "../../api/names.js";
import * as breaker from "../endpoint/breaker.js";
import * as health from "../endpoint/health.js";
import { orderGate, type OrderView } from "../ordering.js";
import { matchesEventType, type Policy } from "./policy.js";
import { attemptsLeft } from "./retry.js";
import { share, take, type TokenBucket } from "../endpoint/token-bucket.js";

export type WaitReason = "SubscriptionNotFound" | "InvalidSubscription" | "SecretNotFound" | "Paused" | "BacklogFull";

export interface DeliveryView {
  phase: DeliveryPhase | undefined;
  attempts: number;
  nextAttemptAt: number | undefined;
  eventType: string;
  payloadBytes: number;
  /** Why the payload cannot be sent at all (e.g. nested too deep), if it cannot. */
  payloadInvalid?: string;
  /**
   * A dead letter that stream mode created and whose status it has not written yet (annotation
   * hookline.dev/stream-message): its attempts were made from the stream, never here.
   */
  fromStream?: boolean;
  /** Not among the subscription's first spec.maxPending active deliveries: it waits its turn. */
  backlogFull?: boolean;
}

export type SubscriptionView =
  | { kind: "missing" }
  | { kind: "invalid"; message: string }
  | { kind: "ok"; policy: Policy };

export type SecretView = { kind: "ok" } | { kind: "none" } | { kind: "missing"; message: string };

export interface EndpointView {
  breaker: breaker.BreakerState;
  health: health.HealthState;
  bucket: TokenBucket | undefined;
  /** This endpoint's requests in flight. */
  inFlight: number;
  /** A global slot (WEBHOOK_MAX_IN_FLIGHT, shared fairly between namespaces) may be taken now. */
  globalSlot: boolean;
  healthProbeIntervalMs: number;
  /** The endpoint asked for no requests before this (429/503 with Retry-After; core/endpoint/throttle.ts). */
  throttledUntil?: number;
  /** Replicas delivering to this endpoint, each with its own bucket (stream mode): each takes its share of the rate. Default 1. */
  replicas?: number;
}

export interface EndpointCommit {
  breaker: breaker.BreakerState;
  breakerTransition?: breaker.BreakerTransition;
  health: health.HealthState;
  bucket: TokenBucket | undefined;
}

export type Action =
  /** Send now. `probe`: this attempt is the breaker's (or a Disabled endpoint's) single trial. */
  | { type: "Attempt"; probe: boolean; commit: EndpointCommit }
  /** Nothing to write; look again at `at`. */
  | { type: "WaitUntil"; at: number; why: "backoff" | "breaker" | "disabled" | "rate" | "throttled" }
  /** Not its turn in its ordering lane: the Succeeded condition says why; woken by the lane. */
  | { type: "Hold"; reason: "OrderingWait" | "OrderingBlocked"; message: string }
  /** Nothing to write; woken when a slot frees or the probe in flight reports back. */
  | { type: "Park"; why: "endpoint" | "global" | "probe" }
  /** Waiting for something the user must fix: the Succeeded condition says what. */
  | { type: "Wait"; reason: WaitReason; message: string }
  | { type: "DeadLetter"; reason: DeadLetterReason; message: string }
  | { type: "Discard"; reason: DiscardReason; message: string }
  | { type: "Nothing" };

export interface PlanInput {
  now: number;
  delivery: DeliveryView;
  subscription: SubscriptionView;
  secret: SecretView;
  endpoint: EndpointView | undefined;
  /** The delivery's ordering lane (subscriptions with spec.ordering; core/ordering.ts). */
  order?: OrderView;
}

export function plan({ now, delivery, subscription, secret, endpoint, order }: PlanInput): Action {
  if (delivery.phase === "Succeeded" || delivery.phase === "DeadLettered" || delivery.phase === "Discarded") return { type: "Nothing" };
  // Created by stream mode to record a final outcome; its status write follows (or, after a
  // crash, the message's redelivery writes it). Attempting it would send the event again.
  if (delivery.fromStream && delivery.phase === undefined) return { type: "Nothing" };

  if (delivery.payloadInvalid !== undefined) return { type: "Discard", reason: "InvalidPayload", message: delivery.payloadInvalid };
  if (delivery.payloadBytes > MAX_PAYLOAD_BYTES) {
    return { type: "Discard", reason: "PayloadTooLarge", message: `payload is ${delivery.payloadBytes} bytes serialized; the limit is ${MAX_PAYLOAD_BYTES}` };
  }
  if (subscription.kind === "missing") {
    return { type: "Wait", reason: "SubscriptionNotFound", message: "waiting for its WebhookSubscription to exist" };
  }
  if (subscription.kind === "invalid") {
    return { type: "Wait", reason: "InvalidSubscription", message: `waiting for its WebhookSubscription to be fixed: ${subscription.message}` };
  }
  const policy = subscription.policy;
  // Before anything that could finish it: a delivery that is not its lane's turn must not become
  // a dead letter (which would block the lane) ahead of the older ones.
  const hold = orderGate(order);
  if (hold) return { type: "Hold", ...hold };
  // Hookline's own events (a ping, a notification) go whatever eventTypes says.
  if (delivery.eventType !== PING_EVENT_TYPE && !delivery.eventType?.startsWith(OPERATOR_EVENT_PREFIX) && !matchesEventType(policy.eventTypes, delivery.eventType)) {
    // Dead-lettered, not discarded: the event may have been accepted while its type was listed
    // (eventTypes edited since). It is kept, and replayed once the type is listed again.
    return {
      type: "DeadLetter",
      reason: "EventTypeNotSubscribed",
      message: `the subscription does not list event type ${delivery.eventType} (eventTypes: ${(policy.eventTypes ?? []).join(", ")}); replay it after adding the type`,
    };
  }
  if (policy.paused) return { type: "Wait", reason: "Paused", message: "the subscription is paused" };
  if (secret.kind === "missing") return { type: "Wait", reason: "SecretNotFound", message: secret.message };
  if (delivery.backlogFull) {
    return {
      type: "Wait",
      reason: "BacklogFull",
      message: `the subscription's backlog is full (spec.maxPending=${policy.maxPending ?? "?"}): this delivery waits its turn and is attempted when one ahead of it finishes`,
    };
  }

  if (delivery.nextAttemptAt !== undefined && delivery.nextAttemptAt > now) {
    return { type: "WaitUntil", at: delivery.nextAttemptAt, why: "backoff" };
  }
  if (!attemptsLeft(policy.retry, delivery.attempts)) {
    return { type: "DeadLetter", reason: "Exhausted", message: `all ${policy.retry.maxAttempts} attempts failed` };
  }
  if (!endpoint) throw new Error("plan needs the endpoint to admit an attempt");
  return admit(now, policy, endpoint);
}

/**
 * The endpoint gates, in order: Retry-After hold, health, breaker, global slots, endpoint slots,
 * rate. Pure: the Attempt it returns carries the state to commit; stream mode also asks it,
 * without committing, whether to fetch more messages.
 */
export function admit(now: number, policy: Policy, ep: EndpointView): Action {
  // The receiver asked for no requests until then: not even a probe.
  if (ep.throttledUntil !== undefined && ep.throttledUntil > now) return { type: "WaitUntil", at: ep.throttledUntil, why: "throttled" };
  const breakerCfg = policy.breaker;
  const h = health.admit(ep.health, now, { degradedAfter: health.HEALTH_DEGRADED_AFTER, disabledAfter: health.HEALTH_DISABLED_AFTER, probeIntervalMs: ep.healthProbeIntervalMs });
  if (h.decision === "wait") return { type: "WaitUntil", at: h.waitUntil ?? now + ep.healthProbeIntervalMs, why: "disabled" };

  // A Disabled endpoint's probe is also the breaker's probe, whatever its cooldown says.
  const b = breaker.admit(ep.breaker, h.decision === "probe" ? Math.max(now, ep.breaker.nextProbeAt ?? now) : now, breakerCfg);
  if (b.decision === "wait") {
    if (breakerCfg.whenOpen === "DeadLetter") {
      return { type: "DeadLetter", reason: "BreakerOpen", message: `the endpoint's circuit breaker is ${ep.breaker.state}` };
    }
    return b.waitUntil !== undefined ? { type: "WaitUntil", at: b.waitUntil, why: "breaker" } : { type: "Park", why: "probe" };
  }
  const probe = b.decision === "probe" || h.decision === "probe";
  if (!ep.globalSlot) return { type: "Park", why: "global" };
  if (ep.inFlight >= policy.maxInFlight) return { type: "Park", why: "endpoint" };
  let bucket = ep.bucket;
  if (policy.rateLimit) {
    const t = take(bucket, now, share(policy.rateLimit, ep.replicas ?? 1));
    if (!t.ok) return { type: "WaitUntil", at: now + t.retryInMs, why: "rate" };
    bucket = t.bucket;
  }
  return {
    type: "Attempt",
    probe,
    commit: { breaker: b.state, ...(b.transition ? { breakerTransition: b.transition } : {}), health: h.state, bucket },
  };
}

/**
 * A replay's admission: an operator's explicit request, it bypasses backoff, the breaker and
 * health (the attempt is not a probe and commits the endpoint's state as it is), but not the
 * endpoint's Retry-After hold nor the request slots (it parks, woken when one frees).
 */
export function admitReplay(now: number, policy: Pick<Policy, "maxInFlight">, ep: EndpointView): Extract<Action, { type: "Attempt" | "WaitUntil" | "Park" }> {
  if (ep.throttledUntil !== undefined && ep.throttledUntil > now) return { type: "WaitUntil", at: ep.throttledUntil, why: "throttled" };
  if (!ep.globalSlot) return { type: "Park", why: "global" };
  if (ep.inFlight >= policy.maxInFlight) return { type: "Park", why: "endpoint" };
  return { type: "Attempt", probe: false, commit: { breaker: ep.breaker, health: ep.health, bucket: ep.bucket } };
}
