// Reflector behaviour that a real API server does not show on demand: an answer the server gives
// only when something is wrong (a watch closed at once, with no events), or a chunking it chooses
// itself (an event's bytes split inside a multi-byte character). The normal paths (list,
// watch, resume after a cut) are tested against the real API server in
// test/integration/reflector.test.ts.
import { createServer, type Server } from "node:http";
import { KubeConfig } from "@kubernetes/client-node";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createLogger } from "../observability/logger.js";
import { KubeClient } from "./client.js";
import { DEFERRED, Reflector, type RawItem } from "./reflector.js";

let server: Server | undefined;

async function clientFor(srv: Server): Promise<KubeClient> {
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "c", server: `http://127.0.0.1:${(srv.address() as { port: number }).port}`, skipTLSVerify: true }],
    users: [{ name: "u", token: "t" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  return KubeClient.create(kc);
}
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

describe("Reflector", () => {
  it("tells the handler when each list started: no later than the API server got its first page request", async () => {
    const listRequests: number[] = [];
    server = createServer((req, res) => {
      const url = new URL(req.url ?? "/", "http://x");
      res.writeHead(200, { "content-type": "application/json" });
      if (url.searchParams.get("watch")) return; // held open
      listRequests.push(Date.now());
      setTimeout(() => res.end(JSON.stringify({ kind: "ConfigMapList", metadata: { resourceVersion: "5" }, items: [] })), 100);
    });
    const client = await clientFor(server);
    const listed: number[] = [];
    const reflector = new Reflector({
      client,
      name: "configmaps",
      path: "/api/v1/namespaces/a/configmaps",
      transform: (item) => item,
      handler: { add: () => undefined, update: () => undefined, delete: () => undefined, listed: (at) => listed.push(at) },
      log: createLogger({ level: "silent" }),
    });
    const before = Date.now();
    reflector.start();
    try {
      await vi.waitFor(() => expect(listed).toHaveLength(1), { timeout: 10_000, interval: 10 });
      expect(listed[0]).toBeGreaterThanOrEqual(before);
      expect(listed[0]).toBeLessThanOrEqual(listRequests[0]!);
    } finally {
      await reflector.stop();
      await client.destroy();
    }
  });

  it("treats a watch closed at once with no events as a failure (backed off), not as a normal end", async () => {
    let watches = 0;
    server = createServer((req, res) => {
      const url = new URL(req.url ?? "/", "http://x");
      res.writeHead(200, { "content-type": "application/json" });
      if (url.searchParams.get("watch")) {
        watches++;
        res.end();
      } else res.end(JSON.stringify({ kind: "ConfigMapList", metadata: { resourceVersion: "5" }, items: [] }));
    });
    const client = await clientFor(server);
    const health: boolean[] = [];
    const reflector = new Reflector({
      client,
      name: "configmaps",
      path: "/api/v1/namespaces/a/configmaps",
      transform: (item) => item,
      handler: { add: () => undefined, update: () => undefined, delete: () => undefined },
      log: createLogger({ level: "silent" }),
      backoff: { initialMs: 60_000, maxMs: 60_000 },
      onHealth: (h) => health.push(h),
    });
    reflector.start();
    try {
      await vi.waitFor(() => expect(health.length, "the reflector reports the failure").toBeGreaterThan(0), { timeout: 10_000, interval: 10 });
      expect(health).toEqual([false]);
      // Waiting out a 30-60 s backoff, not reconnecting in a loop.
      expect(watches).toBe(1);
    } finally {
      await reflector.stop();
      await client.destroy();
    }
  });

  it("decodes a watch event whose multi-byte characters are split across chunks byte-exactly", async () => {
    const text = "Zoë 😀 日本語 Ωμέγα שלום";
    const event = Buffer.from(`${JSON.stringify({ type: "ADDED", object: { kind: "ConfigMap", metadata: { name: "a", namespace: "a", resourceVersion: "6" }, data: { text } } })}\n`, "utf8");
    // Cut inside the 4-byte emoji and inside the 2-byte "ë": each part on its own chunk.
    const emoji = event.indexOf(Buffer.from("😀"));
    const eUmlaut = event.indexOf(Buffer.from("ë"));
    const cuts = [0, eUmlaut + 1, emoji + 2, event.length];
    server = createServer((req, res) => {
      const url = new URL(req.url ?? "/", "http://x");
      res.writeHead(200, { "content-type": "application/json" });
      if (!url.searchParams.get("watch")) return res.end(JSON.stringify({ kind: "ConfigMapList", metadata: { resourceVersion: "5" }, items: [] }));
      void (async () => {
        for (let i = 0; i + 1 < cuts.length; i++) {
          res.write(event.subarray(cuts[i], cuts[i + 1]));
          // A gap so each part reaches the client as its own chunk (Node's server sends at once: noDelay).
          await new Promise((r) => setTimeout(r, 50));
        }
      })();
    });
    const client = await clientFor(server);
    const added: Array<Record<string, unknown>> = [];
    const reflector = new Reflector({
      client,
      name: "configmaps",
      path: "/api/v1/namespaces/a/configmaps",
      transform: (item) => item,
      handler: { add: (o) => added.push(o), update: () => undefined, delete: () => undefined },
      log: createLogger({ level: "silent" }),
    });
    reflector.start();
    try {
      await vi.waitFor(() => expect(added).toHaveLength(1), { timeout: 10_000, interval: 10 });
      const got = (added[0]!.data as { text: string }).text;
      expect(got).not.toContain("\uFFFD");
      expect(Buffer.from(got, "utf8").equals(Buffer.from(text, "utf8"))).toBe(true);
    } finally {
      await reflector.stop();
      await client.destroy();
    }
  });

  it("hands a large event's deferred member to transform as its JSON bytes, unparsed, split across chunks byte-exactly; keeps no bytes; a small event whole", async () => {
    const payload = { text: "Zoë 😀 日本語".repeat(2_000), nested: [{ "}": "]\"" }] };
    const line = (name: string, p: unknown) => `${JSON.stringify({ type: "ADDED", object: { metadata: { name, namespace: "a", resourceVersion: "6" }, spec: { eventType: "t", payload: p }, status: { payload: "not this one" } } })}\n`;
    const big = Buffer.from(line("big", payload), "utf8");
    const emoji = big.indexOf(Buffer.from("😀"));
    const events = [big.subarray(0, emoji + 2), big.subarray(emoji + 2), Buffer.from(line("small", { n: 1 }), "utf8")];
    server = createServer((req, res) => {
      const url = new URL(req.url ?? "/", "http://x");
      res.writeHead(200, { "content-type": "application/json" });
      if (!url.searchParams.get("watch")) return res.end(JSON.stringify({ kind: "List", metadata: { resourceVersion: "5" }, items: [] }));
      void (async () => {
        for (const part of events) {
          res.write(part);
          await new Promise((r) => setTimeout(r, 50));
        }
      })();
    });
    const client = await clientFor(server);
    const seen: Array<{ name: string; spec: unknown; deferred?: string }> = [];
    const added: RawItem[] = [];
    const reflector = new Reflector<RawItem>({
      client,
      name: "deliveries",
      path: "/apis/hookline.dev/v1alpha1/namespaces/a/webhookdeliveries",
      deferred: { path: ["spec", "payload"], minBytes: 1024 },
      transform: (item) => {
        seen.push({ name: item.metadata.name, spec: structuredClone(item.spec), ...(item[DEFERRED] ? { deferred: item[DEFERRED].toString("utf8") } : {}) });
        return item;
      },
      handler: { add: (o) => added.push(o), update: () => undefined, delete: () => undefined },
      log: createLogger({ level: "silent" }),
    });
    reflector.start();
    try {
      await vi.waitFor(() => expect(added).toHaveLength(2), { timeout: 10_000, interval: 10 });
      expect(seen[0]).toEqual({ name: "big", spec: { eventType: "t" }, deferred: JSON.stringify(payload) });
      expect(seen[1]).toEqual({ name: "small", spec: { eventType: "t", payload: { n: 1 } } });
      expect(added.every((o) => o[DEFERRED] === undefined)).toBe(true);
      expect((added[0]!.status as { payload: string }).payload).toBe("not this one");
    } finally {
      await reflector.stop();
      await client.destroy();
    }
  });

  it("decodes a list page whose multi-byte characters are split across chunks byte-exactly (KubeClient.request)", async () => {
    const text = "Zoë 😀 日本語 Ωμέγα שלום";
    const page = Buffer.from(JSON.stringify({ kind: "ConfigMapList", metadata: { resourceVersion: "5" }, items: [{ kind: "ConfigMap", metadata: { name: "a", namespace: "a", resourceVersion: "5" }, data: { text } }] }), "utf8");
    const cuts = [0, page.indexOf(Buffer.from("ë")) + 1, page.indexOf(Buffer.from("😀")) + 3, page.length];
    server = createServer((req, res) => {
      const url = new URL(req.url ?? "/", "http://x");
      res.writeHead(200, { "content-type": "application/json" });
      if (url.searchParams.get("watch")) return; // held open: the list is what is tested
      void (async () => {
        for (let i = 0; i + 1 < cuts.length; i++) {
          res.write(page.subarray(cuts[i], cuts[i + 1]));
          await new Promise((r) => setTimeout(r, 50));
        }
        res.end();
      })();
    });
    const client = await clientFor(server);
    const reflector = new Reflector({
      client,
      name: "configmaps",
      path: "/api/v1/namespaces/a/configmaps",
      transform: (item) => item,
      handler: { add: () => undefined, update: () => undefined, delete: () => undefined },
      log: createLogger({ level: "silent" }),
    });
    reflector.start();
    try {
      await reflector.waitForSync(AbortSignal.timeout(10_000));
      const got = (reflector.store.get("a/a")!.data as { text: string }).text;
      expect(Buffer.from(got, "utf8").equals(Buffer.from(text, "utf8"))).toBe(true);
    } finally {
      await reflector.stop();
      await client.destroy();
    }
  });
});
