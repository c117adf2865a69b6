import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ADVICE_REASONS, adviceCondition, cooldownAdvice, largestRetryDelayMs, type RetrySchedule } from "./advice.js";
import { backoffDelay } from "./attempt/backoff.js";

/** The schema's default retry: 6 attempts, 1s doubling, capped at 30s, jitter 10%. */
const DEFAULT_RETRY: RetrySchedule = { maxAttempts: 6, initialBackoffMs: 1_000, multiplier: 2, maxBackoffMs: 30_000, jitterPercent: 10 };

describe("largestRetryDelayMs", () => {
  it.each<[string, Partial<RetrySchedule>, number]>([
    ["the default: 1, 2, 4, 8, 16 s, the last at +10% jitter (maxBackoff 30s is never reached)", {}, 17_600],
    ["no jitter", { jitterPercent: 0 }, 16_000],
    ["more attempts: capped at maxBackoff, jitter included", { maxAttempts: 10 }, 30_000],
    ["capped by maxBackoffMs", { maxBackoffMs: 5_000 }, 5_000],
    ["one attempt: no retry, no delay", { maxAttempts: 1 }, 0],
    ["two attempts: only the first delay", { maxAttempts: 2 }, 1_100],
    ["multiplier 1: every delay the same", { multiplier: 1, maxAttempts: 50 }, 1_100],
    ["jitter 100%: up to twice the base", { jitterPercent: 100, maxAttempts: 3 }, 4_000],
    ["multiplier 10, 50 attempts: no overflow, capped", { multiplier: 10, maxAttempts: 50, maxBackoffMs: 86_400_000 }, 86_400_000],
  ])("%s", (_name, override, expected) => {
    expect(largestRetryDelayMs({ ...DEFAULT_RETRY, ...override })).toBe(expected);
  });

  it("is the largest delay the engine can pick, for any schedule and any randomness", () => {
    const schedule = fc.record({
      maxAttempts: fc.integer({ min: 1, max: 50 }),
      initialBackoffMs: fc.integer({ min: 10, max: 3_600_000 }),
      multiplier: fc.integer({ min: 1, max: 10 }),
      maxBackoffMs: fc.integer({ min: 10, max: 86_400_000 }),
      jitterPercent: fc.integer({ min: 0, max: 100 }),
    });
    fc.assert(
      fc.property(schedule, fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (r, random) => {
        const largest = largestRetryDelayMs(r);
        let seen = 0;
        for (let failures = 1; failures < r.maxAttempts; failures++) {
          const delay = backoffDelay(failures, r, () => random);
          expect(delay).toBeLessThanOrEqual(largest);
          seen = Math.max(seen, backoffDelay(failures, r, () => 1));
        }
        // Reached: the top of the jitter band of the last delay.
        expect(largest).toBe(seen);
      }),
    );
  });
});

describe("cooldownAdvice", () => {
  it("none with the defaults (60s cooldown, 17.6s largest delay) and at exactly the largest delay", () => {
    expect(cooldownAdvice({ cooldownMs: 60_000, cooldownFrom: "default", retry: DEFAULT_RETRY })).toBeUndefined();
    expect(cooldownAdvice({ cooldownMs: 17_600, cooldownFrom: "spec", retry: DEFAULT_RETRY })).toBeUndefined();
    expect(cooldownAdvice({ cooldownMs: 1_000, cooldownFrom: "spec", retry: { ...DEFAULT_RETRY, maxAttempts: 1 } })).toBeUndefined();
  });

  it("a cooldown of the subscription's own, shorter by 1ms: names the field, both numbers and the fix", () => {
    const a = cooldownAdvice({ cooldownMs: 17_599, cooldownFrom: "spec", retry: DEFAULT_RETRY })!;
    expect(a).toMatchObject({ reason: ADVICE_REASONS.cooldown, cooldownMs: 17_599, largestDelayMs: 17_600 });
    expect(a.message).toBe(
      "circuitBreaker.cooldown 17.599s is shorter than the largest retry delay, 17.6s (6 attempts, delays from 1s times 2, capped at 30s, jitter 10%): " +
        "an open breaker would probe sooner than the retries wait, and a probe into the same outage opens it again at once; " +
        "set circuitBreaker.cooldown to at least 17.6s, or lower retry.maxBackoff",
    );
  });

  it("the operator default: says it comes from WEBHOOK_CB_TIMEOUT_MS", () => {
    const a = cooldownAdvice({ cooldownMs: 10_000, cooldownFrom: "default", retry: { ...DEFAULT_RETRY, maxAttempts: 10, jitterPercent: 0, multiplier: 1 } });
    expect(a).toBeUndefined();
    const b = cooldownAdvice({ cooldownMs: 10_000, cooldownFrom: "default", retry: { ...DEFAULT_RETRY, maxAttempts: 10, jitterPercent: 0 } })!;
    expect(b.largestDelayMs).toBe(30_000);
    expect(b.message).toContain("the breaker cooldown (WEBHOOK_CB_TIMEOUT_MS, 10s: the subscription sets no circuitBreaker.cooldown)");
    expect(b.message).toContain("delays from 1s times 2, capped at 30s):");
    expect(b.message).toContain("set circuitBreaker.cooldown (or WEBHOOK_CB_TIMEOUT_MS) to at least 30s");
  });

  it("is given exactly when the cooldown is below the largest delay", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1_000, max: 300_000 }), fc.integer({ min: 1, max: 50 }), fc.integer({ min: 10, max: 3_600_000 }), fc.integer({ min: 1, max: 10 }), fc.integer({ min: 0, max: 100 }), (cooldownMs, maxAttempts, initialBackoffMs, multiplier, jitterPercent) => {
        const retry = { maxAttempts, initialBackoffMs, multiplier, maxBackoffMs: 86_400_000, jitterPercent };
        const a = cooldownAdvice({ cooldownMs, cooldownFrom: "spec", retry });
        expect(a !== undefined).toBe(cooldownMs < largestRetryDelayMs(retry));
      }),
    );
  });
});

describe("adviceCondition", () => {
  const policy = (cooldownMs: number) => ({ breaker: { failureThreshold: 5, successThreshold: 1, cooldownMs, whenOpen: "Defer" as const }, retry: { ...DEFAULT_RETRY, respectRetryAfter: true } }) as unknown as Parameters<typeof adviceCondition>[0];

  it.each<[string, Parameters<typeof adviceCondition>[0], boolean, { status: string; reason: string; message?: RegExp }]>([
    ["advice: True, CooldownShorterThanBackoff, the subscription's own cooldown", policy(5_000), true, { status: "True", reason: "CooldownShorterThanBackoff", message: /^circuitBreaker\.cooldown 5s is shorter than the largest retry delay, 17\.6s/ }],
    ["advice: the operator default", policy(5_000), false, { status: "True", reason: "CooldownShorterThanBackoff", message: /WEBHOOK_CB_TIMEOUT_MS, 5s/ }],
    ["no advice: False, NoAdvice", policy(60_000), true, { status: "False", reason: "NoAdvice" }],
    ["no policy (the spec cannot be read): Unknown", undefined, false, { status: "Unknown", reason: "InvalidSpec" }],
  ])("%s", (_name, p, fromSpec, expected) => {
    const c = adviceCondition(p, fromSpec);
    expect(c.type).toBe("ConfigurationAdvice");
    expect(c).toMatchObject({ status: expected.status, reason: expected.reason });
    if (expected.message) expect(c.message).toMatch(expected.message);
  });
});

describe("adviceCondition: spec.ordering", () => {
  const base = { breaker: { failureThreshold: 5, successThreshold: 1, cooldownMs: 60_000, whenOpen: "Defer" as const }, retry: { ...DEFAULT_RETRY, respectRetryAfter: true } };
  const ordered = (cooldownMs: number) => ({ ...base, breaker: { ...base.breaker, cooldownMs }, ordering: { key: "$.customer.id", parsed: {} } }) as unknown as Parameters<typeof adviceCondition>[0];

  it("is no advice of its own (stream mode orders published events too): only the cooldown's advice applies", () => {
    expect(adviceCondition(ordered(60_000), false)).toMatchObject({ status: "False", reason: "NoAdvice" });
    const c = adviceCondition(ordered(5_000), true);
    expect(c).toMatchObject({ status: "True", reason: ADVICE_REASONS.cooldown });
    expect(c.message).not.toMatch(/ordering/);
  });
});
