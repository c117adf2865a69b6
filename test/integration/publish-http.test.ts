// The HTTP publish door: authentication (TokenReview for the audience hookline, with real
// ServiceAccount tokens), authorization (SubjectAccessReview), the limit on failed
// authentications, HTTPS with a certificate reloaded from its files, the W3C trace context
// headers, validation and limits, against the real API server with the real operator. Nothing
// may be created on any refusal.
import { X509Certificate } from "node:crypto";
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from "node:fs/promises";
import { request } from "node:http";
import { request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { KubeConfig } from "@kubernetes/client-node";
import { KubeClient } from "../../src/kube/client.js";
import { publishServer } from "../../src/publish/server.js";
import { listen, closeServer } from "../../src/observability/http-servers.js";
import { Metrics } from "../../src/observability/metrics.js";
import { createNamespace, deleteNamespace, kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, delivery, listObjs, publisherToken, secret, serviceAccountToken, subscription, TEST_SECRET } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";
import { TestCa, type Pem } from "../helpers/pki.js";

const PAYLOAD_MARKER = "payload-marker-5e1f0c";

interface Answer {
  status: number;
  headers: Headers;
  body: { error?: string; field?: string; id?: string; deliveries?: Array<{ subscription: string; name: string; result: string }> };
}

describe("publish over HTTP", () => {
  let ns: string;
  let op: TestOperator;
  let receiver: Receiver;
  /** publisher: may create deliveries in ns; its token is issued for the door's audience, hookline. */
  let saToken: string;
  /** The same ServiceAccount's token for the API server's audience: what the door must refuse. */
  let apiToken: string;
  /** A ServiceAccount with no rights, token for hookline. */
  let strangerToken: string;
  /** A ServiceAccount that may create deliveries in every namespace (ClusterRoleBinding), token for hookline. */
  let everywhereToken: string;
  let everywhere: string;
  let base: string;

  const post = async (path: string, body: string | undefined, token?: string, method = "POST"): Promise<Answer> => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
      ...(body !== undefined ? { body } : {}),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? (JSON.parse(text) as Answer["body"]) : {} };
  };
  const events = (namespace: string) => `/v1/namespaces/${namespace}/events`;
  const publish = (body: unknown, token = saToken, namespace = ns) => post(events(namespace), JSON.stringify(body), token);
  const deliveries = () => listObjs("whdel", ns);

  beforeAll(async () => {
    ns = await createNamespace("publish-http", { waitForServiceAccount: true });
    receiver = await Receiver.start(() => 200);
    await apply([
      secret(ns, "signing"),
      subscription(ns, "orders", { url: receiver.url("/orders"), eventTypes: ["order.*"], secretRef: { name: "signing" } }),
      subscription(ns, "paid", { url: receiver.url("/paid"), eventTypes: ["order.paid"], secretRef: { name: "signing" } }),
      subscription(ns, "invoices", { url: receiver.url("/invoices"), eventTypes: ["invoice.paid"], secretRef: { name: "signing" } }),
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "stranger", namespace: ns } },
    ]);
    saToken = await publisherToken(ns, "publisher");
    apiToken = await serviceAccountToken(ns, "publisher", { audience: null });
    strangerToken = await serviceAccountToken(ns, "stranger");
    everywhere = `${ns}-publishes-everywhere`;
    await apply([
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "everywhere", namespace: ns } },
      { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name: everywhere }, rules: [{ apiGroups: ["hookline.dev"], resources: ["webhookdeliveries"], verbs: ["create"] }] },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRoleBinding",
        metadata: { name: everywhere },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: everywhere },
        subjects: [{ kind: "ServiceAccount", name: "everywhere", namespace: ns }],
      },
    ]);
    everywhereToken = await serviceAccountToken(ns, "everywhere");
    // The refusals below fail authentication many times from 127.0.0.1: room for all of them here
    // (the limit has its own test).
    op = await startOperator({ namespaces: [ns], env: { PUBLISH_PORT: "0", PUBLISH_AUTH_FAILURE_BURST: "1000" } });
    base = `http://127.0.0.1:${op.op.publishPort}`;
    await waitFor(() => [...op.op.caches.subscriptions.values()].length === 3, { description: "3 subscriptions in the operator's cache" });
  });
  afterAll(async () => {
    await op?.stop();
    await receiver?.close();
    if (everywhere) await kubectlOk(["delete", "clusterrolebinding,clusterrole", everywhere, "--ignore-not-found"]);
    await deleteNamespace(ns);
  });

  it("refuses callers without a token for its audience with one generic 401, the reason in the log and a metric; without the right 403; bad bodies 400, 413; creating nothing", async () => {
    const event = { type: "order.paid", id: "evt-refused", data: { order: 1 } };
    const failures = async (reason: string) => op.metric("hookline_publish_auth_failures_total", { reason });
    const before = { missing: await failures("missing_token"), invalid: await failures("invalid_token"), audience: await failures("wrong_audience") };

    const noToken = await publish(event, "");
    expect(noToken.status).toBe(401);
    expect(noToken.headers.get("www-authenticate")).toMatch(/^Bearer/);
    expect(noToken.body.error).toMatch(/^authentication failed: send a Kubernetes ServiceAccount token issued for this door as Authorization: Bearer <token> \(kubectl create token SERVICEACCOUNT --audience hookline/);

    // A made-up token, the caller's API credential (a real token for the API server's audience),
    // and a static token of the API server: all the same answer, which tells nothing of why.
    const badToken = await publish(event, "not-a-real-token");
    const forTheApiServer = await publish(event, apiToken);
    const staticToken = await publish(event, inject("unprivilegedToken"));
    for (const r of [badToken, forTheApiServer, staticToken]) {
      expect(r.status).toBe(401);
      expect(r.body).toEqual(noToken.body);
      expect(r.headers.get("www-authenticate")).toBe(noToken.headers.get("www-authenticate"));
    }
    // Which check failed is for the operator's log and metrics.
    expect(await failures("missing_token")).toBe(before.missing + 1);
    expect(await failures("invalid_token")).toBeGreaterThanOrEqual(before.invalid + 1);
    expect(await failures("wrong_audience")).toBe(before.audience + 1);
    const lines = op.logs.filter((l) => l.includes('"msg":"publish authentication failed"'));
    expect(lines.some((l) => l.includes('"reason":"wrong_audience"') && l.includes('"client":"127.0.0.1"'))).toBe(true);
    for (const t of [apiToken, "not-a-real-token", inject("unprivilegedToken")]) expect(op.logs.join("\n")).not.toContain(t);

    const unprivileged = await publish(event, strangerToken);
    expect(unprivileged.status).toBe(403);
    expect(unprivileged.body.error).toMatch(new RegExp(`system:serviceaccount:${ns}:stranger may not create webhookdeliveries.hookline.dev in namespace "${ns}"`));

    // The publisher may create deliveries in its own namespace only.
    const elsewhere = await publish(event, saToken, "default");
    expect(elsewhere.status).toBe(403);

    const malformed = await post(events(ns), '{"type": "order.paid", "data": ', saToken);
    expect(malformed.status).toBe(400);
    expect(malformed.body).toMatchObject({ field: "body" });
    expect(malformed.body.error).toMatch(/not valid JSON/);

    const empty = await post(events(ns), "", saToken);
    expect(empty.status).toBe(400);
    expect(empty.body.error).toMatch(/body is empty/);

    const missingType = await publish({ id: "evt-x", data: {} });
    expect(missingType.status).toBe(400);
    expect(missingType.body).toEqual({ error: "type is required, e.g. order.paid", field: "type" });

    const badType = await publish({ type: "order paid!", data: {} });
    expect(badType.status).toBe(400);
    expect(badType.body).toMatchObject({ field: "type" });
    expect(badType.body.error).toMatch(/type must be a dotted name/);

    const badId = await publish({ type: "order.paid", id: 42, data: {} });
    expect(badId.status).toBe(400);
    expect(badId.body).toMatchObject({ field: "id", error: "id must be a string" });
    // The id is sent as the webhook-id header: what a header value cannot carry is refused here,
    // not found out by every attempt failing.
    for (const id of ["evt-1\r\nX-Injected: 1", "évènement", " evt-1", "evt\u00001"]) {
      const unsendable = await publish({ type: "order.paid", id, data: {} });
      expect(unsendable.status, JSON.stringify(id)).toBe(400);
      expect(unsendable.body).toEqual({ field: "id", error: "id must be printable ASCII with no leading or trailing space: it is sent as the webhook-id header" });
    }

    const noData = await publish({ type: "order.paid" });
    expect(noData.status).toBe(400);
    expect(noData.body).toMatchObject({ field: "data" });

    const typo = await publish({ type: "order.paid", payload: {} });
    expect(typo.status).toBe(400);
    expect(typo.body).toMatchObject({ field: "payload" });
    expect(typo.body.error).toMatch(/unknown field "payload"/);

    // Nested deeper than the limit: refused before anything tries to serialize it.
    for (const depth of [1001, 100_000]) {
      const deep = await post(events(ns), `{"type": "order.paid", "data": ${"[".repeat(depth)}${"]".repeat(depth)}}`, saToken);
      expect(deep.status).toBe(400);
      expect(deep.body).toEqual({ field: "data", error: "data is nested deeper than 1000 levels of arrays and objects" });
    }

    const notObject = await post(events(ns), "[1, 2]", saToken);
    expect(notObject.status).toBe(400);
    expect(notObject.body.error).toMatch(/must be a JSON object/);

    // Over the limit by Content-Length (the body is never read)...
    const big = await publish({ type: "order.paid", data: "x".repeat(300 * 1024) });
    expect(big.status).toBe(413);
    expect(big.body.error).toMatch(/^the request body is 3\d{5} bytes; the limit is 278528 bytes/);
    // ...over it as serialized data within the body limit...
    const bigData = await publish({ type: "order.paid", data: "x".repeat(256 * 1024) });
    expect(bigData.status).toBe(413);
    expect(bigData.body).toMatchObject({ field: "data", limit: 262144 });
    expect(bigData.body.error).toMatch(/data is 262146 bytes serialized as JSON; the limit is 262144 bytes/);
    // ...and streamed without a Content-Length.
    const streamed = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(`${base}${events(ns)}`, { method: "POST", headers: { authorization: `Bearer ${saToken}`, "transfer-encoding": "chunked" } }, (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (c: string) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
      });
      req.on("error", reject);
      req.write(`{"type": "order.paid", "data": "`);
      const chunk = "y".repeat(64 * 1024);
      for (let i = 0; i < 6; i++) req.write(chunk);
      req.end(`"}`);
    });
    expect(streamed.status).toBe(413);
    expect(streamed.body).toMatch(/the request body is more than 278528 bytes/);

    expect(await deliveries()).toEqual([]);
  });

  it("answers 404 for a namespace that does not exist (to a caller allowed there) and for other routes, 405 for other methods", async () => {
    const missing = await publish({ type: "order.paid", data: {} }, everywhereToken, "no-such-namespace-xyz");
    expect(missing.status).toBe(404);
    expect(missing.body.error).toBe('namespace "no-such-namespace-xyz" not found');
    // A caller not allowed there learns nothing about it.
    expect((await publish({ type: "order.paid", data: {} }, saToken, "no-such-namespace-xyz")).status).toBe(403);
    // A namespace the operator does not watch.
    const unwatched = await publish({ type: "order.paid", data: {} }, everywhereToken, "default");
    expect(unwatched.status).toBe(404);
    expect(unwatched.body.error).toMatch(/not watched by this operator/);

    expect((await post("/v1/events", "{}", saToken)).status).toBe(404);
    const get = await post(events(ns), undefined, saToken, "GET");
    expect(get.status).toBe(405);
    expect(get.headers.get("allow")).toBe("POST");
    expect(await deliveries()).toEqual([]);
  });

  it("accepts an authorized ServiceAccount (202): the deliveries exist and are delivered", async () => {
    const accepted = await publish({ type: "order.paid", id: "evt-http-1", data: { order: 1001, marker: PAYLOAD_MARKER } });
    expect(accepted.status).toBe(202);
    expect(accepted.body).toEqual({
      id: "evt-http-1",
      namespace: ns,
      type: "order.paid",
      deliveries: [
        { subscription: "orders", name: "evt-http-1.orders", result: "created" },
        { subscription: "paid", name: "evt-http-1.paid", result: "created" },
      ],
      skipped: [],
    });
    await waitFor(async () => {
      const items = await deliveries();
      return items.length === 2 && items.every((d) => d.status?.phase === "Succeeded");
    }, { description: "both deliveries Succeeded" });
    const got = await receiver.waitForRequests(2);
    expect(got.map((r) => r.path).sort()).toEqual(["/orders", "/paid"]);
    for (const r of got) {
      expect(Receiver.verify(r, TEST_SECRET)).toMatchObject({ id: "evt-http-1", type: "order.paid", data: { order: 1001, marker: PAYLOAD_MARKER } });
    }

    // Again with the same id: nothing new.
    const again = await publish({ type: "order.paid", id: "evt-http-1", data: { order: 1001, marker: PAYLOAD_MARKER } });
    expect(again.status).toBe(202);
    expect(again.body.deliveries!.map((d) => d.result)).toEqual(["existing", "existing"]);
    // Without an id: one is generated and returned.
    const generated = await publish({ type: "invoice.paid", data: null });
    expect(generated.status).toBe(202);
    expect(generated.body.deliveries).toEqual([{ subscription: "invoices", name: `${generated.body.id}.invoices`, result: "created" }]);
    expect(await deliveries()).toHaveLength(3);
  });

  it("an id reused for another event: 409 to a caller who may read deliveries; a caller with only create gets `existing` and learns nothing of the other event", async () => {
    // Another producer's event, which the publisher may not read: its type and data are not the publisher's business.
    const secretData = { card: "4111-secret-7c1d" };
    await apply({ ...(delivery(ns, "evt-theirs.orders", "orders", { eventType: "order.refunded", eventId: "evt-theirs", payload: secretData }) as object) });
    // A reader: create and get.
    await apply([
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "reader", namespace: ns } },
      { apiVersion: "rbac.authorization.k8s.io/v1", kind: "Role", metadata: { name: "reader", namespace: ns }, rules: [{ apiGroups: ["hookline.dev"], resources: ["webhookdeliveries"], verbs: ["create", "get"] }] },
      { apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding", metadata: { name: "reader", namespace: ns }, roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "reader" }, subjects: [{ kind: "ServiceAccount", name: "reader", namespace: ns }] },
    ]);
    const readerToken = await serviceAccountToken(ns, "reader");
    const theirs = () => listObjs("whdel", ns).then((items) => items.filter((d) => (d.spec as { eventId?: string }).eventId === "evt-theirs"));

    // The publisher (create only) tries the id with a type and with data: each answer is the one a
    // retry of the same event gets, so it cannot tell a match from a mismatch (no oracle of the
    // other event's type, subscription or data); nothing of theirs is changed.
    const guesses = [{ type: "order.paid", data: {} }, { type: "order.refunded", data: secretData }, { type: "order.refunded", data: { card: "0000" } }];
    const answers: Answer[] = [];
    for (const guess of guesses) {
      const r = await publish({ ...guess, id: "evt-theirs" });
      expect(r.status, JSON.stringify(guess)).toBe(202);
      expect(r.body.deliveries!.find((d) => d.subscription === "orders")).toEqual({ subscription: "orders", name: "evt-theirs.orders", result: "existing" });
      answers.push(r);
    }
    // The right data and wrong data get the very same answer.
    expect(answers[2]!.body).toEqual(answers[1]!.body);
    const stored = (await theirs()).find((d) => d.metadata.name === "evt-theirs.orders")!;
    expect(stored.spec).toMatchObject({ eventType: "order.refunded", payload: secretData });

    // The reader may read the delivery anyway: it is told the id was used for another event.
    const conflict = await publish({ type: "order.refunded", id: "evt-theirs", data: { card: "0000" } }, readerToken);
    expect(conflict.status).toBe(409);
    expect(conflict.body).toMatchObject({ field: "id", delivery: "evt-theirs.orders" });
    expect(conflict.body.error).toMatch(/was already published with a different data/);
    const same = await publish({ type: "order.refunded", id: "evt-theirs", data: secretData }, readerToken);
    expect(same.status).toBe(202);
    expect(same.body.deliveries).toEqual([{ subscription: "orders", name: "evt-theirs.orders", result: "existing" }]);
  });

  it("reviews a token once for a burst of requests", async () => {
    const reviews = async () => {
      const tr = await op.apiRequests("tokenreviews");
      const sar = await op.apiRequests("subjectaccessreviews");
      return (tr.create ?? 0) + (sar.create ?? 0);
    };
    const token = await serviceAccountToken(ns, "publisher");
    const before = await reviews();
    const burst = await Promise.all(Array.from({ length: 10 }, (_, i) => publish({ type: "refund.issued", id: `evt-burst-${i}`, data: {} }, token)));
    expect(burst.map((r) => r.status)).toEqual(Array(10).fill(202));
    expect((await reviews()) - before).toBe(2); // one TokenReview + one SubjectAccessReview
  });

  it("a caller with a valid token and no rights costs at most 10 SubjectAccessReviews (then 10 a minute) however many namespaces it tries, answered 429 past them, while a rightful caller publishes", async () => {
    await apply({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "drifter", namespace: ns } });
    const drifter = await serviceAccountToken(ns, "drifter");
    const sars = async () => (await op.apiRequests("subjectaccessreviews")).create ?? 0;
    const throttled = () => op.metric("hookline_publish_authz_throttled_total");
    const before = { sars: await sars(), throttled: await throttled() };
    const started = Date.now();
    const answers: Answer[] = [];
    const published: Answer[] = [];
    // 60 namespace names, most of which do not exist: each would be a new question to the API server.
    for (let batch = 0; batch < 6; batch++) {
      const tries = Array.from({ length: 10 }, (_, i) => publish({ type: "order.paid", data: {} }, drifter, `nowhere-${batch}-${i}`));
      const rightful = publish({ type: "invoice.paid", id: `evt-meanwhile-${batch}`, data: {} });
      answers.push(...(await Promise.all(tries)));
      published.push(await rightful);
    }
    // The allowance: 10 at once, and one more per 6 s that passed.
    const allowance = 10 + Math.floor((Date.now() - started) / 6_000);
    expect(published.map((r) => r.status)).toEqual(Array(6).fill(202));
    const forbidden = answers.filter((r) => r.status === 403).length;
    const refused = answers.filter((r) => r.status === 429);
    expect(forbidden).toBeGreaterThanOrEqual(10);
    expect(forbidden).toBeLessThanOrEqual(allowance);
    expect(forbidden + refused.length).toBe(60);
    expect(Number(refused[0]!.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(refused[0]!.body.error).toMatch(new RegExp(`^too many refused authorizations for system:serviceaccount:${ns}:drifter; retry in \\d+ s`));
    // One question per 403 (every name differs), and at most one for the publisher (its answer may have expired meanwhile).
    expect((await sars()) - before.sars).toBeLessThanOrEqual(forbidden + 1);
    expect((await throttled()) - before.throttled).toBe(refused.length);
  });

  it("answers 503 while the operator is not ready", async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(inject("kubeconfig"));
    const client = await KubeClient.create(kc);
    const server = publishServer({ client, log: pino({ level: "silent" }), ready: () => ({ ready: false, reason: "caches not synced" }) });
    const port = await listen(server, 0, "127.0.0.1");
    try {
      const res = await fetch(`http://127.0.0.1:${port}${events(ns)}`, { method: "POST", headers: { authorization: `Bearer ${saToken}` }, body: JSON.stringify({ type: "order.paid", data: {} }) });
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).toBe("1");
      expect(((await res.json()) as { error: string }).error).toMatch(/not ready: caches not synced/);
    } finally {
      await closeServer(server);
      await client.destroy();
    }
  });

  it("never logs tokens or payloads", () => {
    const all = op.logs.join("\n");
    for (const t of [saToken, apiToken, strangerToken, everywhereToken, inject("unprivilegedToken")]) expect(all).not.toContain(t);
    expect(all).not.toContain(PAYLOAD_MARKER);
    expect(op.logs.some((l) => l.includes('"msg":"event published"') && l.includes("system:serviceaccount:"))).toBe(true);
  });

  it("stores a body whose multi-byte characters are split across chunks byte-exactly, and refuses a body that is not UTF-8 (400)", async () => {
    const postChunks = (parts: Buffer[]) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(`${base}${events(ns)}`, { method: "POST", headers: { authorization: `Bearer ${saToken}`, "content-type": "application/json", "transfer-encoding": "chunked" } }, (res) => {
          let text = "";
          res.setEncoding("utf8").on("data", (c: string) => (text += c));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
        });
        req.on("error", reject);
        void (async () => {
          for (const part of parts) {
            req.write(part);
            // A gap so each part reaches the server as its own chunk.
            await new Promise((r) => setTimeout(r, 50));
          }
          req.end();
        })();
      });
    const text = "Zoë 😀 日本語 Ωμέγα שלום";
    const body = Buffer.from(JSON.stringify({ type: "invoice.paid", id: "evt-utf8-http", data: { text } }), "utf8");
    // Cut inside the 2-byte "ë" and inside the 4-byte emoji.
    const cuts = [0, body.indexOf(Buffer.from("ë")) + 1, body.indexOf(Buffer.from("😀")) + 2, body.length];
    const accepted = await postChunks(cuts.slice(1).map((end, i) => body.subarray(cuts[i], end)));
    expect(accepted.status, accepted.body).toBe(202);
    const stored = (await deliveries()).find((d) => d.metadata.name === "evt-utf8-http.invoices");
    const got = (stored?.spec.payload as { text?: string } | undefined)?.text ?? "";
    expect(Buffer.from(got, "utf8").equals(Buffer.from(text, "utf8")), got).toBe(true);

    // Latin-1 "Zoë" (0xEB alone is not UTF-8): refused, not stored with U+FFFD.
    const latin1 = Buffer.concat([Buffer.from('{"type": "invoice.paid", "id": "evt-latin1", "data": "Zo'), Buffer.from([0xeb]), Buffer.from('"}')]);
    const refused = await postChunks([latin1]);
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.body)).toMatchObject({ field: "body", error: "the body is not valid UTF-8; send JSON encoded as UTF-8" });
    expect((await deliveries()).some((d) => d.metadata.name.startsWith("evt-latin1"))).toBe(false);
  });
  it("stores the W3C traceparent and tracestate headers on every delivery and sends them with each attempt; refuses invalid ones (400) naming the header", async () => {
    const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const withHeaders = (body: unknown, headers: Record<string, string | string[]>) =>
      new Promise<{ status: number; body: Answer["body"] }>((resolve, reject) => {
        const req = request(`${base}${events(ns)}`, { method: "POST", headers: { authorization: `Bearer ${saToken}`, "content-type": "application/json", ...headers } }, (res) => {
          let text = "";
          res.setEncoding("utf8").on("data", (c: string) => (text += c));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Answer["body"] }));
        });
        req.on("error", reject);
        req.end(JSON.stringify(body));
      });

    // Two tracestate header fields are one list (W3C); optional whitespace is dropped.
    const ok = await withHeaders({ type: "invoice.paid", id: "evt-traced", data: {} }, { traceparent, tracestate: ["rojo=00f067aa0ba902b7 ", " congo=t61rcWkgMzE"] });
    expect(ok.status).toBe(202);
    const stored = (await deliveries()).find((d) => d.metadata.name === "evt-traced.invoices");
    expect(stored?.spec.traceContext).toEqual({ traceparent, tracestate: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE" });
    // Tracing is off in this operator: the producer's context is sent as it is.
    const sent = await waitFor(() => receiver.requests.find((r) => r.headers["webhook-id"] === "evt-traced"), { description: "the traced event delivered" });
    expect(sent.headers.traceparent).toBe(traceparent);
    expect(sent.headers.tracestate).toBe("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");

    // The longest tracestate W3C allows (32 entries of 256-character keys and values, 16 447
    // characters) is read whole and kept within 512 characters by whole entries.
    const longest = Array.from({ length: 32 }, (_, i) => `${String(i).padStart(2, "0")}${"k".repeat(254)}=${"v".repeat(256)}`);
    expect(longest.join(",").length).toBe(16_447);
    const big = await withHeaders({ type: "invoice.paid", id: "evt-traced-longest", data: {} }, { traceparent, tracestate: longest.join(",") });
    expect(big.status).toBe(202);
    // Entries longer than 128 characters go first: none of these fits.
    expect((await deliveries()).find((d) => d.metadata.name === "evt-traced-longest.invoices")?.spec.traceContext).toEqual({ traceparent });
    const mixed = await withHeaders({ type: "invoice.paid", id: "evt-traced-mixed", data: {} }, { traceparent, tracestate: [...longest.slice(0, 15), "small=1", ...longest.slice(15, 31)].join(",") });
    expect(mixed.status).toBe(202);
    expect((await deliveries()).find((d) => d.metadata.name === "evt-traced-mixed.invoices")?.spec.traceContext).toEqual({ traceparent, tracestate: "small=1" });
    // Exactly 512 characters are kept whole.
    const full = `a=${"v".repeat(254)},b=${"v".repeat(253)}`;
    expect((await withHeaders({ type: "invoice.paid", id: "evt-traced-512", data: {} }, { traceparent, tracestate: full })).status).toBe(202);
    expect((await deliveries()).find((d) => d.metadata.name === "evt-traced-512.invoices")?.spec.traceContext).toEqual({ traceparent, tracestate: full });

    const cases: Array<[Record<string, string | string[]>, string, RegExp]> = [
      [{ traceparent: traceparent.toUpperCase() }, "traceparent", /hex digits must be lowercase/],
      [{ traceparent: traceparent.replace(/^00/, "ff") }, "traceparent", /version ff is forbidden/],
      [{ traceparent: traceparent.replace(/-01$/, "-ff") }, "traceparent", /reserved bits/],
      [{ traceparent: [traceparent, traceparent] }, "traceparent", /one traceparent header/],
      [{ traceparent, tracestate: "rojo=1,rojo=2" }, "tracestate", /appears twice/],
      [{ traceparent, tracestate: Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(",") }, "tracestate", /33 entries/],
      [{ tracestate: "rojo=1" }, "tracestate", /needs a traceparent/],
    ];
    for (const [headers, field, why] of cases) {
      const r = await withHeaders({ type: "invoice.paid", id: "evt-trace-refused", data: {} }, headers);
      expect(r.status, JSON.stringify(headers).slice(0, 100)).toBe(400);
      expect(r.body.field).toBe(field);
      expect(r.body.error).toMatch(why);
    }
    expect((await deliveries()).some((d) => d.metadata.name.startsWith("evt-trace-refused"))).toBe(false);
  });
});

describe("publish over HTTP: failed authentications are limited per client address", () => {
  let ns: string;
  let token: string;

  beforeAll(async () => {
    ns = await createNamespace("publish-limit");
    token = await publisherToken(ns, "publisher");
  });
  afterAll(() => deleteNamespace(ns));

  it("answers 429 with Retry-After, without a TokenReview, once an address has failed too often; a token it already knows to be valid still publishes", async () => {
    let now = 1_000_000;
    let tokenReviews = 0;
    const kc = new KubeConfig();
    kc.loadFromFile(inject("kubeconfig"));
    const client = await KubeClient.create(kc, { observer: { observe: (verb, resource) => void (resource === "tokenreviews" && verb === "create" && tokenReviews++) } });
    const metrics = new Metrics({ defaultMetrics: false });
    const server = publishServer({
      client,
      log: pino({ level: "silent" }),
      ready: () => ({ ready: true }),
      subscriptions: () => [],
      watchNamespaces: [ns],
      authFailures: { burst: 3, perMinute: 6 },
      metrics: metrics.publishDoor,
      now: () => now,
    });
    const port = await listen(server, 0, "127.0.0.1");
    const post = async (bearer: string | undefined) => {
      const res = await fetch(`http://127.0.0.1:${port}/v1/namespaces/${ns}/events`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(bearer ? { authorization: `Bearer ${bearer}` } : {}) },
        body: JSON.stringify({ type: "order.paid", data: {} }),
      });
      return { status: res.status, retryAfter: res.headers.get("retry-after"), body: (await res.json()) as { error: string } };
    };
    const counter = async (name: string, labels: Record<string, string> = {}) => {
      const values = (await metrics.registry.getSingleMetric(name)!.get()).values;
      return values.filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l)).reduce((n, v) => n + v.value, 0);
    };
    try {
      expect((await post(token)).status).toBe(202);
      const reviewed = tokenReviews;

      // Three failures are allowed at once: each costs one TokenReview.
      for (let i = 0; i < 3; i++) expect((await post(`made-up-token-${i}`)).status).toBe(401);
      expect(tokenReviews - reviewed).toBe(3);
      // Then the address waits, whatever it sends, and the API server is not asked.
      for (const bearer of ["made-up-token-4", undefined, "made-up-token-0"]) {
        const throttled = await post(bearer);
        expect(throttled.status).toBe(429);
        expect(throttled.retryAfter).toBe("10");
        expect(throttled.body.error).toBe("too many failed authentications from your address; retry in 10 s with a valid token");
      }
      expect(tokenReviews - reviewed).toBe(3);
      // A token already reviewed valid is not held back (a service behind the same address keeps publishing)...
      expect((await post(token)).status).toBe(202);
      // ...a new one would need a review, so it waits too.
      const fresh = await serviceAccountToken(ns, "publisher");
      expect((await post(fresh)).status).toBe(429);
      expect(tokenReviews - reviewed).toBe(3);

      // One failure's worth refills in 10 s (6 a minute): the new token is reviewed and accepted,
      // and what it took is given back, so the next made-up token still gets a 401 and a review.
      now += 10_000;
      expect((await post(fresh)).status).toBe(202);
      expect((await post("made-up-token-5")).status).toBe(401);
      expect(tokenReviews - reviewed).toBe(5);
      expect((await post("made-up-token-6")).status).toBe(429);

      expect(await counter("hookline_publish_auth_throttled_total")).toBe(5);
      expect(await counter("hookline_publish_auth_failures_total", { reason: "invalid_token" })).toBe(4);
    } finally {
      await closeServer(server);
      await client.destroy();
    }
  });
});

/** A folder laid out as the kubelet writes a Secret volume: the files are links through `..data`, swapped atomically. */
class SecretVolume {
  private n = 0;
  private constructor(readonly dir: string) {}

  static async create(files: Record<string, string>): Promise<SecretVolume> {
    const v = new SecretVolume(await mkdtemp(join(tmpdir(), "hookline-secret-volume-")));
    await v.write(files);
    for (const name of Object.keys(files)) await symlink(join("..data", name), join(v.dir, name));
    return v;
  }

  path(name: string): string {
    return join(this.dir, name);
  }

  /** A new timestamped folder, then `..data` renamed over: readers see the old files or the new ones, never a mix. */
  async write(files: Record<string, string>): Promise<void> {
    const version = `..${Date.now()}_${this.n++}`;
    await mkdir(join(this.dir, version));
    for (const [name, text] of Object.entries(files)) await writeFile(join(this.dir, version, name), text);
    await symlink(version, join(this.dir, "..data_tmp"));
    await rename(join(this.dir, "..data_tmp"), join(this.dir, "..data"));
  }

  close(): Promise<void> {
    return rm(this.dir, { recursive: true, force: true });
  }
}

describe("publish over HTTPS", () => {
  let ns: string;
  let token: string;
  let ca: TestCa;
  let first: Pem;
  let renewed: Pem;
  let volume: SecretVolume;
  let op: TestOperator;

  const fingerprint = (pem: Pem) => new X509Certificate(pem.cert).fingerprint256;
  /** The certificate the door presents now. */
  const served = () =>
    new Promise<string>((resolve, reject) => {
      const socket = tlsConnect({ host: "127.0.0.1", port: op.op.publishPort!, ca: ca.cert }, () => {
        resolve(socket.getPeerCertificate().fingerprint256);
        socket.end();
      });
      socket.on("error", reject);
    });
  const publishOverHttps = () =>
    new Promise<number>((resolve, reject) => {
      const req = httpsRequest(
        { host: "127.0.0.1", port: op.op.publishPort!, path: `/v1/namespaces/${ns}/events`, method: "POST", ca: ca.cert, agent: false, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" } },
        (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode ?? 0));
        },
      );
      req.on("error", reject);
      req.end(JSON.stringify({ type: "order.paid", data: {} }));
    });

  beforeAll(async () => {
    ns = await createNamespace("publish-tls");
    token = await publisherToken(ns, "publisher");
    ca = await TestCa.create();
    first = await ca.issue("hookline-publish-1", "server");
    renewed = await ca.issue("hookline-publish-2", "server");
    volume = await SecretVolume.create({ "tls.crt": first.cert, "tls.key": first.key });
    op = await startOperator({ namespaces: [ns], env: { PUBLISH_PORT: "0", PUBLISH_TLS_CERT_FILE: volume.path("tls.crt"), PUBLISH_TLS_KEY_FILE: volume.path("tls.key") } });
  });
  afterAll(async () => {
    await op?.stop();
    await volume?.close();
    await ca?.close();
    await deleteNamespace(ns);
  });

  it("serves the door over HTTPS from a kubernetes.io/tls Secret's files, and a renewed certificate without a restart; a broken pair is never served", async () => {
    expect(await served()).toBe(fingerprint(first));
    expect(await publishOverHttps()).toBe(202);
    // Plain HTTP to the HTTPS port gets no answer from the door.
    await expect(fetch(`http://127.0.0.1:${op.op.publishPort}/v1/namespaces/${ns}/events`, { method: "POST", body: "{}" }).then((r) => r.status)).rejects.toThrow();

    // A renewal written half-right (the new certificate with the old key) is not used.
    await volume.write({ "tls.crt": renewed.cert, "tls.key": first.key });
    await waitFor(() => op.logs.some((l) => l.includes("publish door certificate not reloaded") && l.includes("is not the key of the certificate")), { description: "the mismatched pair refused" });
    expect(await served()).toBe(fingerprint(first));

    await volume.write({ "tls.crt": renewed.cert, "tls.key": renewed.key });
    await waitFor(async () => (await served()) === fingerprint(renewed), { description: "the renewed certificate served" });
    expect(await publishOverHttps()).toBe(202);
    expect(op.logs.some((l) => l.includes('"msg":"publish door certificate reloaded"') && l.includes(fingerprint(renewed)))).toBe(true);
    // Never a key in the log.
    const all = op.logs.join("\n");
    for (const pem of [first, renewed]) expect(all).not.toContain(pem.key.split("\n")[1]!);
  });

  it("refuses to start when the certificate files cannot be used, naming the variable", async () => {
    const config = { namespaces: [ns], env: { PUBLISH_PORT: "0", PUBLISH_TLS_CERT_FILE: volume.path("tls.crt"), PUBLISH_TLS_KEY_FILE: join(volume.dir, "no-such.key") } };
    await expect(startOperator(config)).rejects.toThrow(/^PUBLISH_TLS_KEY_FILE: cannot read .*no-such\.key \(ENOENT\)/);
  });
});
