// The HTTP publish door: authentication (TokenReview), authorization (SubjectAccessReview),
// validation and limits, against the real API server with the real operator. Nothing may be
// created on any refusal.
import { request } from "node:http";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { KubeConfig } from "@kubernetes/client-node";
import { KubeClient } from "../../src/kube/client.js";
import { publishServer } from "../../src/publish/server.js";
import { listen, closeServer } from "../../src/observability/http-servers.js";
import { createNamespace, deleteNamespace, kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, listObjs, secret, subscription, TEST_SECRET } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";

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
  let saToken: string;
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
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "publisher", namespace: ns } },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        metadata: { name: "publish-events", namespace: ns },
        rules: [{ apiGroups: ["hookline.dev"], resources: ["webhookdeliveries"], verbs: ["create"] }],
      },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: "publisher-publishes", namespace: ns },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "publish-events" },
        subjects: [{ kind: "ServiceAccount", name: "publisher", namespace: ns }],
      },
    ]);
    saToken = (await kubectlOk(["create", "token", "publisher", "-n", ns, "--duration=10m"])).trim();
    op = await startOperator({ namespaces: [ns], env: { PUBLISH_PORT: "0" } });
    base = `http://127.0.0.1:${op.op.publishPort}`;
    await waitFor(() => [...op.op.caches.subscriptions.values()].length === 3, { description: "3 subscriptions in the operator's cache" });
  });
  afterAll(async () => {
    await op?.stop();
    await receiver?.close();
    await deleteNamespace(ns);
  });

  it("refuses callers without a valid token (401), without the right (403), and bad bodies (400, 413), creating nothing", async () => {
    const event = { type: "order.paid", id: "evt-refused", data: { order: 1 } };

    const noToken = await publish(event, "");
    expect(noToken.status).toBe(401);
    expect(noToken.headers.get("www-authenticate")).toMatch(/^Bearer/);
    expect(noToken.body.error).toMatch(/authentication required/);

    const badToken = await publish(event, "not-a-real-token");
    expect(badToken.status).toBe(401);
    expect(badToken.body.error).toMatch(/not valid/);

    const unprivileged = await publish(event, inject("unprivilegedToken"));
    expect(unprivileged.status).toBe(403);
    expect(unprivileged.body.error).toMatch(new RegExp(`unprivileged may not create webhookdeliveries.hookline.dev in namespace "${ns}"`));

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
    const missing = await publish({ type: "order.paid", data: {} }, inject("adminToken"), "no-such-namespace-xyz");
    expect(missing.status).toBe(404);
    expect(missing.body.error).toBe('namespace "no-such-namespace-xyz" not found');
    // A caller not allowed there learns nothing about it.
    expect((await publish({ type: "order.paid", data: {} }, saToken, "no-such-namespace-xyz")).status).toBe(403);
    // A namespace the operator does not watch.
    const unwatched = await publish({ type: "order.paid", data: {} }, inject("adminToken"), "default");
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
    // The same id for another event: a conflict, nothing created.
    const conflict = await publish({ type: "order.paid", id: "evt-http-1", data: { order: 9999 } });
    expect(conflict.status).toBe(409);
    expect(conflict.body).toMatchObject({ field: "id" });
    // Without an id: one is generated and returned.
    const generated = await publish({ type: "invoice.paid", data: null });
    expect(generated.status).toBe(202);
    expect(generated.body.deliveries).toEqual([{ subscription: "invoices", name: `${generated.body.id}.invoices`, result: "created" }]);
    expect(await deliveries()).toHaveLength(3);
  });

  it("reviews a token once for a burst of requests", async () => {
    const reviews = async () => {
      const tr = await op.apiRequests("tokenreviews");
      const sar = await op.apiRequests("subjectaccessreviews");
      return (tr.create ?? 0) + (sar.create ?? 0);
    };
    const token = (await kubectlOk(["create", "token", "publisher", "-n", ns, "--duration=10m"])).trim();
    const before = await reviews();
    const burst = await Promise.all(Array.from({ length: 10 }, (_, i) => publish({ type: "refund.issued", id: `evt-burst-${i}`, data: {} }, token)));
    expect(burst.map((r) => r.status)).toEqual(Array(10).fill(202));
    expect((await reviews()) - before).toBe(2); // one TokenReview + one SubjectAccessReview
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
    expect(all).not.toContain(saToken);
    expect(all).not.toContain(inject("unprivilegedToken"));
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
});
