// The one doubling delay for plumbing retries (reconnects, re-lists, re-checks): `initialMs`
// doubled per attempt, capped at `maxMs`. Delivery retries have their own policy
// (src/core/attempt/backoff.ts: the subscription's spec, with jitter); this is for the operator's own.
export function doubling(attempt: number, initialMs: number, maxMs: number): number {
  // 2 ** 1024 is Infinity; capping the exponent keeps the product finite for any attempt.
  return Math.min(maxMs, initialMs * 2 ** Math.min(Math.max(0, attempt), 52));
}
