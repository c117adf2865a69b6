import { describe, it, expect } from "vitest";
import { fullBucket, share, take, type RateLimit, type TakeResult, type TokenBucket } from "./token-bucket.js";

const t0 = 1_000_000;

describe("take", () => {
  const table: Array<[string, TokenBucket | undefined, number, RateLimit, TakeResult]> = [
    ["a new bucket starts full and takes one", undefined, t0, { perSecond: 1, burst: 5 }, { ok: true, bucket: { tokens: 4, updatedAt: t0 } }],
    ["burst 1 takes its only token", undefined, t0, { perSecond: 1, burst: 1 }, { ok: true, bucket: { tokens: 0, updatedAt: t0 } }],
    ["empty, no time passed: wait a full token", { tokens: 0, updatedAt: t0 }, t0, { perSecond: 1, burst: 5 }, { ok: false, bucket: { tokens: 0, updatedAt: t0 }, retryInMs: 1_000 }],
    ["empty at 50/s: 20 ms", { tokens: 0, updatedAt: t0 }, t0, { perSecond: 50, burst: 100 }, { ok: false, bucket: { tokens: 0, updatedAt: t0 }, retryInMs: 20 }],
    ["half a token at 1/s: 500 ms", { tokens: 0.5, updatedAt: t0 }, t0, { perSecond: 1, burst: 5 }, { ok: false, bucket: { tokens: 0.5, updatedAt: t0 }, retryInMs: 500 }],
    ["refill after 250 ms at 2/s", { tokens: 0.25, updatedAt: t0 }, t0 + 250, { perSecond: 2, burst: 5 }, { ok: false, bucket: { tokens: 0.75, updatedAt: t0 + 250 }, retryInMs: 125 }],
    ["refilled exactly one token", { tokens: 0, updatedAt: t0 }, t0 + 1_000, { perSecond: 1, burst: 5 }, { ok: true, bucket: { tokens: 0, updatedAt: t0 + 1_000 } }],
    ["refill is capped at burst", { tokens: 0, updatedAt: t0 }, t0 + 3_600_000, { perSecond: 10, burst: 3 }, { ok: true, bucket: { tokens: 2, updatedAt: t0 + 3_600_000 } }],
    ["a lowered burst caps stored tokens", { tokens: 50, updatedAt: t0 }, t0, { perSecond: 10, burst: 3 }, { ok: true, bucket: { tokens: 2, updatedAt: t0 } }],
    ["a clock stepping back refills nothing", { tokens: 0.5, updatedAt: t0 }, t0 - 10_000, { perSecond: 1, burst: 5 }, { ok: false, bucket: { tokens: 0.5, updatedAt: t0 }, retryInMs: 500 }],
    ["sub-ms refill time rounds up to 1 ms", { tokens: 0, updatedAt: t0 }, t0, { perSecond: 1_000_000, burst: 1 }, { ok: false, bucket: { tokens: 0, updatedAt: t0 }, retryInMs: 1 }],
    ["fractional rate: 0.5/s", { tokens: 0, updatedAt: t0 }, t0, { perSecond: 0.5, burst: 1 }, { ok: false, bucket: { tokens: 0, updatedAt: t0 }, retryInMs: 2_000 }],
  ];

  it.each(table)("%s", (_name, bucket, now, cfg, expected) => {
    const result = take(bucket, now, cfg);
    expect(result.ok).toBe(expected.ok);
    expect(result.bucket.updatedAt).toBe(expected.bucket.updatedAt);
    expect(result.bucket.tokens).toBeCloseTo(expected.bucket.tokens, 9);
    if (!expected.ok) expect(result).toHaveProperty("retryInMs", expected.retryInMs);
  });

  it("lets exactly burst requests through at once, then paces at perSecond", () => {
    const cfg = { perSecond: 5, burst: 3 };
    let bucket: TokenBucket | undefined;
    const outcomes: boolean[] = [];
    for (let i = 0; i < 5; i++) {
      const r = take(bucket, t0, cfg);
      outcomes.push(r.ok);
      bucket = r.bucket;
    }
    expect(outcomes).toEqual([true, true, true, false, false]);
    const r = take(bucket, t0, cfg);
    expect(r).toMatchObject({ ok: false, retryInMs: 200 });
    expect(take(bucket, t0 + 199, cfg).ok).toBe(false);
    expect(take(bucket, t0 + 200, cfg).ok).toBe(true);
  });

  it.each([
    [1, 1],
    [3, 10],
    [7, 7],
    [50, 100],
    [0.3, 1],
    [33, 2],
    [1_000, 5],
    [999.9, 1],
  ])("at %d/s (burst %d) a take at now + retryInMs succeeds and one ms earlier does not", (perSecond, burst) => {
    const cfg = { perSecond, burst };
    let bucket: TokenBucket = fullBucket(t0, cfg);
    let now = t0;
    for (let i = 0; i < 50; i++) {
      const r = take(bucket, now, cfg);
      bucket = r.bucket;
      if (r.ok) continue;
      if (r.retryInMs > 1) expect(take(bucket, now + r.retryInMs - 1, cfg).ok).toBe(false);
      const later = take(bucket, now + r.retryInMs, cfg);
      expect(later.ok).toBe(true);
      bucket = later.bucket;
      now += r.retryInMs;
    }
  });

  it("does not mutate its input", () => {
    const bucket = { tokens: 2, updatedAt: t0 };
    take(bucket, t0 + 500, { perSecond: 1, burst: 5 });
    expect(bucket).toEqual({ tokens: 2, updatedAt: t0 });
  });

  it.each([
    [{ perSecond: 0, burst: 1 }],
    [{ perSecond: -1, burst: 1 }],
    [{ perSecond: Number.NaN, burst: 1 }],
    [{ perSecond: Number.POSITIVE_INFINITY, burst: 1 }],
    [{ perSecond: 1, burst: 0 }],
    [{ perSecond: 1, burst: 0.5 }],
  ])("refuses %j", (cfg) => {
    expect(() => take(undefined, t0, cfg)).toThrow(RangeError);
  });
});

describe("share: one replica's part of a rate limit", () => {
  it("splits the rate and the burst (at least one token) between the replicas; one replica keeps it whole", () => {
    const cfg = { perSecond: 50, burst: 100 };
    expect(share(cfg, 1)).toBe(cfg);
    expect(share(cfg, 0)).toBe(cfg);
    expect(share(cfg, 2)).toEqual({ perSecond: 25, burst: 50 });
    expect(share({ perSecond: 1, burst: 1 }, 3)).toEqual({ perSecond: 1 / 3, burst: 1 });
  });

  it("R replicas each taking from their share never pass the subscription's rate together", () => {
    const cfg = { perSecond: 10, burst: 10 };
    const R = 3;
    const buckets = Array.from({ length: R }, () => undefined as TokenBucket | undefined);
    let sent = 0;
    for (let t = 0; t <= 10_000; t += 5) {
      for (let i = 0; i < R; i++) {
        const r = take(buckets[i], t, share(cfg, R));
        buckets[i] = r.bucket;
        if (r.ok) sent++;
      }
    }
    // 10 s at 10/s plus one burst of 10, across all three.
    expect(sent).toBeLessThanOrEqual(10 * 10 + 10 + R);
    expect(sent).toBeGreaterThanOrEqual(10 * 10);
  });
});
