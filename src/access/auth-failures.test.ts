import { describe, expect, it } from "vitest";
import { AuthFailureLimiter, clientKey } from "./auth-failures.js";

describe("AuthFailureLimiter", () => {
  it("allows `burst` failures at once, then refills at perMinute, with the seconds to wait", () => {
    let now = 0;
    const limiter = new AuthFailureLimiter({ burst: 3, perMinute: 6 }, { now: () => now });
    expect([limiter.take("a"), limiter.take("a"), limiter.take("a")].every((r) => r.ok)).toBe(true);
    expect(limiter.take("a")).toEqual({ ok: false, retryAfterSeconds: 10 });
    // Another address is not affected.
    expect(limiter.take("b").ok).toBe(true);
    now = 9_999;
    expect(limiter.take("a").ok).toBe(false);
    now = 10_000;
    expect(limiter.take("a").ok).toBe(true);
    expect(limiter.take("a")).toEqual({ ok: false, retryAfterSeconds: 10 });
  });

  it("a refund gives back a token taken for a valid token, and a full bucket is forgotten", () => {
    const limiter = new AuthFailureLimiter({ burst: 2, perMinute: 1 }, { now: () => 0 });
    for (let i = 0; i < 100; i++) {
      expect(limiter.take("a").ok).toBe(true);
      limiter.refund("a");
    }
    expect(limiter.size).toBe(0);
    limiter.take("a");
    limiter.take("a");
    expect(limiter.take("a").ok).toBe(false);
  });

  it("tracks at most maxClients addresses, forgetting the one unused longest", () => {
    const limiter = new AuthFailureLimiter({ burst: 1, perMinute: 1 }, { maxClients: 2, now: () => 0 });
    limiter.take("a");
    limiter.take("b");
    limiter.take("a"); // a used again: b is now the oldest
    limiter.take("c");
    expect(limiter.size).toBe(2);
    expect(limiter.take("a").ok).toBe(false); // still limited
    expect(limiter.take("b").ok).toBe(true); // forgotten
  });
});

describe("clientKey", () => {
  it("limits IPv4 by address and IPv6 by /64", () => {
    expect(clientKey("10.1.2.3")).toBe("10.1.2.3");
    expect(clientKey("::ffff:10.1.2.3")).toBe("10.1.2.3");
    expect(clientKey("2001:db8:1:2:aaaa::1")).toBe("2001:db8:1:2::/64");
    expect(clientKey("2001:db8:1:2:bbbb:cccc:dddd:eeee")).toBe("2001:db8:1:2::/64");
    expect(clientKey("2001:0DB8:0001:0002::")).toBe("2001:db8:1:2::/64");
    expect(clientKey("::1")).toBe("0:0:0:0::/64");
    expect(clientKey("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
    expect(clientKey(undefined)).toBe("unknown");
  });
});
