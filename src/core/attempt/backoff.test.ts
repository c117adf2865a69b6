import { describe, it, expect } from "vitest";
import { RETRY_AFTER_CAP_MS, backoffDelay, nextDelay, type BackoffPolicy } from "./backoff.js";

const contractDefault: BackoffPolicy = { initialBackoffMs: 1_000, multiplier: 2, maxBackoffMs: 30_000, jitterPercent: 10 };
const noJitter: BackoffPolicy = { ...contractDefault, jitterPercent: 0 };
const mid = () => 0.5; // 2 * 0.5 - 1 = 0: no jitter
const low = () => 0; // -100% of the jitter spread
const high = () => 0.999999; // just under +100% of the spread

describe("backoffDelay", () => {
  const table: Array<[string, number, BackoffPolicy, () => number, number]> = [
    ["1st failure waits initialBackoff", 1, noJitter, mid, 1_000],
    ["2nd failure doubles", 2, noJitter, mid, 2_000],
    ["3rd failure", 3, noJitter, mid, 4_000],
    ["5th failure", 5, noJitter, mid, 16_000],
    ["6th failure hits the cap", 6, noJitter, mid, 30_000],
    ["7th failure stays at the cap", 7, noJitter, mid, 30_000],
    ["huge count does not overflow", 10_000, noJitter, mid, 30_000],
    ["Infinity count is the cap", Number.POSITIVE_INFINITY, noJitter, mid, 30_000],
    ["MAX_SAFE_INTEGER count is the cap", Number.MAX_SAFE_INTEGER, contractDefault, mid, 30_000],
    ["0 is treated as 1", 0, noJitter, mid, 1_000],
    ["negative is treated as 1", -3, noJitter, mid, 1_000],
    ["NaN is treated as 1", Number.NaN, noJitter, mid, 1_000],
    ["fractional count is floored", 2.9, noJitter, mid, 2_000],
    ["multiplier 1 is constant", 40, { ...noJitter, multiplier: 1 }, mid, 1_000],
    ["multiplier 1 with an infinite count is constant", Number.POSITIVE_INFINITY, { ...noJitter, multiplier: 1 }, mid, 1_000],
    ["multiplier 10", 3, { ...noJitter, multiplier: 10, maxBackoffMs: 1_000_000 }, mid, 100_000],
    ["initial above max is clamped", 1, { ...noJitter, initialBackoffMs: 60_000 }, mid, 30_000],
    ["zero initial is zero", 5, { ...noJitter, initialBackoffMs: 0 }, high, 0],
    ["jitter -10% at the lowest random", 1, contractDefault, low, 900],
    ["jitter ~+10% at the highest random", 1, contractDefault, high, 1_100],
    ["jitter 0 at random 0.5", 3, contractDefault, mid, 4_000],
    ["jitter +5% at random 0.75", 2, contractDefault, () => 0.75, 2_100],
    ["jitter at the cap cannot exceed the cap", 10, contractDefault, high, 30_000],
    ["jitter at the cap may go below it", 10, contractDefault, low, 27_000],
    ["100% jitter reaches 0", 1, { ...contractDefault, jitterPercent: 100 }, low, 0],
    ["100% jitter reaches 2x", 1, { ...contractDefault, jitterPercent: 100 }, high, 2_000],
    ["jitter above 100% is treated as 100%", 1, { ...contractDefault, jitterPercent: 500 }, low, 0],
    ["rounded to whole ms", 1, { ...contractDefault, initialBackoffMs: 333, jitterPercent: 10 }, () => 0.6, 340],
    ["sub-second policy", 4, { initialBackoffMs: 100, multiplier: 3, maxBackoffMs: 60_000, jitterPercent: 0 }, mid, 2_700],
  ];

  it.each(table)("%s", (_name, failures, policy, random, expected) => {
    expect(backoffDelay(failures, policy, random)).toBe(expected);
  });

  it("stays inside [base*(1-j), base*(1+j)] ∩ [0, max] and is an integer for any random", () => {
    for (let failures = 1; failures <= 12; failures++) {
      const base = Math.min(1_000 * 2 ** (failures - 1), 30_000);
      for (let r = 0; r < 1; r += 0.01) {
        const d = backoffDelay(failures, contractDefault, () => r);
        expect(Number.isInteger(d)).toBe(true);
        expect(d).toBeGreaterThanOrEqual(Math.round(base * 0.9));
        expect(d).toBeLessThanOrEqual(Math.min(Math.round(base * 1.1), 30_000));
      }
    }
  });

  it("calls random once per delay", () => {
    let calls = 0;
    backoffDelay(3, contractDefault, () => {
      calls++;
      return 0.5;
    });
    expect(calls).toBe(1);
  });
});

describe("nextDelay", () => {
  const table: Array<[string, number, BackoffPolicy, number | undefined, number]> = [
    ["no Retry-After: the backoff", 2, noJitter, undefined, 2_000],
    ["Retry-After longer than the backoff wins", 2, noJitter, 10_000, 10_000],
    ["Retry-After shorter than the backoff loses", 3, noJitter, 1_000, 4_000],
    ["Retry-After 0 keeps the backoff", 1, noJitter, 0, 1_000],
    ["negative Retry-After is ignored", 1, noJitter, -5_000, 1_000],
    ["NaN Retry-After is ignored", 1, noJitter, Number.NaN, 1_000],
    ["Retry-After above 1h is capped at 1h", 1, noJitter, 7_200_000, RETRY_AFTER_CAP_MS],
    ["Infinity Retry-After is ignored", 1, noJitter, Number.POSITIVE_INFINITY, 1_000],
    ["exactly 1h", 1, noJitter, 3_600_000, 3_600_000],
    ["a maxBackoff above 1h still applies", 1, { ...noJitter, initialBackoffMs: 7_200_000, maxBackoffMs: 7_200_000 }, 60_000, 7_200_000],
    ["fractional Retry-After is rounded", 1, noJitter, 1_500.6, 1_501],
  ];

  it.each(table)("%s", (_name, failures, policy, retryAfter, expected) => {
    expect(nextDelay(failures, policy, mid, retryAfter)).toBe(expected);
  });

  it("applies jitter to the backoff side", () => {
    expect(nextDelay(1, contractDefault, low, 500)).toBe(900);
    expect(nextDelay(1, contractDefault, low, 950)).toBe(950);
  });
});
