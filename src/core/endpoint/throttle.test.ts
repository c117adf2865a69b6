import { describe, expect, it } from "vitest";
import { isThrottled, nextThrottle } from "./throttle.js";

const T0 = Date.UTC(2026, 10, 30, 6, 0, 0);

describe("endpoint-wide Retry-After holds", () => {
  it("a 429 or 503 with Retry-After holds the endpoint until the time asked for", () => {
    for (const status of [429, 503]) {
      const t = nextThrottle(undefined, { responseStatus: status, retryAfter: "120" }, T0, true);
      expect(t).toEqual({ since: T0, until: T0 + 120_000, status, retryAfter: "120" });
      expect(isThrottled(t, T0 + 119_999)).toBe(true);
      expect(isThrottled(t, T0 + 120_000)).toBe(false);
    }
    const date = new Date(T0 + 30_000).toUTCString();
    expect(nextThrottle(undefined, { responseStatus: 503, retryAfter: date }, T0, true)?.until).toBe(T0 + 30_000);
  });

  it("caps the hold at one hour", () => {
    expect(nextThrottle(undefined, { responseStatus: 429, retryAfter: "86400" }, T0, true)?.until).toBe(T0 + 3_600_000);
  });

  it("nothing else holds it: other statuses, no or a malformed header, zero, a past date, respectRetryAfter false", () => {
    expect(nextThrottle(undefined, { responseStatus: 500, retryAfter: "60" }, T0, true)).toBeUndefined();
    expect(nextThrottle(undefined, { responseStatus: 408, retryAfter: "60" }, T0, true)).toBeUndefined();
    expect(nextThrottle(undefined, { responseStatus: 429 }, T0, true)).toBeUndefined();
    expect(nextThrottle(undefined, { responseStatus: 429, retryAfter: "soon" }, T0, true)).toBeUndefined();
    expect(nextThrottle(undefined, { responseStatus: 429, retryAfter: "0" }, T0, true)).toBeUndefined();
    expect(nextThrottle(undefined, { responseStatus: 429, retryAfter: new Date(T0 - 5_000).toUTCString() }, T0, true)).toBeUndefined();
    expect(nextThrottle(undefined, { responseStatus: 429, retryAfter: "60" }, T0, false)).toBeUndefined();
    expect(nextThrottle(undefined, { error: "timeout" } as never, T0, true)).toBeUndefined();
  });

  it("a later time extends a running hold and keeps its start; an earlier one changes nothing", () => {
    const first = nextThrottle(undefined, { responseStatus: 429, retryAfter: "60" }, T0, true)!;
    const longer = nextThrottle(first, { responseStatus: 503, retryAfter: "90" }, T0 + 10_000, true)!;
    expect(longer).toEqual({ since: T0, until: T0 + 100_000, status: 503, retryAfter: "90" });
    expect(nextThrottle(longer, { responseStatus: 429, retryAfter: "5" }, T0 + 20_000, true)).toBe(longer);
    // After a hold ended, a new one starts anew.
    expect(nextThrottle(first, { responseStatus: 429, retryAfter: "10" }, T0 + 70_000, true)).toMatchObject({ since: T0 + 70_000, until: T0 + 80_000 });
  });
});
