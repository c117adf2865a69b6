// Receiver credentials end to end: the real API server, the real operator and real receivers
// on 127.0.0.1. An HTTPS receiver that requires a client certificate from a test CA (made with
// openssl) gets it from a kubernetes.io/tls Secret, and the renewed one without a restart; a
// token endpoint issues OAuth2 tokens (cached, refreshed before expiry, exactly one refresh and
// one re-send on a 401); an HTTP CONNECT proxy carries requests, and the network guard refuses
// a destination outside WEBHOOK_ALLOWED_NETWORKS even through it; header values from Secrets
// arrive, and a missing, vanished or non-ASCII one makes the subscription Ready=False naming
// the field while its deliveries wait. No value shows in status, Events, logs or metrics.
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { SecretCache } from "../../src/delivery/engine/secrets.js";
import { KubeClient } from "../../src/kube/client.js";
import { createNamespace, deleteNamespace, kubectlOk, waitFor } from "../helpers/cluster.js";
import { ConnectProxy } from "../helpers/connect-proxy.js";
import { apply, create, delivery, events, getObj, secret, subscription, type Obj } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { TestCa, tlsSecret, type Pem } from "../helpers/pki.js";
import { Receiver } from "../helpers/receiver.js";
import { TokenServer } from "../helpers/token-server.js";

const once = { initialBackoff: "50ms", maxAttempts: 1, jitterPercent: 0 };
const fast = { initialBackoff: "50ms", multiplier: 2, maxAttempts: 5, maxBackoff: "1s", jitterPercent: 0 };
const CLIENT = { id: "hookline-orders", secret: `client-secret-${Math.random().toString(36).slice(2)}` };
const random = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2)}-${Date.now().toString(36)}`;

const cond = (o: Obj | undefined, type: string) => o?.status?.conditions?.find((c: { type: string }) => c.type === type) as { status: string; reason: string; message: string } | undefined;

describe("receiver credentials", () => {
  let ns: string;
  let op: TestOperator;
  let ca: TestCa;
  let client1: Pem;
  let client2: Pem;
  let tlsReceiver: Receiver;
  let plain: Receiver;
  let proxy: ConnectProxy;
  let tokens: TokenServer;
  let oauthReceiver: Receiver;
  let refuseEveryToken = false;
  const headerValues = { apiKey: random("api-key"), rotated: random("api-key-rotated"), big: "b".repeat(4096) };
  let n = 0;

  const until = (name: string, phase: string, timeoutMs = 30_000) =>
    waitFor(async () => {
      const d = await getObj("whdel", ns, name);
      return d?.status?.phase === phase ? d : undefined;
    }, { description: `${name} ${phase}`, timeoutMs });
  const deliver = async (sub: string, name = `${sub}-${++n}`) => {
    await apply(delivery(ns, name, sub, { eventId: name }));
    return name;
  };
  const ready = (sub: string, status: "True" | "False", reason?: string) =>
    waitFor(async () => {
      const c = cond(await getObj("whsub", ns, sub), "Ready");
      return c?.status === status && (!reason || c.reason === reason) ? c : undefined;
    }, { description: `${sub} Ready=${status}${reason ? ` (${reason})` : ""}` });
  const waiting = (name: string) =>
    waitFor(async () => {
      const c = cond(await getObj("whdel", ns, name), "Succeeded");
      return c?.status === "Unknown" && c.reason === "SecretNotFound" ? c : undefined;
    }, { description: `${name} waiting for its Secret` });
  /** Delivers to `sub` until `done` holds for a request (a rotation is seen within the Secret TTL). */
  const deliverUntil = (sub: string, receiver: Receiver, done: (r: Receiver["requests"][number]) => boolean) =>
    waitFor(async () => {
      const name = await deliver(sub);
      await until(name, "Succeeded");
      const r = receiver.requests.findLast((q) => q.headers["webhook-id"] === name);
      return r && done(r) ? r : undefined;
    }, { description: `a delivery to ${sub} with the new value`, timeoutMs: 40_000, intervalMs: 50 });

  beforeAll(async () => {
    ns = await createNamespace("credentials");
    ca = await TestCa.create("Receiver CA");
    const server = await ca.issue("receiver", "server");
    [client1, client2] = await Promise.all([ca.issue("hookline-client-1", "client"), ca.issue("hookline-client-2", "client")]);
    tlsReceiver = await Receiver.startHttps({ cert: server.cert, key: server.key, clientCa: ca.cert, requireClientCert: true });
    plain = await Receiver.start();
    proxy = await ConnectProxy.start();
    tokens = await TokenServer.start(CLIENT);
    oauthReceiver = await Receiver.start((req) => (!refuseEveryToken && tokens.valid(req.headers.authorization) ? 200 : 401));
    op = await startOperator({ namespaces: [ns], env: { WEBHOOK_SECRET_REFRESH_MS: "1000" }, statusIntervalMs: 200 });
  }, 120_000);

  afterAll(async () => {
    await op?.stop();
    await Promise.all([tlsReceiver?.close(), plain?.close(), proxy?.close(), tokens?.close(), oauthReceiver?.close()]);
    await ca?.close();
    if (ns) await deleteNamespace(ns);
  });

  describe("client certificates (spec.tls)", () => {
    it("an HTTPS receiver that requires a client certificate gets it from a kubernetes.io/tls Secret; the renewed one is used without a restart", async () => {
      await apply([
        tlsSecret(ns, "client-cert", client1),
        secret(ns, "receiver-ca", { "ca.crt": ca.cert }),
        subscription(ns, "mtls", { url: tlsReceiver.url(), tls: { clientCertificateSecretRef: { name: "client-cert" }, caBundleSecretRef: { name: "receiver-ca" } }, retry: fast }),
      ]);
      await ready("mtls", "True");
      const first = await deliver("mtls");
      await until(first, "Succeeded");
      expect(tlsReceiver.requests.find((r) => r.headers["webhook-id"] === first)!.clientCertificate?.cn).toBe("hookline-client-1");

      // cert-manager renews the certificate: the Secret is updated in place.
      await apply(tlsSecret(ns, "client-cert", client2));
      const renewed = await deliverUntil("mtls", tlsReceiver, (r) => r.clientCertificate?.cn === "hookline-client-2");
      expect(renewed.clientCertificate?.cn).toBe("hookline-client-2");
      expect(op.op.isLeader).toBe(true);
      // Every request came with one of our two certificates.
      expect(new Set(tlsReceiver.requests.map((r) => r.clientCertificate?.cn))).toEqual(new Set(["hookline-client-1", "hookline-client-2"]));
    });

    it("without the client certificate the receiver refuses the handshake: nothing is delivered", async () => {
      await apply(subscription(ns, "ca-only", { url: tlsReceiver.url(), tls: { caBundleSecretRef: { name: "receiver-ca" } }, retry: once }));
      const before = { requests: tlsReceiver.requests.length, tlsErrors: tlsReceiver.tlsErrors };
      const d = await until(await deliver("ca-only"), "DeadLettered");
      expect(d.status!.lastAttempt.responseStatus).toBeUndefined();
      expect(tlsReceiver.requests.length).toBe(before.requests);
      expect(tlsReceiver.tlsErrors).toBeGreaterThan(before.tlsErrors);
    });

    it("a missing certificate Secret, then one whose key does not match: Ready=False naming the field, deliveries wait; fixed, delivered", async () => {
      await apply(subscription(ns, "late-cert", { url: tlsReceiver.url(), tls: { clientCertificateSecretRef: { name: "late-cert" }, caBundleSecretRef: { name: "receiver-ca" } }, retry: fast }));
      const missing = await ready("late-cert", "False", "SecretNotFound");
      expect(missing.message).toMatch(/^spec\.tls\.clientCertificateSecretRef: Secret late-cert not found in namespace /);
      const name = await deliver("late-cert");
      expect((await waiting(name)).message).toMatch(/^spec\.tls\.clientCertificateSecretRef: Secret late-cert not found/);

      await apply(tlsSecret(ns, "late-cert", { cert: client1.cert, key: client2.key }));
      await waitFor(async () => cond(await getObj("whdel", ns, name), "Succeeded")?.message.includes("does not belong to the certificate"), { description: "the mismatched key named" });
      await ready("late-cert", "False", "SecretNotUsable");
      expect((await getObj("whdel", ns, name))!.status!.phase ?? "Pending").toBe("Pending");

      await apply(tlsSecret(ns, "late-cert", client1));
      await until(name, "Succeeded");
      await ready("late-cert", "True");
    });
  });

  describe("OAuth2 client credentials (spec.oauth2)", () => {
    const oauthSub = (name: string, extra: Record<string, unknown> = {}) =>
      subscription(ns, name, {
        url: oauthReceiver.url(`/${name}`),
        oauth2: { tokenURL: tokens.url(), clientIdSecretRef: { name: "oauth", key: "client-id" }, clientSecretSecretRef: { name: "oauth", key: "client-secret" }, scopes: ["webhooks:write"], audience: "https://hooks.example" },
        retry: once,
        ...extra,
      });
    const sentFor = (name: string) => oauthReceiver.requests.filter((r) => r.headers["webhook-id"] === name);

    beforeAll(async () => {
      await apply([secret(ns, "oauth", { "client-id": CLIENT.id, "client-secret": CLIENT.secret }), oauthSub("oauth")]);
      await ready("oauth", "True");
    });

    it("a token from the token endpoint, reused by the next delivery", async () => {
      const t0 = tokens.requests.length;
      const a = await deliver("oauth");
      await until(a, "Succeeded");
      const b = await deliver("oauth");
      await until(b, "Succeeded");
      expect(tokens.requests.length - t0).toBe(1);
      const req = tokens.requests.at(-1)!;
      expect(req).toMatchObject({ via: "basic", clientId: CLIENT.id, clientSecret: CLIENT.secret, form: { grant_type: "client_credentials", scope: "webhooks:write", audience: "https://hooks.example" } });
      expect([...sentFor(a), ...sentFor(b)].map((r) => r.headers.authorization)).toEqual([`Bearer ${req.issued}`, `Bearer ${req.issued}`]);
    });

    it("a 401 from the receiver: exactly one new token and one re-send, inside the same attempt", async () => {
      await until(await deliver("oauth"), "Succeeded");
      const stale = tokens.tokens.at(-1)!;
      tokens.revoke(stale);
      const t0 = tokens.requests.length;
      const name = await deliver("oauth");
      const d = await until(name, "Succeeded");
      expect(d.status!.attempts).toBe(1);
      expect(tokens.requests.length - t0).toBe(1);
      expect(sentFor(name).map((r) => r.headers.authorization)).toEqual([`Bearer ${stale}`, `Bearer ${tokens.tokens.at(-1)}`]);
    });

    it("a token is refreshed shortly before it expires, without a 401", async () => {
      tokens.expiresIn = 2;
      try {
        tokens.revoke(tokens.tokens.at(-1)!);
        const first = await deliver("oauth");
        await until(first, "Succeeded");
        const issued = tokens.requests.at(-1)!;
        expect(sentFor(first).at(-1)!.headers.authorization).toBe(`Bearer ${issued.issued}`);
        // The token's lifetime is the condition waited for.
        await waitFor(() => Date.now() > issued.at + 2_000, { description: "the short-lived token to expire" });
        const t0 = tokens.requests.length;
        const next = await deliver("oauth");
        await until(next, "Succeeded");
        expect(tokens.requests.length - t0).toBe(1);
        expect(sentFor(next).map((r) => r.headers.authorization)).toEqual([`Bearer ${tokens.tokens.at(-1)}`]);
      } finally {
        tokens.expiresIn = 3600;
      }
    });

    it("a receiver that refuses every token: one refresh, one re-send, then the 401 dead-letters", async () => {
      refuseEveryToken = true;
      try {
        const t0 = tokens.requests.length;
        const name = await deliver("oauth");
        const d = await until(name, "DeadLettered");
        expect(d.status!.lastAttempt.responseStatus).toBe(401);
        const sent = sentFor(name);
        expect(sent).toHaveLength(2);
        // One refresh after the first 401. (The short-lived token the test before this one
        // cached may have run out before the first send on a loaded machine: a fetch then, for
        // its expiry, is not the refresh counted here.)
        expect(tokens.requests.slice(t0).filter((r) => r.at >= sent[0]!.at)).toHaveLength(1);
      } finally {
        refuseEveryToken = false;
      }
    });

    it("the token endpoint goes through the network guard: outside WEBHOOK_ALLOWED_NETWORKS the delivery is Blocked, nothing is sent", async () => {
      await apply(oauthSub("oauth-blocked", { oauth2: { tokenURL: "http://10.255.0.1/oauth/token", clientIdSecretRef: { name: "oauth", key: "client-id" }, clientSecretSecretRef: { name: "oauth", key: "client-secret" } } }));
      const name = await deliver("oauth-blocked");
      const d = await until(name, "DeadLettered");
      expect(d.status!.deadLetter.reason).toBe("Blocked");
      expect(d.status!.lastAttempt.error).toMatch(/^token endpoint: address 10\.255\.0\.1 is private/);
      expect(sentFor(name)).toHaveLength(0);
    });

    it("a wrong client secret: the token endpoint's refusal is the attempt's error; nothing reaches the receiver", async () => {
      await apply([secret(ns, "oauth-wrong", { "client-id": CLIENT.id, "client-secret": "not-the-secret" }), oauthSub("oauth-wrong", { oauth2: { tokenURL: tokens.url(), clientIdSecretRef: { name: "oauth-wrong", key: "client-id" }, clientSecretSecretRef: { name: "oauth-wrong", key: "client-secret" } } })]);
      const name = await deliver("oauth-wrong");
      const d = await until(name, "DeadLettered");
      expect(d.status!.lastAttempt).toMatchObject({ reason: "token_endpoint", error: "token endpoint: answered 401 (invalid_client)" });
      expect(sentFor(name)).toHaveLength(0);
    });
  });

  describe("an HTTP CONNECT proxy (spec.proxy)", () => {
    it("requests reach the receiver through the proxy, which is asked for the checked IP address", async () => {
      await apply(subscription(ns, "via-proxy", { url: plain.url("/via-proxy"), proxy: { url: proxy.url() }, retry: fast }));
      const before = proxy.connects.length;
      const name = await deliver("via-proxy");
      await until(name, "Succeeded");
      expect(plain.requests.find((r) => r.headers["webhook-id"] === name)!.path).toBe("/via-proxy");
      expect(proxy.connects.slice(before).map((c) => c.authority)).toContain(`127.0.0.1:${plain.port}`);
    });

    it("mTLS end to end through the tunnel", async () => {
      await apply(subscription(ns, "mtls-proxy", { url: tlsReceiver.url(), tls: { clientCertificateSecretRef: { name: "client-cert" }, caBundleSecretRef: { name: "receiver-ca" } }, proxy: { url: proxy.url() }, retry: fast }));
      const before = proxy.connects.length;
      const name = await deliver("mtls-proxy");
      await until(name, "Succeeded");
      expect(tlsReceiver.requests.find((r) => r.headers["webhook-id"] === name)!.clientCertificate?.cn).toMatch(/^hookline-client-/);
      expect(proxy.connects.slice(before).map((c) => c.authority)).toContain(`127.0.0.1:${tlsReceiver.port}`);
    });

    it.each<[string, () => string, () => string, RegExp]>([
      ["a destination outside WEBHOOK_ALLOWED_NETWORKS", () => "http://10.20.30.40:8080/hook", () => proxy.url(), /address 10\.20\.30\.40 is private/],
      ["the metadata address", () => "http://169.254.169.254/latest/meta-data", () => proxy.url(), /address 169\.254\.169\.254 is link-local/],
      ["a proxy outside WEBHOOK_ALLOWED_NETWORKS", () => plain.url(), () => "http://10.9.9.9:3128", /^proxy address 10\.9\.9\.9 is private/],
    ])("the guard refuses %s even through the proxy: Blocked, no CONNECT", async (_what, url, proxyUrl, error) => {
      const sub = `blocked-${++n}`;
      await apply(subscription(ns, sub, { url: url(), proxy: { url: proxyUrl() }, retry: once }));
      const before = proxy.connects.length;
      const d = await until(await deliver(sub), "DeadLettered");
      expect(d.status!.deadLetter.reason).toBe("Blocked");
      expect(d.status!.lastAttempt.error).toMatch(error);
      expect(proxy.connects.length).toBe(before);
    });
  });

  describe("header values from Secrets (spec.headersFrom)", () => {
    it("arrive with the request, next to the largest static header the schema allows; a changed value is picked up", async () => {
      const big = "s".repeat(4096);
      await apply([
        secret(ns, "tenant", { "api-key": headerValues.apiKey, big: headerValues.big, unrelated: random("never-read") }),
        subscription(ns, "headers", {
          url: plain.url("/headers"),
          headers: { "X-Static": big },
          headersFrom: [
            { name: "X-Api-Key", secretKeyRef: { name: "tenant", key: "api-key" } },
            { name: "X-Big", secretKeyRef: { name: "tenant", key: "big" } },
          ],
          retry: fast,
        }),
      ]);
      const name = await deliver("headers");
      await until(name, "Succeeded");
      const got = plain.requests.find((r) => r.headers["webhook-id"] === name)!;
      expect(got.headers["x-api-key"]).toBe(headerValues.apiKey);
      expect(got.headers["x-big"]).toBe(headerValues.big);
      expect(got.headers["x-static"]).toBe(big);

      await kubectlOk(["patch", "secret", "tenant", "-n", ns, "--type=merge", "-p", JSON.stringify({ stringData: { "api-key": headerValues.rotated } })]);
      const rotated = await deliverUntil("headers", plain, (r) => r.headers["x-api-key"] === headerValues.rotated);
      expect(rotated.headers["x-api-key"]).toBe(headerValues.rotated);
    });

    it("a non-ASCII value is refused with a clear condition (HTTP header values are ASCII); fixed, delivered", async () => {
      await apply([secret(ns, "tenant-bad", { token: "Zoë-42" }), subscription(ns, "non-ascii", { url: plain.url("/non-ascii"), headersFrom: [{ name: "X-Token", secretKeyRef: { name: "tenant-bad", key: "token" } }], retry: fast })]);
      const c = await ready("non-ascii", "False", "SecretNotUsable");
      expect(c.message).toBe('spec.headersFrom[0].secretKeyRef: Secret tenant-bad key "token" has a non-ASCII character at position 3 (HTTP header values are tab and printable ASCII); deliveries wait until it is fixed');
      const name = await deliver("non-ascii");
      expect((await waiting(name)).message).toContain('spec.headersFrom[0].secretKeyRef: Secret tenant-bad key "token" has a non-ASCII character');
      await waitFor(async () => (await events(ns, name)).some((e) => e.reason === "SecretNotFound" && e.message.includes("spec.headersFrom[0].secretKeyRef")), { description: "a Warning Event naming the field" });
      expect(plain.requests.filter((r) => r.path === "/non-ascii")).toHaveLength(0);
      await apply(secret(ns, "tenant-bad", { token: "Zoe-42" }));
      await until(name, "Succeeded");
      expect(plain.requests.find((r) => r.headers["webhook-id"] === name)!.headers["x-token"]).toBe("Zoe-42");
    });

    it("a Secret key that disappears: the next deliveries wait, naming the field, and the subscription turns Ready=False", async () => {
      await apply([secret(ns, "tenant-vanishing", { token: random("vanishing") }), subscription(ns, "vanishing", { url: plain.url("/vanishing"), headersFrom: [{ name: "X-Token", secretKeyRef: { name: "tenant-vanishing", key: "token" } }], retry: fast })]);
      await until(await deliver("vanishing"), "Succeeded");
      await kubectlOk(["patch", "secret", "tenant-vanishing", "-n", ns, "--type=json", "-p", JSON.stringify([{ op: "remove", path: "/data/token" }])]);
      // Deliveries made within the Secret TTL may still carry the old value; then they wait.
      const held = await waitFor(async (): Promise<{ name: string; message: string } | undefined> => {
        const name = await deliver("vanishing");
        const outcome = await waitFor(async (): Promise<string | undefined> => {
          const d = await getObj("whdel", ns, name);
          const c = cond(d, "Succeeded");
          return d?.status?.phase === "Succeeded" ? "sent" : c?.reason === "SecretNotFound" ? c.message : undefined;
        }, { description: `${name} sent or waiting` });
        return outcome === "sent" ? undefined : { name, message: outcome };
      }, { description: "a delivery waiting for the vanished key", timeoutMs: 40_000 });
      expect(held.message).toBe('spec.headersFrom[0].secretKeyRef: Secret tenant-vanishing has no key "token"');
      await ready("vanishing", "False", "SecretNotFound");
      expect(plain.requests.some((r) => r.headers["webhook-id"] === held.name)).toBe(false);
    });
  });

  it("a replay whose header Secret went missing sends nothing and is tried again; it goes out once the Secret is back", async () => {
    let fixed = false;
    const flaky = await Receiver.start(() => (fixed ? 200 : 500));
    try {
      await apply([secret(ns, "tenant-replay", { token: "replay-token-1" }), subscription(ns, "replayed", { url: flaky.url("/replayed"), headersFrom: [{ name: "X-Token", secretKeyRef: { name: "tenant-replay", key: "token" } }], retry: once, circuitBreaker: { failureThreshold: 100 } })]);
      const name = await deliver("replayed");
      await until(name, "DeadLettered");
      await kubectlOk(["delete", "secret", "tenant-replay", "-n", ns]);
      // Until the operator's Secret cache has seen it gone (each label change rolls the subscription up).
      let touch = 0;
      await waitFor(async () => {
        await kubectlOk(["label", "--overwrite", "whsub", "replayed", "-n", ns, `touch=${++touch}`]);
        return cond(await getObj("whsub", ns, "replayed"), "Ready")?.reason === "SecretNotFound";
      }, { description: "the subscription Ready=False for the deleted Secret", intervalMs: 500 });
      fixed = true;
      const before = flaky.requests.length;
      await kubectlOk(["annotate", "whdel", name, "-n", ns, "hookline.dev/replay=secret restored, INC-9"]);
      await waitFor(() => op.logs.some((l) => l.includes("reconcile failed, retrying") && l.includes("spec.headersFrom[0].secretKeyRef: Secret tenant-replay not found")), { description: "the replay refused for the missing Secret (and retried)" });
      expect(flaky.requests.length).toBe(before);
      const held = (await getObj("whdel", ns, name))!;
      expect(held.status!.phase).toBe("DeadLettered");
      expect(held.metadata.annotations?.["hookline.dev/replay"]).toBe("secret restored, INC-9");

      await apply(secret(ns, "tenant-replay", { token: "replay-token-2" }));
      const d = await until(name, "Succeeded", 60_000);
      expect(d.status!.lastReplay.reason).toBe("secret restored, INC-9");
      expect(flaky.requests.slice(before).map((r) => r.headers["x-token"])).toEqual(["replay-token-2"]);
    } finally {
      await flaky.close();
    }
  });

  it("only the keys subscriptions reference are kept from a Secret", async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(inject("kubeconfig"));
    const client = await KubeClient.create(kc);
    try {
      const cache = new SecretCache(client);
      const read = await cache.read(ns, "tenant", ["api-key"]);
      expect(read).toMatchObject({ kind: "ok", type: "Opaque" });
      expect(Object.keys(read.kind === "ok" ? read.data : {})).toEqual(["api-key"]);
      expect(cache.heldKeys().get(`${ns}/tenant`)).toEqual(["api-key"]);
      await cache.read(ns, "tenant", ["big"]);
      expect(cache.heldKeys().get(`${ns}/tenant`)?.sort()).toEqual(["api-key", "big"]);
      expect(await cache.read(ns, "no-such-secret", ["x"])).toMatchObject({ kind: "missing", message: `Secret no-such-secret not found in namespace ${ns}` });
    } finally {
      await client.destroy();
    }
  });

  it("no credential shows in status, Events, logs or metrics", async () => {
    const keyBody = (pem: string) => pem.split("\n").filter((l) => l && !l.startsWith("-----")).join("");
    const everything = [
      op.logs.join("\n"),
      await kubectlOk(["get", "whdel,whsub", "-n", ns, "-o", "json"]),
      await kubectlOk(["get", "events", "-n", ns, "-o", "json"]),
      await (await fetch(`http://127.0.0.1:${op.op.metricsPort}/metrics`)).text(),
    ].join("\n");
    expect(everything.length).toBeGreaterThan(10_000);
    expect(tokens.tokens.length).toBeGreaterThan(3);
    const needles = [CLIENT.secret, "not-the-secret", Buffer.from(CLIENT.secret).toString("base64"), headerValues.apiKey, headerValues.rotated, ...tokens.tokens, keyBody(client1.key).slice(0, 40), keyBody(client2.key).slice(0, 40)];
    for (const needle of needles) expect(everything.includes(needle), `found ${needle}`).toBe(false);
  });
});

describe("receiver credentials: HTTPS_PROXY, HTTP_PROXY, NO_PROXY in the operator's environment", () => {
  const operators: TestOperator[] = [];
  let proxy: ConnectProxy;
  let plain: Receiver;
  const namespaces: string[] = [];

  beforeAll(async () => {
    proxy = await ConnectProxy.start();
    plain = await Receiver.start();
  });
  afterAll(async () => {
    await Promise.all(operators.map((o) => o.stop()));
    await Promise.all([proxy?.close(), plain?.close()]);
    await Promise.all(namespaces.map(deleteNamespace));
  });

  const run = async (env: Record<string, string>) => {
    const ns = await createNamespace("env-proxy");
    namespaces.push(ns);
    // 10.20.30.0/24 is allowed here so that the guard lets the request reach the proxy decision.
    operators.push(await startOperator({ namespaces: [ns], env: { WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8,10.20.30.0/24", ...env } }));
    return ns;
  };
  const attempted = (ns: string, name: string) =>
    waitFor(async () => {
      const d = await getObj("whdel", ns, name);
      return d?.status?.lastAttempt ? d : undefined;
    }, { description: `${name} attempted` });

  it("HTTP_PROXY carries requests to other hosts; loopback never goes through it", async () => {
    const ns = await run({ HTTP_PROXY: proxy.url(), NO_PROXY: "example.com" });
    await create([
      subscription(ns, "remote", { url: "http://10.20.30.40:8080/hook", timeout: "1s", retry: once }),
      subscription(ns, "local", { url: plain.url("/local"), retry: once }),
      delivery(ns, "remote-1", "remote"),
      delivery(ns, "local-1", "local"),
    ]);
    await waitFor(() => proxy.connects.some((c) => c.authority === "10.20.30.40:8080"), { description: "a CONNECT to 10.20.30.40:8080" });
    await waitFor(async () => (await getObj("whdel", ns, "local-1"))?.status?.phase === "Succeeded", { description: "local-1 Succeeded" });
    expect(proxy.connects.some((c) => c.authority === `127.0.0.1:${plain.port}`)).toBe(false);
  });

  it("NO_PROXY (a CIDR) sends those destinations directly", async () => {
    const ns = await run({ HTTP_PROXY: proxy.url(), NO_PROXY: "10.20.30.0/24" });
    await create([subscription(ns, "remote", { url: "http://10.20.30.41:8080/hook", timeout: "1s", retry: once }), delivery(ns, "direct-1", "remote")]);
    await attempted(ns, "direct-1");
    expect(proxy.connects.some((c) => c.authority.startsWith("10.20.30.41"))).toBe(false);
  });
});
