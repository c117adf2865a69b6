// The OAuth2 client against a real token endpoint on 127.0.0.1 (test/helpers/token-server.ts),
// through a real Sender: the form, both client authentication methods, caching until shortly
// before expiry, one request for concurrent callers, replacement after a 401, and errors that
// name the endpoint's status and OAuth2 error code, never the client secret.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { TokenServer } from "../../../test/helpers/token-server.js";
import { BLOCKED_ADDRESS_CODE, classify } from "../../core/attempt/classify.js";
import { parseCidrList } from "../../core/request/netguard.js";
import { MAX_TOKEN_LIFETIME_MS, OAuth2Client, TOKEN_ENDPOINT_CODE, type OAuth2Grant } from "./oauth2.js";
import { Sender } from "./sender.js";
import { TenantLru } from "../../lib/tenant-lru.js";

const CLIENT = { id: "hookline:client id", secret: "s3cr&t+=/ value" };
let server: TokenServer;
const sender = new Sender({ allowedNetworks: parseCidrList("127.0.0.0/8") });
let clock = Date.now();
const client = () => new OAuth2Client(sender, { userAgent: "hookline/test", now: () => clock });
const grant = (extra: Partial<OAuth2Grant> = {}): OAuth2Grant => ({
  key: `k-${Math.random()}`,
  namespace: "shop",
  tokenURL: server.url(),
  clientId: CLIENT.id,
  clientSecret: CLIENT.secret,
  scopes: [],
  clientAuthentication: "ClientSecretBasic",
  ...extra,
});
const opts = { timeoutMs: 2_000 };

beforeAll(async () => {
  server = await TokenServer.start(CLIENT);
});
afterEach(() => {
  server.fail = undefined;
  server.raw = undefined;
  server.expiresIn = 3600;
  clock = Date.now();
});
afterAll(async () => {
  await sender.destroy();
  await server.close();
});

describe("OAuth2Client: the client credentials request", () => {
  it("ClientSecretBasic: form-encoded grant, scope and audience; credentials form-encoded in HTTP Basic (RFC 6749 2.3.1)", async () => {
    const t = await client().token(grant({ scopes: ["webhooks:write", "read"], audience: "https://hooks.example" }), opts);
    expect(t).toMatchObject({ kind: "ok" });
    const req = server.requests.at(-1)!;
    expect(req.contentType).toBe("application/x-www-form-urlencoded");
    expect(req.form).toEqual({ grant_type: "client_credentials", scope: "webhooks:write read", audience: "https://hooks.example" });
    expect(req).toMatchObject({ via: "basic", clientId: CLIENT.id, clientSecret: CLIENT.secret });
  });

  it("ClientSecretPost: client_id and client_secret in the form", async () => {
    expect(await client().token(grant({ clientAuthentication: "ClientSecretPost" }), opts)).toMatchObject({ kind: "ok" });
    expect(server.requests.at(-1)).toMatchObject({ via: "form", clientId: CLIENT.id, clientSecret: CLIENT.secret });
  });
});

describe("OAuth2Client: caching", () => {
  it("one token per grant until shortly before it expires", async () => {
    server.expiresIn = 100;
    const c = client();
    const g = grant();
    const before = server.requests.length;
    const first = await c.token(g, opts);
    expect(await c.token(g, opts)).toEqual(first);
    clock += 89_000; // refreshed 10% (at most 60 s) before the expiry
    expect(await c.token(g, opts)).toEqual(first);
    clock += 2_000;
    const second = await c.token(g, opts);
    expect(second).not.toEqual(first);
    expect(server.requests.length - before).toBe(2);
  });

  it("without expires_in: kept for the default lifetime (or until a 401)", async () => {
    server.expiresIn = undefined;
    const c = new OAuth2Client(sender, { userAgent: "t", now: () => clock, defaultLifetimeMs: 10_000 });
    const g = grant();
    const first = await c.token(g, opts);
    clock += 8_000;
    expect(await c.token(g, opts)).toEqual(first);
    clock += 1_500;
    expect(await c.token(g, opts)).not.toEqual(first);
  });

  it("callers asking at once share one request; grants do not share tokens", async () => {
    const c = client();
    const g = grant();
    const before = server.requests.length;
    const all = await Promise.all(Array.from({ length: 8 }, () => c.token(g, opts)));
    expect(new Set(all.map((t) => JSON.stringify(t))).size).toBe(1);
    expect(server.requests.length - before).toBe(1);
    expect(await c.token(grant(), opts)).not.toEqual(all[0]);
  });

  it("replacing a refused token fetches one new token, once for every caller replacing the same one", async () => {
    const c = client();
    const g = grant();
    const first = await c.token(g, opts);
    if (first.kind !== "ok") throw new Error("no token");
    const before = server.requests.length;
    const replaced = await Promise.all([c.token(g, { ...opts, replacing: first.token }), c.token(g, { ...opts, replacing: first.token })]);
    expect(replaced[0]).toEqual(replaced[1]);
    expect(replaced[0]).not.toEqual(first);
    expect(server.requests.length - before).toBe(1);
    // Replacing a token someone already replaced returns the newer one without a request.
    expect(await c.token(g, { ...opts, replacing: first.token })).toEqual(replaced[0]);
    expect(server.requests.length - before).toBe(1);
  });
});

describe("OAuth2Client: the cache is bounded in lifetime, per namespace and in all", () => {
  const requestsFor = async (c: OAuth2Client, grants: OAuth2Grant[]) => {
    const before = server.requests.length;
    for (const g of grants) expect(await c.token(g, opts)).toMatchObject({ kind: "ok" });
    return server.requests.length - before;
  };

  it("expires_in is trusted up to 24 h: a token said to last ten years is fetched again after a day", async () => {
    server.expiresIn = 10 * 365 * 24 * 3600;
    const c = client();
    const g = grant();
    expect(await requestsFor(c, [g])).toBe(1);
    clock += 24 * 3600_000 - 61_000; // refreshed 60 s before the clamped expiry
    expect(await requestsFor(c, [g])).toBe(0);
    clock += 2_000;
    expect(await requestsFor(c, [g])).toBe(1);
    expect(MAX_TOKEN_LIFETIME_MS).toBe(24 * 3600_000);
  });

  it("tokens expired over an hour ago are forgotten at the next new token, scanning for them at most once a minute", async () => {
    const c = client();
    const scans = vi.spyOn(TenantLru.prototype, "prune");
    try {
      server.expiresIn = 60;
      const old = Array.from({ length: 3 }, () => grant());
      expect(await requestsFor(c, old)).toBe(3);
      expect(scans).toHaveBeenCalledTimes(1); // the first new token scans
      clock += 3_600_000 + 61_000; // the three expired over an hour ago
      server.expiresIn = 3600;
      expect(await requestsFor(c, [grant()])).toBe(1);
      expect(c.cached.tokens).toBe(1);
      expect(scans).toHaveBeenCalledTimes(2);
      // Twenty more grants within the minute: no scan.
      expect(await requestsFor(c, Array.from({ length: 20 }, () => grant()))).toBe(20);
      expect(scans).toHaveBeenCalledTimes(2);
      clock += 60_000;
      expect(await requestsFor(c, [grant()])).toBe(1);
      expect(scans).toHaveBeenCalledTimes(3);
      expect(c.cached.tokens).toBe(22);
    } finally {
      scans.mockRestore();
    }
  });

  it("a namespace keeps at most maxTokensPerNamespace tokens; the one used longest ago goes first", async () => {
    const c = new OAuth2Client(sender, { userAgent: "t", now: () => clock, maxTokensPerNamespace: 3 });
    const [g1, g2, g3, g4] = Array.from({ length: 4 }, () => grant());
    expect(await requestsFor(c, [g1!, g2!, g3!])).toBe(3);
    expect(await requestsFor(c, [g1!])).toBe(0); // g1 used again: g2 is now the oldest
    expect(await requestsFor(c, [g4!])).toBe(1);
    expect(c.cached).toEqual({ tokens: 3, namespaces: 1 });
    expect(await requestsFor(c, [g1!, g3!, g4!])).toBe(0);
    expect(await requestsFor(c, [g2!])).toBe(1);
  });

  it("one namespace flooding with grants cannot evict another's tokens: above maxTokens the fullest namespace gives one up", async () => {
    const evicted: string[] = [];
    const c = new OAuth2Client(sender, { userAgent: "t", now: () => clock, maxTokens: 10, maxTokensPerNamespace: 8, onEvict: (reason) => evicted.push(reason) });
    const quiet = [grant({ namespace: "quiet" }), grant({ namespace: "quiet" })];
    expect(await requestsFor(c, quiet)).toBe(2);
    const flood = Array.from({ length: 100 }, () => grant({ namespace: "flood" }));
    expect(await requestsFor(c, flood)).toBe(100);
    expect(c.cached).toEqual({ tokens: 10, namespaces: 2 });
    // The quiet namespace keeps its service: no new token request.
    expect(await requestsFor(c, quiet)).toBe(0);
    // The flooder's oldest were the ones dropped.
    expect(await requestsFor(c, [flood[0]!])).toBe(1);
    expect(evicted.length).toBeGreaterThan(90);
    expect(new Set(evicted)).toEqual(new Set(["namespace"]));
    // Many namespaces each under its own cap: the total cap takes from the fullest one.
    const wide = Array.from({ length: 5 }, (_, i) => grant({ namespace: `wide-${i}` }));
    expect(await requestsFor(c, wide)).toBe(5);
    expect(c.cached.tokens).toBe(10);
    expect(await requestsFor(c, quiet)).toBe(0);
    expect(evicted).toContain("total");
  });

  it("10 000 grants of 8 KiB tokens that say they last ten years hold memory for the cap only", { timeout: 120_000 }, async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const token = "t".repeat(8_000);
    server.raw = { status: 200, body: JSON.stringify({ access_token: token, token_type: "Bearer", expires_in: 10 * 365 * 24 * 3600 }) };
    const c = new OAuth2Client(sender, { userAgent: "t", now: () => clock, maxTokens: 500, maxTokensPerNamespace: 100 });
    gc();
    const before = process.memoryUsage().heapUsed;
    const batch = 100;
    for (let i = 0; i < 10_000; i += batch) {
      const grants = Array.from({ length: batch }, (_, j) => ({ ...grant({ namespace: `ns-${(i + j) % 50}` }), key: `mem-${i + j}` }));
      const got = await Promise.all(grants.map((g) => c.token(g, opts)));
      expect(got.every((t) => t.kind === "ok")).toBe(true);
    }
    gc();
    const grown = process.memoryUsage().heapUsed - before;
    // 500 tokens of 8 000 one-byte characters are 4 MB; without a bound the 10 000 were 80 MB.
    expect(grown).toBeLessThan(16 * 1024 * 1024);
    expect(c.cached.tokens).toBe(500);
  });
});

describe("OAuth2Client: errors name the status and OAuth2 error, never a secret", () => {
  const failure = async (setup: () => void, g: OAuth2Grant = grant()) => {
    setup();
    const t = await client().token(g, opts);
    expect(t.kind).toBe("error");
    if (t.kind !== "error") throw new Error("unreachable");
    expect(t.message).not.toContain(CLIENT.secret);
    expect(t.message).toMatch(/^token endpoint: /);
    return t;
  };

  it("a wrong client secret: 401 (invalid_client), retried like an endpoint error", async () => {
    const t = await failure(() => undefined, grant({ clientSecret: "wrong" }));
    expect(t).toMatchObject({ code: TOKEN_ENDPOINT_CODE, message: "token endpoint: answered 401 (invalid_client)" });
    expect(classify({ kind: "error", code: t.code })).toEqual({ verdict: "retry", reason: "token_endpoint" });
  });

  it("the error_description (which may echo anything) is left out", async () => {
    const t = await failure(() => (server.fail = { status: 400, error: "invalid_scope" }));
    expect(t.message).toBe("token endpoint: answered 400 (invalid_scope)");
  });

  it.each([
    ["no JSON", { status: 200, body: "<html>ok</html>" }, "answered 200 without a JSON object"],
    ["no access_token", { status: 200, body: '{"token_type":"Bearer"}' }, "the answer has no access_token"],
    ["a token with a line break", { status: 200, body: JSON.stringify({ access_token: "a\r\nX-Injected: 1" }) }, "not a printable ASCII string"],
    ["a MAC token", { status: 200, body: JSON.stringify({ access_token: "abc", token_type: "mac" }) }, 'token_type "mac" is not Bearer'],
    ["an answer above 64 KiB", { status: 200, body: JSON.stringify({ access_token: "a", pad: "x".repeat(70_000) }) }, "the answer is larger than 65536 bytes"],
  ])("%s", async (_name, raw, message) => {
    const t = await failure(() => (server.raw = raw));
    expect(t).toMatchObject({ code: TOKEN_ENDPOINT_CODE });
    expect(t.message).toContain(message);
  });

  it("a token endpoint that does not answer: the attempt's timeout", async () => {
    const c = client();
    server.fail = "hang";
    const t = await c.token(grant(), { timeoutMs: 300 });
    expect(t).toMatchObject({ kind: "error", code: "TimeoutError", message: "token endpoint: no response within 300ms" });
  });

  it("the network guard applies to the token endpoint", async () => {
    const t = await client().token(grant({ tokenURL: "http://10.1.1.1/oauth/token" }), opts);
    expect(t).toMatchObject({ kind: "error", code: BLOCKED_ADDRESS_CODE });
    if (t.kind === "error") expect(t.message).toMatch(/^token endpoint: address 10\.1\.1\.1 is private/);
  });
});
