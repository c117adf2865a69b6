// Properties of the token bucket: over any sequence of takes at non-decreasing times, the takes
// that succeed inside any window of length T number at most burst + perSecond * T; the token
// count is never negative nor above burst; retryInMs is exact: a take at now + retryInMs
// succeeds, and one 1 ms earlier does not.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { take, type RateLimit, type TokenBucket } from "./token-bucket.js";

const T0 = 1_750_000_000_000;
// The API's ranges are integers 1..10000; the code also takes fractional rates.
const cfgArb: fc.Arbitrary<RateLimit> = fc.record({
  perSecond: fc.oneof(fc.integer({ min: 1, max: 10_000 }), fc.double({ min: 0.01, max: 10_000, noNaN: true })),
  burst: fc.integer({ min: 1, max: 10_000 }),
});
const smallCfgArb: fc.Arbitrary<RateLimit> = fc.record({
  perSecond: fc.oneof(fc.integer({ min: 1, max: 50 }), fc.double({ min: 0.1, max: 50, noNaN: true })),
  burst: fc.integer({ min: 1, max: 5 }),
});
const gapsArb = fc.array(fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 3, arbitrary: fc.integer({ min: 0, max: 50 }) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 5_000 }) }), {
  minLength: 1,
  maxLength: 200,
  size: "max",
});
const startArb = fc.option(fc.record({ tokens: fc.double({ min: 0, max: 1, noNaN: true }), ageMs: fc.nat(10_000) }), { nil: undefined });

function startBucket(start: { tokens: number; ageMs: number } | undefined, cfg: RateLimit): TokenBucket | undefined {
  return start === undefined ? undefined : { tokens: start.tokens * cfg.burst, updatedAt: T0 - start.ageMs };
}

describe("take (properties)", () => {
  it("in any window of length T, at most burst + perSecond * T takes succeed; tokens stay in [0, burst]", () => {
    fc.assert(
      fc.property(smallCfgArb, gapsArb, (cfg, gaps) => {
        let bucket: TokenBucket | undefined;
        let t = T0;
        const granted: number[] = [];
        for (const gap of gaps) {
          t += gap;
          const r = take(bucket, t, cfg);
          bucket = r.bucket;
          if (!(bucket.tokens >= 0 && bucket.tokens <= cfg.burst)) expect.fail(`tokens ${bucket.tokens} outside [0, ${cfg.burst}] at +${t - T0} ms`);
          if (r.ok) granted.push(t);
        }
        // Every window that starts and ends on a granted take (the tightest ones); the worst
        // one is reported.
        let worst: { takes: number; windowMs: number; allowed: number } | undefined;
        for (let i = 0; i < granted.length; i++) {
          for (let j = i; j < granted.length; j++) {
            const windowMs = granted[j]! - granted[i]!;
            const allowed = cfg.burst + (cfg.perSecond * windowMs) / 1_000 + 1e-6;
            if (j - i + 1 > allowed && (worst === undefined || j - i + 1 - allowed > worst.takes - worst.allowed)) worst = { takes: j - i + 1, windowMs, allowed };
          }
        }
        expect(worst).toBeUndefined();
      }),
      { numRuns: 200 },
    );
  });

  it("a take at now + retryInMs succeeds, and one 1 ms earlier does not", () => {
    fc.assert(
      fc.property(cfgArb, fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), fc.integer({ min: 0, max: 1_000 }), (cfg, tokens, sinceUpdate) => {
        const bucket: TokenBucket = { tokens, updatedAt: T0 - sinceUpdate };
        const r = take(bucket, T0, cfg);
        if (r.ok) return; // the refill since updatedAt already made a whole token
        expect(r.retryInMs).toBeGreaterThanOrEqual(1);
        expect(Number.isInteger(r.retryInMs)).toBe(true);
        expect(take(r.bucket, T0 + r.retryInMs, cfg).ok).toBe(true);
        if (r.retryInMs > 1) expect(take(r.bucket, T0 + r.retryInMs - 1, cfg).ok).toBe(false);
      }),
    );
  });

  it("a caller that always comes back at now + retryInMs is served every time", () => {
    fc.assert(
      fc.property(cfgArb, startArb, fc.integer({ min: 1, max: 100 }), (cfg, start, n) => {
        let bucket = startBucket(start, cfg);
        let t = T0;
        for (let i = 0; i < n; i++) {
          const r = take(bucket, t, cfg);
          bucket = r.bucket;
          if (r.ok) continue;
          const retry = take(bucket, t + r.retryInMs, cfg);
          expect(retry.ok).toBe(true);
          bucket = retry.bucket;
          t += r.retryInMs;
        }
      }),
    );
  });

  it("a clock stepping back never refills, and nothing is mutated", () => {
    fc.assert(
      fc.property(cfgArb, fc.double({ min: 0, max: 1, noNaN: true }), fc.integer({ min: 1, max: 1_000_000 }), (cfg, fraction, back) => {
        const bucket: TokenBucket = { tokens: fraction * cfg.burst, updatedAt: T0 };
        const before = { ...bucket };
        const r = take(bucket, T0 - back, cfg);
        expect(bucket).toEqual(before);
        expect(r.bucket.updatedAt).toBe(T0);
        expect(r.bucket.tokens).toBeLessThanOrEqual(bucket.tokens);
      }),
    );
  });
});
