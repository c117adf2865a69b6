// Properties of the retry delay (contract: initialBackoff * multiplier^(n-1), jitter ±j% of that,
// never above maxBackoff, never negative). How jitter and the cap combine, as the code does it:
// the base is capped first (base = min(initial * m^(n-1), max)), jitter is applied to the capped
// base, and the jittered value is clamped to [0, max] again. So at the cap jitter only pulls the
// delay down, and a delay is never above maxBackoff whatever the jitter.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { RETRY_AFTER_CAP_MS, backoffDelay, nextDelay, type BackoffPolicy } from "./backoff.js";

// The API's ranges: initialBackoff 10ms..1h, maxBackoff 10ms..24h (>= initialBackoff by a CEL
// rule), multiplier integer 1..10, jitterPercent integer 0..100.
const policyArb: fc.Arbitrary<BackoffPolicy> = fc
  .record({
    initialBackoffMs: fc.integer({ min: 10, max: 3_600_000 }),
    maxBackoffMs: fc.integer({ min: 10, max: 86_400_000 }),
    multiplier: fc.integer({ min: 1, max: 10 }),
    jitterPercent: fc.integer({ min: 0, max: 100 }),
  })
  .map((p) => ({ ...p, maxBackoffMs: Math.max(p.maxBackoffMs, p.initialBackoffMs) }));
/** Any policy the code may see, including what the API refuses (robustness). */
const loosePolicyArb: fc.Arbitrary<BackoffPolicy> = fc.record({
  initialBackoffMs: fc.integer({ min: -1_000, max: 100_000_000 }),
  maxBackoffMs: fc.integer({ min: -1_000, max: 100_000_000 }),
  multiplier: fc.integer({ min: -2, max: 10 }),
  jitterPercent: fc.integer({ min: -50, max: 500 }),
});
const attemptArb = fc.integer({ min: 1, max: 80 });
/** A value Math.random can return: [0, 1). */
const randomArb = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true });
const noJitter = (p: BackoffPolicy): BackoffPolicy => ({ ...p, jitterPercent: 0 });

/** The contract's formula without jitter, computed independently of the code (BigInt: exact). */
function expectedBase(n: number, p: BackoffPolicy): number {
  const exact = BigInt(p.initialBackoffMs) * BigInt(p.multiplier) ** BigInt(n - 1);
  return exact > BigInt(p.maxBackoffMs) ? p.maxBackoffMs : Number(exact);
}

describe("backoffDelay (properties)", () => {
  it("without jitter is exactly min(initial * multiplier^(n-1), max)", () => {
    fc.assert(
      fc.property(policyArb, attemptArb, randomArb, (p, n, r) => {
        expect(backoffDelay(n, noJitter(p), () => r)).toBe(expectedBase(n, p));
      }),
    );
  });

  it("with jitter stays within ±jitterPercent% of the capped base, inside [0, max], in whole ms", () => {
    fc.assert(
      fc.property(policyArb, attemptArb, randomArb, (p, n, r) => {
        const d = backoffDelay(n, p, () => r);
        const base = expectedBase(n, p);
        const spread = (base * p.jitterPercent) / 100;
        expect(Number.isInteger(d)).toBe(true);
        expect(d).toBeGreaterThanOrEqual(0);
        expect(d).toBeLessThanOrEqual(p.maxBackoffMs);
        expect(d).toBeGreaterThanOrEqual(Math.floor(base - spread));
        expect(d).toBeLessThanOrEqual(Math.ceil(base + spread));
      }),
    );
  });

  it("at the cap, jitter never raises the delay above maxBackoff and random 0 takes the full spread down", () => {
    fc.assert(
      fc.property(policyArb, (p) => {
        const n = 200; // far past the cap for every multiplier > 1
        const m = { ...p, multiplier: Math.max(2, p.multiplier) };
        expect(backoffDelay(n, m, () => 0.999_999_999)).toBeLessThanOrEqual(m.maxBackoffMs);
        expect(backoffDelay(n, m, () => 0)).toBe(Math.round(m.maxBackoffMs - (m.maxBackoffMs * m.jitterPercent) / 100));
      }),
    );
  });

  it("is monotone non-decreasing in the attempt number without jitter, and for any one fixed random value", () => {
    fc.assert(
      fc.property(policyArb, attemptArb, randomArb, (p, n, r) => {
        expect(backoffDelay(n + 1, noJitter(p), () => r)).toBeGreaterThanOrEqual(backoffDelay(n, noJitter(p), () => r));
        expect(backoffDelay(n + 1, p, () => r)).toBeGreaterThanOrEqual(backoffDelay(n, p, () => r));
      }),
    );
  });

  it("multiplier 1 is a constant delay", () => {
    fc.assert(
      fc.property(policyArb, attemptArb, (p, n) => {
        const flat = { ...noJitter(p), multiplier: 1 };
        expect(backoffDelay(n, flat, () => 0.5)).toBe(Math.min(p.initialBackoffMs, p.maxBackoffMs));
      }),
    );
  });

  it("never negative, never above max(0, maxBackoff), never NaN, for any policy, count and random (even out of range)", () => {
    fc.assert(
      fc.property(
        loosePolicyArb,
        fc.oneof(fc.integer({ min: -10, max: 10_000 }), fc.double()),
        fc.double({ min: -2, max: 3, noNaN: true }),
        (p, n, r) => {
          const d = backoffDelay(n, p, () => r);
          expect(Number.isInteger(d)).toBe(true);
          expect(d).toBeGreaterThanOrEqual(0);
          expect(d).toBeLessThanOrEqual(Math.max(0, p.maxBackoffMs));
        },
      ),
    );
  });
});

describe("nextDelay (properties)", () => {
  it("is never shorter than the backoff, and a Retry-After counts for at most one hour", () => {
    fc.assert(
      fc.property(policyArb, attemptArb, randomArb, fc.integer({ min: 1, max: 10 * RETRY_AFTER_CAP_MS }), (p, n, r, retryAfter) => {
        const backoff = backoffDelay(n, p, () => r);
        const d = nextDelay(n, p, () => r, retryAfter);
        expect(d).toBeGreaterThanOrEqual(backoff);
        expect(d).toBe(Math.max(backoff, Math.min(retryAfter, RETRY_AFTER_CAP_MS)));
        expect(d).toBeLessThanOrEqual(Math.max(backoff, RETRY_AFTER_CAP_MS));
      }),
    );
  });

  it("ignores garbage Retry-After values (absent, zero, negative, NaN, infinite)", () => {
    const garbage = fc.oneof(
      fc.constant(undefined),
      fc.constantFrom(0, -0, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY),
      fc.double({ max: 0, noNaN: true }),
    );
    fc.assert(
      fc.property(policyArb, attemptArb, randomArb, garbage, (p, n, r, retryAfter) => {
        expect(nextDelay(n, p, () => r, retryAfter)).toBe(backoffDelay(n, p, () => r));
      }),
    );
  });
});
