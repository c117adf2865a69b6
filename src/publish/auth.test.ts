import { describe, expect, it } from "vitest";
import { TtlCache, tokenDigest } from "./auth.js";

describe("TtlCache", () => {
  it("shares one load between concurrent and repeated calls within the TTL", async () => {
    let now = 0;
    let loads = 0;
    const cache = new TtlCache<number>(10_000, 100, () => now);
    const load = () => Promise.resolve(++loads);
    const [a, b] = await Promise.all([cache.get("k", load), cache.get("k", load)]);
    expect([a, b, loads]).toEqual([1, 1, 1]);
    now = 9_999;
    expect(await cache.get("k", load)).toBe(1);
    now = 10_000;
    expect(await cache.get("k", load)).toBe(2);
  });

  it("forgets failures at once", async () => {
    const cache = new TtlCache<number>(10_000, 100);
    await expect(cache.get("k", () => Promise.reject(new Error("down")))).rejects.toThrow("down");
    expect(await cache.get("k", () => Promise.resolve(7))).toBe(7);
  });

  it("stays within its bound, dropping the oldest", async () => {
    const cache = new TtlCache<string>(10_000, 3);
    for (const k of ["a", "b", "c", "d"]) await cache.get(k, () => Promise.resolve(k));
    expect(cache.size).toBe(3);
    let reloaded = false;
    await cache.get("a", () => ((reloaded = true), Promise.resolve("a")));
    expect(reloaded).toBe(true);
  });
});

describe("tokenDigest", () => {
  it("is a SHA-256 hex digest, not the token", () => {
    const d = tokenDigest("secret-token");
    expect(d).toMatch(/^[0-9a-f]{64}$/);
    expect(d).not.toContain("secret");
  });
});
