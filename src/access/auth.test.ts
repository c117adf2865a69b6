import { describe, expect, it } from "vitest";
import { identityKey, TtlCache, tokenDigest } from "./auth.js";

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

describe("identityKey", () => {
  const sa = { username: "system:serviceaccount:shop:publisher", uid: "u-1", groups: ["system:serviceaccounts", "system:serviceaccounts:shop"] };

  it("is the same for every token of one identity, and differs when anything a review is asked about differs", () => {
    expect(identityKey({ ...sa })).toBe(identityKey(sa));
    const others = [{ ...sa, username: "system:serviceaccount:shop:other" }, { ...sa, uid: "u-2" }, { ...sa, groups: ["system:serviceaccounts"] }, { ...sa, extra: { "authentication.kubernetes.io/pod-name": ["p"] } }];
    for (const o of others) expect(identityKey(o)).not.toBe(identityKey(sa));
  });

  it("cannot be forged by moving characters between fields", () => {
    expect(identityKey({ username: "a/b", groups: [] })).not.toBe(identityKey({ username: "a", groups: ["b"] }));
    expect(identityKey({ username: "a", uid: "b", groups: [] })).not.toBe(identityKey({ username: "ab", groups: [] }));
  });
});
