// The Secret cache's signing keys: decoded once per read of the Secret (every attempt asks), read
// again after the TTL (a rotation is picked up), and each secretRef of the same Secret answered
// for itself (its key, previous key and scheme).
import { describe, expect, it } from "vitest";
import { ApiError, type KubeClient } from "../../kube/client.js";
import { SecretCache } from "./secrets.js";

const b64 = (s: string) => Buffer.from(s).toString("base64");

/** An API client that answers GETs of one Secret with `data()` (its values as given, base64-encoded as the API server does) and counts them. */
function fakeClient(data: () => Record<string, string> | undefined) {
  const calls = { gets: 0 };
  const client = {
    request: () => {
      calls.gets++;
      const d = data();
      if (!d) return Promise.reject(new ApiError(404, "NotFound", "secrets not found"));
      return Promise.resolve({ type: "Opaque", data: Object.fromEntries(Object.entries(d).map(([k, v]) => [k, b64(v)])) });
    },
  } as unknown as KubeClient;
  return { client, calls };
}

describe("SecretCache.keys", () => {
  it("decodes a Secret's signing keys once per read, and again after the TTL (a rotation)", async () => {
    let value = `whsec_${b64("first key")}`;
    const { client, calls } = fakeClient(() => ({ signing: value }));
    let now = 1_000_000;
    const cache = new SecretCache(client, { ttlMs: 30_000, now: () => now });
    const ref = { name: "hooks", key: "signing" };
    const a = await cache.keys("shop", ref);
    const b = await cache.keys("shop", ref);
    expect(a).toEqual({ kind: "ok", keys: [Buffer.from("first key")] });
    expect(b).toBe(a);
    expect(calls.gets).toBe(1);

    value = `whsec_${b64("second key")}`;
    now += 30_000;
    const c = await cache.keys("shop", ref);
    expect(c).toEqual({ kind: "ok", keys: [Buffer.from("second key")] });
    expect(calls.gets).toBe(2);
  });

  it("answers each secretRef of the same Secret for itself: its key, previous key and scheme", async () => {
    const { client, calls } = fakeClient(() => ({ current: "plain secret", old: `whsec_${b64("old key")}`, next: `whsec_${b64("new key")}` }));
    const cache = new SecretCache(client, { now: () => 5_000 });
    // StandardWebhooks refuses a value not in the whsec_ form; HMACSHA256Hex signs with its bytes.
    expect(await cache.keys("shop", { name: "hooks", key: "current" })).toMatchObject({ kind: "missing", reason: "SecretNotVerifiable" });
    expect(await cache.keys("shop", { name: "hooks", key: "current", scheme: "HMACSHA256Hex" })).toEqual({ kind: "ok", keys: [Buffer.from("plain secret")] });
    expect(await cache.keys("shop", { name: "hooks", key: "next", previousKey: "old" })).toEqual({ kind: "ok", keys: [Buffer.from("new key"), Buffer.from("old key")] });
    expect(await cache.keys("shop", { name: "hooks", key: "next" })).toEqual({ kind: "ok", keys: [Buffer.from("new key")] });
    expect(await cache.keys("shop", { name: "hooks", key: "absent" })).toEqual({ kind: "missing", message: 'Secret hooks has no key "absent"' });
    // The first answers again, unchanged by the others.
    expect(await cache.keys("shop", { name: "hooks", key: "current" })).toMatchObject({ kind: "missing", reason: "SecretNotVerifiable" });
    // One read, then one more for each key not asked for before (next and old; absent).
    expect(calls.gets).toBe(3);
  });

  it("keeps apart secretRefs whose key and previousKey hold separators (the spec takes any text there)", async () => {
    const { client } = fakeClient(() => ({ a: `whsec_${b64("key a")}` }));
    const cache = new SecretCache(client, { now: () => 5_000 });
    const joined = { name: "hooks", key: "a", previousKey: "b\n" };
    expect(await cache.keys("shop", joined)).toEqual({ kind: "ok", keys: [Buffer.from("key a")] });
    // Read again (a key not asked for before): the one read now answers both refs, each for itself.
    expect(await cache.keys("shop", { name: "hooks", key: "a\nb" })).toEqual({ kind: "missing", message: 'Secret hooks has no key "a\nb"' });
    expect(await cache.keys("shop", joined)).toEqual({ kind: "ok", keys: [Buffer.from("key a")] });
    expect(await cache.keys("shop", { name: "hooks", key: 'a","b' })).toMatchObject({ kind: "missing" });
    expect(await cache.keys("shop", { name: "hooks", key: "a" })).toEqual({ kind: "ok", keys: [Buffer.from("key a")] });
  });

  it("says a missing Secret is missing, naming it and its namespace", async () => {
    const { client } = fakeClient(() => undefined);
    const cache = new SecretCache(client);
    expect(await cache.keys("shop", { name: "gone", key: "signing" })).toEqual({ kind: "missing", message: "Secret gone not found in namespace shop" });
  });
});
