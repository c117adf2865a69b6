// The delivery step's own rules, with a real endpoint registry: one clock, one randomness and one
// drain action for every transport's outcome; plan() and a replay's admission over the same
// endpoint state; nothing committed on the endpoint until an attempt runs.
import { describe, expect, it } from "vitest";
import { subscriptionSpecSchema, type SubscriptionSpecInput } from "../../api/subscription.js";
import { classify } from "../../core/attempt/classify.js";
import type { AttemptResult } from "../../core/attempt/outcome.js";
import { resolvePolicy, type Policy } from "../../core/attempt/policy.js";
import { fromRfc3339 } from "../../core/rfc3339.js";
import { EndpointRegistry } from "./endpoints.js";
import { DeliveryStep, type DeliveryStepDeps, type StepSubscription } from "./step.js";

const NOW = Date.UTC(2026, 11, 3, 12, 0, 0);
const BREAKER = { failureThreshold: 2, successThreshold: 1, cooldownMs: 60_000 };

function policyOf(spec: Partial<SubscriptionSpecInput> = {}): Policy {
  return resolvePolicy(subscriptionSpecSchema.parse({ url: "https://hooks.acme.example/orders", ...spec }), { deliveryTimeoutMs: 10_000, breaker: BREAKER });
}

/** A step over a real registry; the Secrets, credentials and executor are not reached by these rules. */
function stepWith(random: () => number, interruptedAction: DeliveryStepDeps["interruptedAction"] = "requeue") {
  const endpoints = new EndpointRegistry({ globalMax: 10, healthProbeIntervalMs: 600_000, defaults: { deliveryTimeoutMs: 10_000, breaker: BREAKER }, wake: () => undefined, now: () => NOW });
  const unreached = new Proxy({}, { get: (_, p) => () => expect.fail(`the step reached ${String(p)}`) }) as never;
  const step = new DeliveryStep({ endpoints, secrets: unreached, credentials: unreached, executor: unreached, interruptedAction, now: () => NOW, random });
  return { step, endpoints };
}

const failed = (status: number): AttemptResult => ({ startedAt: NOW, durationMs: 5, responseStatus: status, classification: classify({ kind: "response", status }) });
const interrupted: AttemptResult = { startedAt: NOW, durationMs: 5, classification: "interrupted" };

describe("DeliveryStep.outcome: one computation for every transport", () => {
  const policy = policyOf({ retry: { maxAttempts: 5, initialBackoff: "10s", maxBackoff: "60s", jitterPercent: 50 } });

  it("draws the backoff's jitter from the step's randomness and dates it by the step's clock", () => {
    const at = (random: number) => fromRfc3339(stepWith(() => random).step.outcome(undefined, 1, failed(503), policy).status.nextAttemptAt)! - NOW;
    // 10 s +- 50 %: the step's random() picks where.
    expect(at(0)).toBe(5_000);
    expect(at(0.5)).toBe(10_000);
    expect(at(0.75)).toBe(12_500);
  });

  it("applies the drain action to an interrupted attempt, but never to a replay's", () => {
    const { step } = stepWith(() => 0.5, "dead-letter");
    expect(step.outcome({ phase: "Retrying", attempts: 1 }, 1, interrupted, policy).final).toMatchObject({ phase: "DeadLettered", reason: "Drain" });
    const replayed = step.outcome({ phase: "DeadLettered", attempts: 5 }, 1, interrupted, policy, { reason: "fixed the receiver" });
    expect(replayed.final).toBeUndefined();
    expect(replayed.status.phase).toBe("DeadLettered");
  });
});

describe("DeliveryStep.plan and planReplay: the same endpoint state, different gates", () => {
  const policy = policyOf({ maxInFlight: 1 });
  const acme: StepSubscription & { object: { uid: string; status: undefined } } = { key: "shop/acme", object: { uid: "uid-1", status: undefined }, view: { kind: "ok", policy } };
  const due = () => ({ phase: "Pending" as const, attempts: 0, nextAttemptAt: undefined, eventType: "order.paid", payloadBytes: 10 });

  it("an Open breaker holds a delivery but not a replay; neither commits anything on the endpoint", () => {
    const { step, endpoints } = stepWith(() => 0.5);
    const ep = endpoints.ensure("shop/acme", "uid-1", undefined, policy, NOW);
    for (let i = 0; i < BREAKER.failureThreshold; i++) endpoints.report(ep, policy, failed(500).classification, { probe: false, viaReplay: false });
    expect(ep.breaker.state).toBe("Open");
    const planned = step.plan("shop/evt-1", acme, { kind: "ok" }, due);
    expect(planned.action).toMatchObject({ type: "WaitUntil", why: "breaker" });
    expect(planned.endpoint).toBe(ep);
    const replay = step.planReplay("shop/evt-1", acme, policy);
    expect(replay.action).toEqual({ type: "Attempt", probe: false, commit: { breaker: ep.breaker, health: ep.health, bucket: ep.bucket } });
    expect(ep.inFlight).toBe(0);
  });

  it("a taken endpoint slot parks both; the delivery's view is asked in the same turn", () => {
    const { step, endpoints } = stepWith(() => 0.5);
    const ep = endpoints.ensure("shop/acme", "uid-1", undefined, policy, NOW);
    endpoints.acquire(ep, { breaker: ep.breaker, health: ep.health, bucket: ep.bucket }, "shop/other");
    let asked: Policy | undefined;
    expect(step.plan("shop/evt-1", acme, { kind: "ok" }, (p) => ((asked = p), due())).action).toEqual({ type: "Park", why: "endpoint" });
    expect(asked).toBe(policy);
    expect(step.planReplay("shop/evt-1", acme, policy).action).toEqual({ type: "Park", why: "endpoint" });
  });

  it("no subscription object: no endpoint, and plan() says why it waits", () => {
    const { step } = stepWith(() => 0.5);
    expect(step.plan("shop/evt-1", { key: "shop/gone", object: undefined, view: { kind: "missing" } }, { kind: "ok" }, due)).toMatchObject({ action: { type: "Wait", reason: "SubscriptionNotFound" }, endpoint: undefined, now: NOW });
  });
});
