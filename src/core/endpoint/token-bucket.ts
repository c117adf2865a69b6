// A token bucket for a subscription's rateLimit {perSecond, burst}: pure, refilled continuously
// from an injected clock, so the caller keeps one small object per endpoint.

export interface TokenBucket {
  /** Tokens available at updatedAt (fractional between refills). */
  tokens: number;
  /** Epoch ms the token count was computed at. */
  updatedAt: number;
}

export interface RateLimit {
  /** Sustained rate, tokens per second (> 0). */
  perSecond: number;
  /** Capacity: the most requests that may go at once after a quiet period (>= 1). */
  burst: number;
}

export type TakeResult = { ok: true; bucket: TokenBucket } | { ok: false; bucket: TokenBucket; retryInMs: number };

// Floating-point refill can land a hair under a whole token exactly when one is due.
const EPSILON = 1e-9;

/**
 * One replica's part of a rate limit that `replicas` replicas enforce each on its own (stream
 * mode, where every replica delivers): together they never exceed the subscription's rate.
 */
export function share(cfg: RateLimit, replicas: number): RateLimit {
  if (!(replicas > 1)) return cfg;
  return { perSecond: cfg.perSecond / replicas, burst: Math.max(1, cfg.burst / replicas) };
}

/** A full bucket: a new (or restarted) endpoint may burst at once. */
export function fullBucket(now: number, cfg: RateLimit): TokenBucket {
  return { tokens: cfg.burst, updatedAt: now };
}

/**
 * Takes one token if there is one. Otherwise says how long until there is: retryInMs is the
 * time to the next whole token, rounded up to whole ms, so a take at now + retryInMs succeeds.
 * `bucket` undefined starts full. A clock that steps backwards refills nothing. Throws a
 * RangeError on a rate or burst the API would have refused (perSecond <= 0, burst < 1).
 */
export function take(bucket: TokenBucket | undefined, now: number, cfg: RateLimit): TakeResult {
  if (!(cfg.perSecond > 0) || !(cfg.burst >= 1) || !Number.isFinite(cfg.perSecond) || !Number.isFinite(cfg.burst)) {
    throw new RangeError(`invalid rate limit: perSecond ${cfg.perSecond} must be > 0 and burst ${cfg.burst} >= 1`);
  }
  const current = refill(bucket ?? fullBucket(now, cfg), now, cfg);
  if (current.tokens >= 1 - EPSILON) {
    return { ok: true, bucket: { tokens: Math.max(0, current.tokens - 1), updatedAt: current.updatedAt } };
  }
  const retryInMs = Math.max(1, Math.ceil(((1 - current.tokens) * 1_000) / cfg.perSecond - EPSILON * 1_000));
  return { ok: false, bucket: current, retryInMs };
}

function refill(bucket: TokenBucket, now: number, cfg: RateLimit): TokenBucket {
  const elapsed = Math.max(0, now - bucket.updatedAt);
  const tokens = Math.min(cfg.burst, bucket.tokens + (elapsed * cfg.perSecond) / 1_000);
  return { tokens, updatedAt: Math.max(now, bucket.updatedAt) };
}
