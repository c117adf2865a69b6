// The publish door's limit on failed authentications, per client address: a token bucket of
// `burst` failures refilled at `perMinute` (core/endpoint/token-bucket.ts). A request that needs a new
// TokenReview takes a token first (given back when the token turns out valid), so a flood of
// made-up tokens costs the API server at most `burst` reviews per address, then `perMinute`;
// the rest are answered 429 without asking. A token already known to be valid is never held
// back: a service sharing its address with an attacker keeps publishing with it.
//
// The door uses a second limiter of this kind for refused authorizations, keyed by the caller's
// identity instead of its address (server.ts): a valid token without rights gets `burst`
// SubjectAccessReviews, then `perMinute`.
//
// An address is an IPv4 address, or an IPv6 /64 (one host usually holds a whole /64, and could
// otherwise try from a new address each time). At most `maxClients` addresses are tracked; the
// one unused longest is forgotten first.
import { isIPv4, isIPv6 } from "node:net";
import { take, type RateLimit, type TokenBucket } from "../core/endpoint/token-bucket.js";

export interface AuthFailureLimit {
  burst: number;
  perMinute: number;
}

/** Both doors' default: 10 failures per client address, then 10 a minute (PUBLISH_AUTH_FAILURE_BURST, _PER_MINUTE). */
export const DEFAULT_AUTH_FAILURE_LIMIT: AuthFailureLimit = { burst: 10, perMinute: 10 };

export type Allowance = { ok: true } | { ok: false; retryAfterSeconds: number };

/** The key an address is limited by: IPv4 (also IPv4-mapped IPv6) as it is, IPv6 by its /64. */
export function clientKey(address: string | undefined): string {
  if (!address) return "unknown";
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  if (isIPv4(address)) return address;
  if (!isIPv6(address)) return address;
  return `${expandIPv6(address).slice(0, 4).join(":")}::/64`;
}

function expandIPv6(address: string): string[] {
  const [head, tail] = address.split("%")[0]!.split("::") as [string, string | undefined];
  const left = head ? head.split(":") : [];
  const right = tail !== undefined && tail !== "" ? tail.split(":") : [];
  const fill = tail === undefined ? [] : Array.from({ length: 8 - left.length - right.length }, () => "0");
  return [...left, ...fill, ...right].map((g) => g.toLowerCase().replace(/^0+(?=.)/, ""));
}

export class AuthFailureLimiter {
  private readonly buckets = new Map<string, TokenBucket>();
  private readonly rate: RateLimit;
  private readonly now: () => number;
  private readonly maxClients: number;

  constructor(limit: AuthFailureLimit, opts: { maxClients?: number; now?: () => number } = {}) {
    this.rate = { perSecond: limit.perMinute / 60, burst: limit.burst };
    this.now = opts.now ?? Date.now;
    this.maxClients = opts.maxClients ?? 10_000;
  }

  get size(): number {
    return this.buckets.size;
  }

  /** Takes one failure from the client's allowance; when it has none, says when it has one again. */
  take(client: string): Allowance {
    const r = take(this.buckets.get(client), this.now(), this.rate);
    this.store(client, r.bucket);
    return r.ok ? { ok: true } : { ok: false, retryAfterSeconds: Math.max(1, Math.ceil(r.retryInMs / 1000)) };
  }

  /** Gives back what take() took, for a request whose token turned out valid. */
  refund(client: string): void {
    const b = this.buckets.get(client);
    if (!b) return;
    const tokens = Math.min(this.rate.burst, b.tokens + 1);
    if (tokens >= this.rate.burst) this.buckets.delete(client);
    else this.store(client, { tokens, updatedAt: b.updatedAt });
  }

  private store(client: string, bucket: TokenBucket): void {
    // Re-inserted: the Map's order is then the order of last use.
    this.buckets.delete(client);
    this.buckets.set(client, bucket);
    for (const k of this.buckets.keys()) {
      if (this.buckets.size <= this.maxClients) break;
      this.buckets.delete(k);
    }
  }
}
