// Properties of plan() over generated snapshots: the gates the contract names never let an
// Attempt through, and an Attempt's commit never takes more than the slots allow nor grants a
// second probe. The snapshot is built like plan.test.ts builds it: a subscription spec through
// the real schema and resolvePolicy, breaker/health/bucket states as the operator holds them.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DELIVERY_PHASES, MAX_PAYLOAD_BYTES } from "../../api/names.js";
import { subscriptionSpecSchema } from "../../api/subscription.js";
import { closedBreaker, type BreakerState } from "../endpoint/breaker.js";
import { healthyEndpoint, type HealthState } from "../endpoint/health.js";
import { plan, type Action, type EndpointView, type PlanInput, type SubscriptionView } from "./plan.js";
import { resolvePolicy, type Policy } from "./policy.js";

const NOW = Date.UTC(2025, 5, 15, 12, 0, 0);
const defaults = { deliveryTimeoutMs: 10_000, breaker: { failureThreshold: 5, successThreshold: 1, cooldownMs: 60_000 } };
const offset = fc.oneof(fc.constant(0), fc.integer({ min: -600_000, max: 600_000 }), fc.integer({ min: -1, max: 1 }));

// One spec through the real schema and resolvePolicy; the generated fields vary within the API's
// ranges (cheaper than a zod parse per run).
const basePolicy = resolvePolicy(subscriptionSpecSchema.parse({ url: "https://hooks.acme.example/orders" }), defaults);
const policyArb: fc.Arbitrary<Policy> = fc
  .record({
    maxAttempts: fc.integer({ min: 1, max: 50 }),
    paused: fc.boolean(),
    eventTypes: fc.option(fc.constantFrom(["*"], ["order.*"], ["order.paid"], ["invoice.paid"]), { nil: undefined }),
    whenOpen: fc.constantFrom("Defer" as const, "DeadLetter" as const),
    cooldownMs: fc.constantFrom(1_000, 30_000, 300_000),
    maxInFlight: fc.integer({ min: 1, max: 20 }),
    rateLimit: fc.option(fc.record({ perSecond: fc.integer({ min: 1, max: 20 }), burst: fc.integer({ min: 1, max: 5 }) }), { nil: undefined }),
  })
  .map((g) => ({
    ...basePolicy,
    retry: { ...basePolicy.retry, maxAttempts: g.maxAttempts },
    paused: g.paused,
    eventTypes: g.eventTypes === undefined ? undefined : [...g.eventTypes],
    breaker: { ...basePolicy.breaker, whenOpen: g.whenOpen, cooldownMs: g.cooldownMs },
    maxInFlight: g.maxInFlight,
    rateLimit: g.rateLimit,
  }));
const subscriptionArb: fc.Arbitrary<SubscriptionView> = fc.oneof(
  { weight: 8, arbitrary: policyArb.map((policy) => ({ kind: "ok" as const, policy })) },
  { weight: 1, arbitrary: fc.constant({ kind: "missing" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "invalid" as const, message: "bad" }) },
);

const breakerArb: fc.Arbitrary<BreakerState> = fc.oneof(
  fc.nat(10).map((consecutiveFailures) => ({ ...closedBreaker, consecutiveFailures })),
  fc.record({ opened: offset, probe: fc.option(offset, { nil: undefined }) }).map(({ opened, probe }) => ({
    state: "Open" as const,
    consecutiveFailures: 5,
    halfOpenSuccesses: 0,
    openedAt: NOW + Math.min(0, opened),
    ...(probe === undefined ? {} : { nextProbeAt: NOW + probe }),
    probeInFlight: false,
  })),
  fc.boolean().map((probeInFlight) => ({ state: "HalfOpen" as const, consecutiveFailures: 5, halfOpenSuccesses: 0, openedAt: NOW - 90_000, probeInFlight })),
);
const healthArb: fc.Arbitrary<HealthState> = fc.oneof(
  fc.constant({ ...healthyEndpoint }),
  fc.constant({ ...healthyEndpoint, state: "Degraded" as const, consecutiveFailures: 4 }),
  fc.option(offset, { nil: undefined }).map((probe) => ({
    state: "Disabled" as const,
    consecutiveFailures: 10,
    totalAttempts: 10,
    totalFailures: 10,
    disabledReason: "Failures" as const,
    ...(probe === undefined ? {} : { nextProbeAt: NOW + probe }),
  })),
);
const endpointArb: fc.Arbitrary<EndpointView> = fc.record({
  breaker: breakerArb,
  health: healthArb,
  bucket: fc.option(fc.record({ tokens: fc.double({ min: 0, max: 5, noNaN: true }), updatedAt: offset.map((o) => NOW + Math.min(0, o)) }), { nil: undefined }),
  inFlight: fc.nat(22),
  globalSlot: fc.boolean(),
  healthProbeIntervalMs: fc.constantFrom(1_000, 60_000, 1_800_000),
});
const anyInputArb: fc.Arbitrary<PlanInput> = fc.record({
  now: fc.constant(NOW),
  delivery: fc.record({
    phase: fc.option(fc.constantFrom(...DELIVERY_PHASES), { nil: undefined }),
    attempts: fc.nat(55),
    nextAttemptAt: fc.option(offset.map((o) => NOW + o), { nil: undefined }),
    eventType: fc.constantFrom("order.paid", "invoice.paid"),
    payloadBytes: fc.oneof(fc.nat(1_000), fc.constantFrom(MAX_PAYLOAD_BYTES, MAX_PAYLOAD_BYTES + 1)),
  }),
  subscription: subscriptionArb,
  secret: fc.constantFrom({ kind: "ok" as const }, { kind: "none" as const }, { kind: "missing" as const, message: "no secret" }),
  endpoint: endpointArb,
});

/** Half the snapshots pass every gate before the endpoint's, so the endpoint gates get exercised. */
const inputArb: fc.Arbitrary<PlanInput> = fc.tuple(anyInputArb, fc.boolean()).map(([input, clean]) =>
  clean && input.subscription.kind === "ok" ?
    {
      ...input,
      delivery: { phase: "Pending", attempts: 0, nextAttemptAt: undefined, eventType: "order.paid", payloadBytes: 100 },
      subscription: { kind: "ok", policy: { ...input.subscription.policy, paused: false, eventTypes: undefined } },
      secret: { kind: "ok" },
      endpoint: { ...input.endpoint!, inFlight: 0, globalSlot: true, bucket: undefined },
    }
  : input,
);
const isAttempt = (a: Action): a is Extract<Action, { type: "Attempt" }> => a.type === "Attempt";
const policyOf = (input: PlanInput) => (input.subscription.kind === "ok" ? input.subscription.policy : undefined);
/** When an Open breaker lets its probe go (its nextProbeAt, or openedAt + the cooldown). */
function breakerDueAt(b: BreakerState, cooldownMs: number): number {
  return b.nextProbeAt ?? (b.openedAt ?? NOW) + cooldownMs;
}

describe("plan (properties)", () => {
  it("a terminal phase gives Nothing", () => {
    fc.assert(
      fc.property(inputArb, fc.constantFrom("Succeeded" as const, "DeadLettered" as const, "Discarded" as const), (input, phase) => {
        expect(plan({ ...input, delivery: { ...input.delivery, phase } })).toEqual({ type: "Nothing" });
      }),
    );
  });

  it("never an Attempt when: backing off, attempts used up, paused, or no slot (endpoint or global)", () => {
    let attempts = 0;
    fc.assert(
      fc.property(inputArb, (input) => {
        const action = plan(input);
        if (!isAttempt(action)) return;
        attempts++;
        const policy = policyOf(input)!;
        const ep = input.endpoint!;
        expect(input.delivery.nextAttemptAt === undefined || input.delivery.nextAttemptAt <= input.now).toBe(true);
        expect(input.delivery.attempts).toBeLessThan(policy.retry.maxAttempts);
        expect(policy.paused).toBe(false);
        // The commit is taken with one more request in flight: it must fit both caps.
        expect(ep.inFlight + 1).toBeLessThanOrEqual(policy.maxInFlight);
        expect(ep.globalSlot).toBe(true);
        expect(input.secret.kind).not.toBe("missing");
        expect(input.delivery.payloadBytes).toBeLessThanOrEqual(MAX_PAYLOAD_BYTES);
      }),
      { numRuns: 400 },
    );
    expect(attempts).toBeGreaterThan(0);
  });

  it("an Open breaker before its cooldown gives no Attempt, except as the probe of a Disabled endpoint whose probe is due", () => {
    // The exception is plan.ts's documented rule ("a Disabled endpoint's probe is also the
    // breaker's probe, whatever its cooldown says"): one probe serves both gates.
    const openInputArb = fc.tuple(inputArb, policyArb, fc.integer({ min: 1, max: 600_000 }), fc.boolean()).map(([input, policy, ahead, stored]) => {
      const breaker: BreakerState = stored ?
          { state: "Open", consecutiveFailures: 5, halfOpenSuccesses: 0, openedAt: NOW - 1_000, nextProbeAt: NOW + ahead, probeInFlight: false }
        : { state: "Open", consecutiveFailures: 5, halfOpenSuccesses: 0, openedAt: NOW + Math.min(0, ahead - policy.breaker.cooldownMs), probeInFlight: false };
      return { ...input, subscription: { kind: "ok" as const, policy }, endpoint: { ...input.endpoint!, breaker } };
    });
    let exceptions = 0;
    fc.assert(
      fc.property(openInputArb, (input) => {
        const ep = input.endpoint;
        expect(input.now).toBeLessThan(breakerDueAt(ep.breaker, policyOf(input)!.breaker.cooldownMs));
        const action = plan(input);
        if (!isAttempt(action)) return;
        expect(ep.health.state).toBe("Disabled");
        expect(action.probe).toBe(true);
        expect(action.commit.breaker).toMatchObject({ state: "HalfOpen", probeInFlight: true });
        expect(action.commit.health.nextProbeAt).toBe(input.now + ep.healthProbeIntervalMs);
        exceptions++;
      }),
      { numRuns: 300 },
    );
    // The generator reaches the exception (or this property would say nothing about it).
    expect(exceptions).toBeGreaterThan(0);
  });

  it("an Attempt's commit grants at most one probe: planning again on the committed state gives no second probe", () => {
    let probes = 0;
    fc.assert(
      fc.property(inputArb, (input) => {
        const first = plan(input);
        if (!isAttempt(first)) return;
        if (first.probe) probes++;
        const ep = input.endpoint!;
        if (ep.breaker.state === "HalfOpen") expect(ep.breaker.probeInFlight).toBe(false);
        if (first.probe && first.commit.breaker.state === "HalfOpen") expect(first.commit.breaker.probeInFlight).toBe(true);
        const committed: EndpointView = { ...ep, ...first.commit, inFlight: ep.inFlight + 1 };
        const second = plan({ ...input, endpoint: committed });
        if (first.probe) expect(isAttempt(second)).toBe(false);
        if (isAttempt(second)) expect(second.commit.bucket === undefined || second.commit.bucket.tokens >= 0).toBe(true);
      }),
      { numRuns: 400 },
    );
    expect(probes).toBeGreaterThan(0);
  });

  it("is pure: the same snapshot gives the same action and is not mutated", () => {
    fc.assert(
      fc.property(inputArb, (input) => {
        const before = structuredClone(input);
        const action = plan(input);
        expect(input).toEqual(before);
        expect(plan(input)).toEqual(action);
      }),
      { numRuns: 100 },
    );
  });
});
