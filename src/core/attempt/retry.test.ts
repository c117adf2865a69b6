import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { backoffDelay, RETRY_AFTER_CAP_MS } from "./backoff.js";
import { attemptsLeft, retryDecision, type RetryPolicy } from "./retry.js";

const NOW = Date.UTC(2026, 11, 1, 12, 0, 0);
const policy: RetryPolicy = { maxAttempts: 4, initialBackoffMs: 1_000, multiplier: 2, maxBackoffMs: 30_000, jitterPercent: 0, respectRetryAfter: true };
const half = () => 0.5;

describe("retryDecision", () => {
  it.each([
    [1, 1_000],
    [2, 2_000],
    [3, 4_000],
  ])("after %i failed attempts of 4 waits %i ms", (attempts, delay) => {
    expect(retryDecision(policy, attempts, {}, NOW, half)).toEqual({ kind: "retry", delayMs: delay, at: NOW + delay });
  });

  it("is exhausted once maxAttempts attempts were made", () => {
    expect(retryDecision(policy, 4, { responseStatus: 503, retryAfter: "1" }, NOW, half)).toEqual({ kind: "exhausted" });
    expect(attemptsLeft(policy, 3)).toBe(true);
    expect(attemptsLeft(policy, 4)).toBe(false);
  });

  it("honours Retry-After on 429 and 503 only, never below the backoff", () => {
    expect(retryDecision(policy, 1, { responseStatus: 503, retryAfter: "120" }, NOW, half)).toMatchObject({ delayMs: 120_000 });
    expect(retryDecision(policy, 1, { responseStatus: 429, retryAfter: "120" }, NOW, half)).toMatchObject({ delayMs: 120_000 });
    expect(retryDecision(policy, 1, { responseStatus: 500, retryAfter: "120" }, NOW, half)).toMatchObject({ delayMs: 1_000 });
    expect(retryDecision(policy, 3, { responseStatus: 503, retryAfter: "1" }, NOW, half)).toMatchObject({ delayMs: 4_000 });
  });

  it("ignores Retry-After when the subscription says respectRetryAfter: false", () => {
    expect(retryDecision({ ...policy, respectRetryAfter: false }, 1, { responseStatus: 503, retryAfter: "120" }, NOW, half)).toMatchObject({ delayMs: 1_000 });
  });

  it("property: exhausted exactly at maxAttempts; otherwise between the backoff and the Retry-After cap", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 0, max: 60 }),
        fc.option(fc.integer({ min: 0, max: 100_000 }), { nil: undefined }),
        fc.constantFrom(200, 429, 500, 503),
        fc.double({ min: 0, max: 0.999, noNaN: true }),
        (maxAttempts, attempts, retryAfterSeconds, status, r) => {
          const p = { ...policy, maxAttempts, jitterPercent: 20 };
          const d = retryDecision(p, attempts, { responseStatus: status, ...(retryAfterSeconds !== undefined ? { retryAfter: String(retryAfterSeconds) } : {}) }, NOW, () => r);
          if (attempts >= maxAttempts) return d.kind === "exhausted";
          if (d.kind !== "retry") return false;
          const backoff = backoffDelay(attempts, p, () => r);
          return d.at === NOW + d.delayMs && d.delayMs >= backoff && d.delayMs <= Math.max(backoff, RETRY_AFTER_CAP_MS);
        },
      ),
    );
  });
});
