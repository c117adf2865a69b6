import { describe, expect, it } from "vitest";
import { MAX_PAYLOAD_BYTES, type DeliveryPhase } from "../../api/names.js";
import { subscriptionSpecSchema, type SubscriptionSpecInput } from "../../api/subscription.js";
import { closedBreaker, type BreakerState } from "../endpoint/breaker.js";
import { healthyEndpoint, type HealthState } from "../endpoint/health.js";
import { admit, admitReplay, plan, type Action, type DeliveryView, type EndpointView, type PlanInput, type SecretView, type SubscriptionView } from "./plan.js";
import { resolvePolicy, type Policy, type PolicyDefaults } from "./policy.js";

const NOW = Date.UTC(2025, 5, 15, 12, 0, 0);
const PROBE_INTERVAL = 1_800_000;
const defaults: PolicyDefaults = { deliveryTimeoutMs: 10_000, breaker: { failureThreshold: 5, successThreshold: 1, cooldownMs: 60_000 } };

function policyOf(spec: Partial<SubscriptionSpecInput> = {}): Policy {
  return resolvePolicy(subscriptionSpecSchema.parse({ url: "https://hooks.acme.example/orders", ...spec }), defaults);
}

const okSub = (spec: Partial<SubscriptionSpecInput> = {}): SubscriptionView => ({ kind: "ok", policy: policyOf(spec) });

const delivery = (over: Partial<DeliveryView> = {}): DeliveryView => ({
  phase: "Pending",
  attempts: 0,
  nextAttemptAt: undefined,
  eventType: "order.paid",
  payloadBytes: 100,
  ...over,
});

const closed = (): BreakerState => ({ ...closedBreaker });
const open = (nextProbeAt: number | undefined, openedAt = NOW - 30_000): BreakerState => ({
  state: "Open",
  consecutiveFailures: 5,
  halfOpenSuccesses: 0,
  openedAt,
  ...(nextProbeAt !== undefined ? { nextProbeAt } : {}),
  probeInFlight: false,
});
const halfOpen = (probeInFlight: boolean): BreakerState => ({ state: "HalfOpen", consecutiveFailures: 5, halfOpenSuccesses: 0, openedAt: NOW - 90_000, probeInFlight });

const healthy = (): HealthState => ({ ...healthyEndpoint });
const disabled = (nextProbeAt: number | undefined): HealthState => ({
  state: "Disabled",
  consecutiveFailures: 10,
  totalAttempts: 10,
  totalFailures: 10,
  lastFailureAt: NOW - 60_000,
  disabledReason: "Gone",
  ...(nextProbeAt !== undefined ? { nextProbeAt } : {}),
});

const endpoint = (over: Partial<EndpointView> = {}): EndpointView => ({
  breaker: closed(),
  health: healthy(),
  bucket: undefined,
  inFlight: 0,
  globalSlot: true,
  healthProbeIntervalMs: PROBE_INTERVAL,
  ...over,
});

function input(over: { delivery?: Partial<DeliveryView>; subscription?: SubscriptionView; secret?: SecretView; endpoint?: Partial<EndpointView> | null; now?: number } = {}): PlanInput {
  return {
    now: over.now ?? NOW,
    delivery: delivery(over.delivery),
    subscription: over.subscription ?? okSub(),
    secret: over.secret ?? { kind: "ok" },
    endpoint: over.endpoint === null ? undefined : endpoint(over.endpoint ?? {}),
  };
}

/** An Attempt through every gate with nothing to change: Closed, Healthy, no rate limit. */
const plainAttempt: Action = { type: "Attempt", probe: false, commit: { breaker: closed(), health: healthy(), bucket: undefined } };

describe("plan: terminal phases", () => {
  const terminal: DeliveryPhase[] = ["Succeeded", "DeadLettered", "Discarded"];
  it.each(terminal)("%s -> Nothing, whatever else is wrong", (phase) => {
    // Oversized payload, missing subscription, no endpoint: none of it is looked at.
    expect(plan(input({ delivery: { phase, payloadBytes: MAX_PAYLOAD_BYTES + 1, attempts: 99 }, subscription: { kind: "missing" }, endpoint: null }))).toEqual({ type: "Nothing" });
  });

  it.each([undefined, "Pending", "Retrying"] as const)("phase %s is planned", (phase) => {
    expect(plan(input({ delivery: { phase } }))).toEqual(plainAttempt);
  });

  it("a dead letter stream mode created is not attempted before its status is written, and planned as any other once it is", () => {
    expect(plan(input({ delivery: { phase: undefined, fromStream: true }, subscription: { kind: "missing" }, endpoint: null }))).toEqual({ type: "Nothing" });
    expect(plan(input({ delivery: { phase: "DeadLettered", fromStream: true } }))).toEqual({ type: "Nothing" });
    expect(plan(input({ delivery: { phase: "Retrying", fromStream: true } }))).toEqual(plainAttempt);
  });
});

describe("admit: the endpoint gates alone (stream mode asks them before fetching)", () => {
  it("is plan()'s answer for a due delivery, without the delivery", () => {
    const policy = policyOf({ rateLimit: { perSecond: 1, burst: 1 } });
    for (const ep of [endpoint(), endpoint({ breaker: open(NOW + 1_000) }), endpoint({ breaker: halfOpen(true) }), endpoint({ health: disabled(NOW + 5) }), endpoint({ inFlight: 10 }), endpoint({ globalSlot: false })]) {
      expect(admit(NOW, policy, ep)).toEqual(plan(input({ subscription: { kind: "ok", policy }, endpoint: ep })));
    }
  });
});

describe("admitReplay: an operator's replay passes the breaker and health, not the Retry-After hold or the slots", () => {
  const policy = policyOf({ rateLimit: { perSecond: 1, burst: 1 } });
  it("attempts through an Open breaker, a Disabled endpoint and an empty bucket, committing the state as it is (no probe taken)", () => {
    const breaker = open(NOW + 60_000);
    const health = disabled(NOW + 60_000);
    const bucket = { tokens: 0, updatedAt: NOW };
    expect(admitReplay(NOW, policy, endpoint({ breaker, health, bucket }))).toEqual({ type: "Attempt", probe: false, commit: { breaker, health, bucket } });
    // Where plan() would wait or probe.
    expect(admit(NOW, policy, endpoint({ breaker, health, bucket })).type).not.toBe("Attempt");
  });
  it("waits out a Retry-After hold, then parks for a global or an endpoint slot", () => {
    expect(admitReplay(NOW, policy, endpoint({ throttledUntil: NOW + 5_000, globalSlot: false }))).toEqual({ type: "WaitUntil", at: NOW + 5_000, why: "throttled" });
    expect(admitReplay(NOW, policy, endpoint({ throttledUntil: NOW, globalSlot: false }))).toEqual({ type: "Park", why: "global" });
    expect(admitReplay(NOW, policy, endpoint({ inFlight: policy.maxInFlight }))).toEqual({ type: "Park", why: "endpoint" });
    expect(admitReplay(NOW, policy, endpoint({ inFlight: policy.maxInFlight - 1 })).type).toBe("Attempt");
  });
});

describe("plan: payload size", () => {
  it.each([
    ["exactly the limit is sent", MAX_PAYLOAD_BYTES, "Attempt"],
    ["one byte over is discarded", MAX_PAYLOAD_BYTES + 1, "Discard"],
  ] as const)("%s", (_name, payloadBytes, type) => {
    expect(plan(input({ delivery: { payloadBytes } })).type).toBe(type);
  });

  it.each<[string, SubscriptionView]>([
    ["a healthy subscription", okSub()],
    ["a missing subscription", { kind: "missing" }],
    ["an invalid subscription", { kind: "invalid", message: "bad url" }],
    ["a paused subscription", okSub({ paused: true })],
    ["a subscription for other event types", okSub({ eventTypes: ["invoice.paid"] })],
  ])("Discard PayloadTooLarge with %s", (_name, subscription) => {
    const action = plan(input({ delivery: { payloadBytes: MAX_PAYLOAD_BYTES + 10 }, subscription, secret: { kind: "missing", message: "no secret" }, endpoint: null }));
    expect(action).toEqual({ type: "Discard", reason: "PayloadTooLarge", message: expect.stringContaining(String(MAX_PAYLOAD_BYTES + 10)) });
    expect((action as { message: string }).message).toContain(String(MAX_PAYLOAD_BYTES));
  });

  it.each<[string, SubscriptionView]>([
    ["a healthy subscription", okSub()],
    ["a missing subscription", { kind: "missing" }],
    ["a paused subscription", okSub({ paused: true })],
  ])("Discard InvalidPayload with %s, whatever the payload's size", (_name, subscription) => {
    const action = plan(input({ delivery: { payloadBytes: MAX_PAYLOAD_BYTES + 10, payloadInvalid: "payload is nested too deep" }, subscription, endpoint: null }));
    expect(action).toEqual({ type: "Discard", reason: "InvalidPayload", message: "payload is nested too deep" });
  });
});

describe("plan: subscription", () => {
  it("missing -> Wait SubscriptionNotFound (no endpoint needed)", () => {
    expect(plan(input({ subscription: { kind: "missing" }, endpoint: null }))).toEqual({ type: "Wait", reason: "SubscriptionNotFound", message: expect.any(String) });
  });

  it("invalid -> Wait InvalidSubscription, carrying the parse message", () => {
    const action = plan(input({ subscription: { kind: "invalid", message: "spec.url: must be https" }, secret: { kind: "missing", message: "x" }, endpoint: null }));
    expect(action).toEqual({ type: "Wait", reason: "InvalidSubscription", message: expect.stringContaining("spec.url: must be https") });
  });
});

describe("plan: event types", () => {
  const table: Array<[string[] | undefined, string, boolean]> = [
    [undefined, "order.paid", true],
    [[], "order.paid", true],
    [["*"], "anything.at.all", true],
    [["order.paid"], "order.paid", true],
    [["order.paid"], "order.refunded", false],
    [["order.paid"], "order.paid.v2", false],
    [["order.*"], "order.paid", true],
    [["order.*"], "order.paid.v2", true],
    [["order.*"], "orders.paid", false],
    [["order.*"], "order", false],
    [["invoice.*", "order.paid"], "order.paid", true],
    [["invoice.*", "order.refunded"], "order.paid", false],
  ];
  it.each(table)("eventTypes %j, event %s -> matches: %s", (eventTypes, eventType, matches) => {
    const action = plan(input({ delivery: { eventType }, subscription: okSub(eventTypes === undefined ? {} : { eventTypes }) }));
    if (matches) expect(action).toEqual(plainAttempt);
    else expect(action).toEqual({ type: "DeadLetter", reason: "EventTypeNotSubscribed", message: expect.stringContaining(eventType) });
  });

  it("a ping (hookline.ping) goes to the subscription it names whatever its eventTypes", () => {
    const action = plan(input({ delivery: { eventType: "hookline.ping" }, subscription: okSub({ eventTypes: ["order.paid"] }) }));
    expect(action).toEqual(plainAttempt);
  });

  it("a mismatch is decided before paused, Secret, backoff and endpoint", () => {
    const action = plan(
      input({
        delivery: { eventType: "invoice.paid", nextAttemptAt: NOW + 10_000, attempts: 50 },
        subscription: okSub({ eventTypes: ["order.*"], paused: true }),
        secret: { kind: "missing", message: "Secret shop/acme-signing not found" },
        endpoint: null,
      }),
    );
    expect(action).toMatchObject({ type: "DeadLetter", reason: "EventTypeNotSubscribed" });
    expect((action as { message: string }).message).toContain("order.*");
  });
});

describe("plan: waits the user must fix", () => {
  it("paused -> Wait Paused, before a missing Secret", () => {
    expect(plan(input({ subscription: okSub({ paused: true }), secret: { kind: "missing", message: "gone" }, endpoint: null }))).toEqual({
      type: "Wait",
      reason: "Paused",
      message: "the subscription is paused",
    });
  });

  it("Secret missing -> Wait SecretNotFound with the lookup's message, before backoff", () => {
    expect(plan(input({ delivery: { nextAttemptAt: NOW + 5_000 }, secret: { kind: "missing", message: "Secret shop/acme-signing has no key secret" }, endpoint: null }))).toEqual({
      type: "Wait",
      reason: "SecretNotFound",
      message: "Secret shop/acme-signing has no key secret",
    });
  });

  it("backlog full (spec.maxPending) -> Wait BacklogFull naming the cap, after a missing Secret and before backoff", () => {
    expect(plan(input({ subscription: okSub({ maxPending: 7 }), delivery: { backlogFull: true, nextAttemptAt: NOW + 5_000 }, endpoint: null }))).toMatchObject({
      type: "Wait",
      reason: "BacklogFull",
      message: expect.stringContaining("spec.maxPending=7"),
    });
    expect(plan(input({ delivery: { backlogFull: true }, secret: { kind: "missing", message: "gone" }, endpoint: null }))).toMatchObject({ reason: "SecretNotFound" });
    expect(plan(input({ subscription: okSub({ maxPending: 7 }), delivery: { backlogFull: false } }))).toEqual(plainAttempt);
  });

  it.each<SecretView>([{ kind: "ok" }, { kind: "none" }])("Secret %j lets the delivery go", (secret) => {
    expect(plan(input({ secret }))).toEqual(plainAttempt);
  });
});

describe("plan: backoff", () => {
  it("nextAttemptAt in the future -> WaitUntil backoff at exactly that time", () => {
    expect(plan(input({ delivery: { nextAttemptAt: NOW + 1 } }))).toEqual({ type: "WaitUntil", at: NOW + 1, why: "backoff" });
  });

  it("consults no gate while backing off: no endpoint needed, Open breaker, DeadLetter policy, exhausted", () => {
    const action = plan(
      input({
        delivery: { nextAttemptAt: NOW + 7_000, attempts: 6 },
        subscription: okSub({ circuitBreaker: { whenOpen: "DeadLetter" } }),
        endpoint: null,
      }),
    );
    expect(action).toEqual({ type: "WaitUntil", at: NOW + 7_000, why: "backoff" });
    expect(plan(input({ delivery: { nextAttemptAt: NOW + 7_000 }, endpoint: { breaker: open(NOW + 60_000), globalSlot: false } }))).toEqual({ type: "WaitUntil", at: NOW + 7_000, why: "backoff" });
  });

  it.each([
    ["due now", NOW],
    ["overdue", NOW - 60_000],
  ])("nextAttemptAt %s -> attempted", (_name, nextAttemptAt) => {
    expect(plan(input({ delivery: { nextAttemptAt, attempts: 2, phase: "Retrying" } }))).toEqual(plainAttempt);
  });
});

describe("plan: attempts budget", () => {
  const sub = okSub({ retry: { maxAttempts: 3 } });
  it.each([
    [0, "Attempt"],
    [2, "Attempt"],
    [3, "DeadLetter"],
    [4, "DeadLetter"],
  ] as const)("attempts %i of maxAttempts 3 -> %s", (attempts, type) => {
    expect(plan(input({ delivery: { attempts, phase: attempts ? "Retrying" : "Pending" }, subscription: sub })).type).toBe(type);
  });

  it("Exhausted is decided before any endpoint gate (even a Disabled endpoint or an Open breaker)", () => {
    const action = plan(input({ delivery: { attempts: 3 }, subscription: sub, endpoint: { health: disabled(NOW + 1000), breaker: open(NOW + 1000), globalSlot: false } }));
    expect(action).toEqual({ type: "DeadLetter", reason: "Exhausted", message: "all 3 attempts failed" });
  });
});

describe("plan: endpoint needed", () => {
  it("throws when an attempt would be admitted without endpoint state", () => {
    expect(() => plan(input({ endpoint: null }))).toThrow(/endpoint/);
  });
});

describe("plan: endpoint health", () => {
  it("Disabled before nextProbeAt -> WaitUntil disabled at nextProbeAt", () => {
    expect(plan(input({ endpoint: { health: disabled(NOW + 1) } }))).toEqual({ type: "WaitUntil", at: NOW + 1, why: "disabled" });
  });

  it("Disabled waits even when the breaker would DeadLetter (health comes first)", () => {
    expect(plan(input({ subscription: okSub({ circuitBreaker: { whenOpen: "DeadLetter" } }), endpoint: { health: disabled(NOW + 5_000), breaker: open(NOW + 1_000) } }))).toEqual({
      type: "WaitUntil",
      at: NOW + 5_000,
      why: "disabled",
    });
  });

  it.each([
    ["at nextProbeAt", NOW],
    ["after nextProbeAt", NOW - 1],
    ["without a nextProbeAt", undefined],
  ])("Disabled %s -> Attempt probe; the commit moves nextProbeAt one interval on", (_name, nextProbeAt) => {
    const ep = disabled(nextProbeAt);
    const action = plan(input({ endpoint: { health: ep } }));
    expect(action).toEqual({ type: "Attempt", probe: true, commit: { breaker: closed(), health: { ...ep, nextProbeAt: NOW + PROBE_INTERVAL }, bucket: undefined } });
    expect((action as Extract<Action, { type: "Attempt" }>).commit.breakerTransition).toBeUndefined();
  });

  it.each<HealthState["state"]>(["Healthy", "Degraded"])("%s lets the attempt go unprobed", (state) => {
    const h: HealthState = { ...healthy(), state, consecutiveFailures: state === "Degraded" ? 4 : 0 };
    expect(plan(input({ endpoint: { health: h } }))).toEqual({ type: "Attempt", probe: false, commit: { breaker: closed(), health: h, bucket: undefined } });
  });

  it("a Disabled endpoint's probe is also the breaker's probe, whatever its cooldown says", () => {
    const action = plan(input({ endpoint: { health: disabled(NOW), breaker: open(NOW + 50_000) } }));
    expect(action).toMatchObject({ type: "Attempt", probe: true, commit: { breaker: { state: "HalfOpen", probeInFlight: true }, breakerTransition: { from: "Open", to: "HalfOpen" } } });
  });

  it("a Disabled endpoint whose breaker probe is in flight parks", () => {
    expect(plan(input({ endpoint: { health: disabled(NOW), breaker: halfOpen(true) } }))).toEqual({ type: "Park", why: "probe" });
  });
});

describe("plan: circuit breaker", () => {
  const defer = okSub({ circuitBreaker: { whenOpen: "Defer", cooldown: "30s" } });
  const deadLetter = okSub({ circuitBreaker: { whenOpen: "DeadLetter", cooldown: "30s" } });

  it("Open before nextProbeAt, Defer -> WaitUntil breaker at nextProbeAt", () => {
    expect(plan(input({ subscription: defer, endpoint: { breaker: open(NOW + 1) } }))).toEqual({ type: "WaitUntil", at: NOW + 1, why: "breaker" });
  });

  it("Open before nextProbeAt, DeadLetter -> DeadLetter BreakerOpen", () => {
    expect(plan(input({ subscription: deadLetter, endpoint: { breaker: open(NOW + 1) } }))).toEqual({ type: "DeadLetter", reason: "BreakerOpen", message: expect.stringContaining("Open") });
  });

  it("Open without nextProbeAt waits until openedAt + the policy's cooldown", () => {
    expect(plan(input({ subscription: defer, endpoint: { breaker: open(undefined, NOW - 29_999) } }))).toEqual({ type: "WaitUntil", at: NOW + 1, why: "breaker" });
    expect(plan(input({ subscription: defer, endpoint: { breaker: open(undefined, NOW - 30_000) } }))).toMatchObject({ type: "Attempt", probe: true });
  });

  it.each([
    ["Defer", defer],
    ["DeadLetter", deadLetter],
  ])("Open at/after cooldown (%s) -> Attempt probe committing Open -> HalfOpen", (_name, subscription) => {
    for (const nextProbeAt of [NOW, NOW - 1]) {
      const before = open(nextProbeAt);
      const action = plan(input({ subscription, endpoint: { breaker: before } }));
      expect(action).toEqual({
        type: "Attempt",
        probe: true,
        commit: {
          breaker: { state: "HalfOpen", consecutiveFailures: 5, halfOpenSuccesses: 0, openedAt: before.openedAt, probeInFlight: true },
          breakerTransition: { from: "Open", to: "HalfOpen" },
          health: healthy(),
          bucket: undefined,
        },
      });
    }
  });

  it("HalfOpen with the probe in flight, Defer -> Park probe", () => {
    expect(plan(input({ subscription: defer, endpoint: { breaker: halfOpen(true) } }))).toEqual({ type: "Park", why: "probe" });
  });

  it("HalfOpen with the probe in flight, DeadLetter -> DeadLetter BreakerOpen", () => {
    expect(plan(input({ subscription: deadLetter, endpoint: { breaker: halfOpen(true) } }))).toEqual({ type: "DeadLetter", reason: "BreakerOpen", message: expect.stringContaining("HalfOpen") });
  });

  it("HalfOpen without a probe in flight -> Attempt probe, no transition", () => {
    const action = plan(input({ subscription: defer, endpoint: { breaker: halfOpen(false) } }));
    expect(action).toEqual({ type: "Attempt", probe: true, commit: { breaker: halfOpen(true), health: healthy(), bucket: undefined } });
    expect((action as Extract<Action, { type: "Attempt" }>).commit.breakerTransition).toBeUndefined();
  });

  it("Closed with failures below the threshold -> plain Attempt", () => {
    const b: BreakerState = { ...closed(), consecutiveFailures: 4 };
    expect(plan(input({ endpoint: { breaker: b } }))).toEqual({ type: "Attempt", probe: false, commit: { breaker: b, health: healthy(), bucket: undefined } });
  });

  it("the breaker is consulted before the slots: Open waits even with every slot taken", () => {
    expect(plan(input({ subscription: defer, endpoint: { breaker: open(NOW + 9), globalSlot: false, inFlight: 10 } }))).toEqual({ type: "WaitUntil", at: NOW + 9, why: "breaker" });
    expect(plan(input({ subscription: defer, endpoint: { breaker: halfOpen(true), globalSlot: false, inFlight: 10 } }))).toEqual({ type: "Park", why: "probe" });
  });

  it("a granted probe still parks when no slot is free (nothing committed)", () => {
    expect(plan(input({ subscription: defer, endpoint: { breaker: open(NOW), globalSlot: false } }))).toEqual({ type: "Park", why: "global" });
    expect(plan(input({ subscription: defer, endpoint: { breaker: halfOpen(false), inFlight: 10 } }))).toEqual({ type: "Park", why: "endpoint" });
  });
});

describe("plan: slots", () => {
  const sub = okSub({ maxInFlight: 3 });
  const table: Array<[string, Partial<EndpointView>, Action["type"], string | undefined]> = [
    ["a global slot may be taken", { globalSlot: true }, "Attempt", undefined],
    ["no global slot for this namespace (cap or fair share)", { globalSlot: false }, "Park", "global"],
    ["endpoint one below maxInFlight", { inFlight: 2 }, "Attempt", undefined],
    ["endpoint at maxInFlight", { inFlight: 3 }, "Park", "endpoint"],
    ["both full: global first", { inFlight: 3, globalSlot: false }, "Park", "global"],
  ];
  it.each(table)("%s", (_name, ep, type, why) => {
    const action = plan(input({ subscription: sub, endpoint: ep }));
    expect(action.type).toBe(type);
    if (why) expect(action).toEqual({ type: "Park", why });
  });

  it("full slots park before the rate limit is consulted (no token taken)", () => {
    const rate = okSub({ maxInFlight: 1, rateLimit: { perSecond: 1, burst: 1 } });
    expect(plan(input({ subscription: rate, endpoint: { inFlight: 1, bucket: { tokens: 0, updatedAt: NOW } } }))).toEqual({ type: "Park", why: "endpoint" });
  });
});

describe("plan: rate limit", () => {
  it.each([
    // perSecond 2: a token every 500 ms.
    ["empty bucket", { perSecond: 2, burst: 1 }, { tokens: 0, updatedAt: NOW }, NOW + 500],
    ["half a token", { perSecond: 2, burst: 1 }, { tokens: 0.5, updatedAt: NOW }, NOW + 250],
    ["emptied 100 ms ago", { perSecond: 2, burst: 1 }, { tokens: 0, updatedAt: NOW - 100 }, NOW + 400],
    ["10/s, empty", { perSecond: 10, burst: 5 }, { tokens: 0, updatedAt: NOW }, NOW + 100],
  ])("%s -> WaitUntil rate at the exact time", (_name, rateLimit, bucket, at) => {
    expect(plan(input({ subscription: okSub({ rateLimit }), endpoint: { bucket } }))).toEqual({ type: "WaitUntil", at, why: "rate" });
  });

  it("a token available -> Attempt committing the bucket with one token less", () => {
    const action = plan(input({ subscription: okSub({ rateLimit: { perSecond: 2, burst: 4 } }), endpoint: { bucket: { tokens: 2, updatedAt: NOW - 250 } } }));
    // 2 + 0.25 s * 2/s = 2.5, minus one.
    expect(action).toEqual({ type: "Attempt", probe: false, commit: { breaker: closed(), health: healthy(), bucket: { tokens: 1.5, updatedAt: NOW } } });
  });

  it("no bucket yet starts full: burst - 1 left", () => {
    expect(plan(input({ subscription: okSub({ rateLimit: { perSecond: 5, burst: 20 } }) }))).toMatchObject({ type: "Attempt", commit: { bucket: { tokens: 19, updatedAt: NOW } } });
  });

  it("burst defaults to perSecond", () => {
    expect(plan(input({ subscription: okSub({ rateLimit: { perSecond: 3 } }) }))).toMatchObject({ type: "Attempt", commit: { bucket: { tokens: 2, updatedAt: NOW } } });
  });

  it("no rate limit: the bucket passes through unchanged", () => {
    const bucket = { tokens: 0, updatedAt: NOW - 5 };
    expect(plan(input({ endpoint: { bucket } }))).toEqual({ type: "Attempt", probe: false, commit: { breaker: closed(), health: healthy(), bucket } });
  });

  it("a probe waits for a token too, and commits both the transition and the token", () => {
    const sub = okSub({ rateLimit: { perSecond: 1, burst: 1 } });
    expect(plan(input({ subscription: sub, endpoint: { breaker: open(NOW), bucket: { tokens: 0, updatedAt: NOW } } }))).toEqual({ type: "WaitUntil", at: NOW + 1000, why: "rate" });
    expect(plan(input({ subscription: sub, endpoint: { breaker: open(NOW) } }))).toMatchObject({
      type: "Attempt",
      probe: true,
      commit: { breakerTransition: { from: "Open", to: "HalfOpen" }, bucket: { tokens: 0, updatedAt: NOW } },
    });
  });
});

describe("plan: rate limit shared by replicas (stream mode)", () => {
  it("each of R replicas admits from its share: with 2, a burst of 4 lets 2 through here", () => {
    const policy = policyOf({ rateLimit: { perSecond: 4, burst: 4 } });
    let bucket: EndpointView["bucket"];
    const admitted: boolean[] = [];
    for (let i = 0; i < 4; i++) {
      const a = plan(input({ subscription: { kind: "ok", policy }, endpoint: { bucket, replicas: 2 } }));
      admitted.push(a.type === "Attempt");
      if (a.type === "Attempt") bucket = a.commit.bucket;
    }
    expect(admitted).toEqual([true, true, false, false]);
  });
});

describe("plan: precedence, one row per gate with every later gate also failing", () => {
  const everythingWrong = { health: disabled(NOW + 3_000), breaker: open(NOW + 4_000), globalSlot: false, inFlight: 10, bucket: { tokens: 0, updatedAt: NOW } };
  const table: Array<[string, PlanInput, Partial<Action>]> = [
    ["terminal", input({ delivery: { phase: "Succeeded", payloadBytes: MAX_PAYLOAD_BYTES + 1 }, subscription: { kind: "missing" } }), { type: "Nothing" }],
    ["payload", input({ delivery: { payloadBytes: MAX_PAYLOAD_BYTES + 1 }, subscription: { kind: "missing" } }), { type: "Discard", reason: "PayloadTooLarge" }],
    ["missing subscription", input({ subscription: { kind: "missing" }, secret: { kind: "missing", message: "m" } }), { type: "Wait", reason: "SubscriptionNotFound" }],
    ["invalid subscription", input({ subscription: { kind: "invalid", message: "bad" }, secret: { kind: "missing", message: "m" } }), { type: "Wait", reason: "InvalidSubscription" }],
    [
      "event type",
      input({ delivery: { eventType: "x.y", nextAttemptAt: NOW + 1, attempts: 9 }, subscription: okSub({ eventTypes: ["a.b"], paused: true }), secret: { kind: "missing", message: "m" } }),
      { type: "DeadLetter", reason: "EventTypeNotSubscribed" },
    ],
    ["paused", input({ delivery: { nextAttemptAt: NOW + 1, attempts: 9 }, subscription: okSub({ paused: true }), secret: { kind: "missing", message: "m" } }), { type: "Wait", reason: "Paused" }],
    ["secret", input({ delivery: { nextAttemptAt: NOW + 1, attempts: 9 }, secret: { kind: "missing", message: "m" } }), { type: "Wait", reason: "SecretNotFound" }],
    ["backoff", input({ delivery: { nextAttemptAt: NOW + 2_000, attempts: 9 }, endpoint: everythingWrong }), { type: "WaitUntil", at: NOW + 2_000, why: "backoff" }],
    ["exhausted", input({ delivery: { attempts: 6 }, endpoint: everythingWrong }), { type: "DeadLetter", reason: "Exhausted" }],
    ["health", input({ endpoint: everythingWrong }), { type: "WaitUntil", at: NOW + 3_000, why: "disabled" }],
    ["breaker", input({ endpoint: { ...everythingWrong, health: healthy() } }), { type: "WaitUntil", at: NOW + 4_000, why: "breaker" }],
    ["global", input({ endpoint: { ...everythingWrong, health: healthy(), breaker: closed() } }), { type: "Park", why: "global" }],
    ["endpoint", input({ subscription: okSub({ rateLimit: { perSecond: 1 } }), endpoint: { ...everythingWrong, health: healthy(), breaker: closed(), globalSlot: true } }), { type: "Park", why: "endpoint" }],
    ["rate", input({ subscription: okSub({ rateLimit: { perSecond: 1 } }), endpoint: { ...everythingWrong, health: healthy(), breaker: closed(), globalSlot: true, inFlight: 0 } }), { type: "WaitUntil", at: NOW + 1_000, why: "rate" }],
  ];
  it.each(table)("%s wins", (_name, planInput, expected) => {
    expect(plan(planInput)).toMatchObject(expected);
  });
});

describe("plan: purity", () => {
  it("does not mutate its input and answers the same twice", () => {
    const planInput = input({ subscription: okSub({ rateLimit: { perSecond: 2, burst: 2 } }), endpoint: { breaker: open(NOW), health: disabled(NOW), bucket: { tokens: 1, updatedAt: NOW - 100 } } });
    const before = structuredClone(planInput);
    const first = plan(planInput);
    expect(planInput).toEqual(before);
    expect(plan(planInput)).toEqual(first);
    // The committed states are new objects, not the caller's.
    const commit = (first as Extract<Action, { type: "Attempt" }>).commit;
    expect(commit.breaker).not.toBe(planInput.endpoint!.breaker);
    expect(commit.health).not.toBe(planInput.endpoint!.health);
  });
});
