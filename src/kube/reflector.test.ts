// Reflector behaviour that a real API server does not show on demand: an answer the server gives
// only when something is wrong (a watch closed at once, with no events). The normal paths (list,
// watch, resume after a cut) are tested against the real API server in
// test/integration/reflector.test.ts.
import { createServer, type Server } from "node:http";
import { KubeConfig } from "@kubernetes/client-node";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createLogger } from "../observability/logger.js";
import { KubeClient } from "./client.js";
import { Reflector } from "./reflector.js";

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

describe("Reflector", () => {
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
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: `http://127.0.0.1:${(server.address() as { port: number }).port}`, skipTLSVerify: true }],
      users: [{ name: "u", token: "t" }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    const client = await KubeClient.create(kc);
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
});
