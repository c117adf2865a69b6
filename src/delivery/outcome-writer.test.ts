// The outcome writer's delete (retention.succeeded 0s) against a local HTTP server standing in
// for the API server's DELETE: what the answer means, and that the cache's copy from before the
// delete is never planned from (the soak and the benchmark found a second send from it).
import { createServer, type Server } from "node:http";
import { KubeConfig } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import { KubeClient } from "../kube/client.js";
import { createLogger } from "../observability/logger.js";
import { Expectations } from "../runtime/expectations.js";
import { StatusWriter } from "../kube/status-writer.js";
import { OutcomeWriter } from "./outcome-writer.js";
import type { DeliveryObject } from "./objects.js";

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

async function writerAnswering(status: number, seen: Array<{ method?: string; body: string }>) {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString("utf8")));
    req.on("end", () => {
      seen.push({ method: req.method, body });
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(status === 200 ? { kind: "Status", status: "Success" } : { kind: "Status", status: "Failure", code: status, reason: status === 409 ? "Conflict" : "NotFound", message: "x" }));
    });
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
  const expectations = new Expectations();
  const writer = new OutcomeWriter({ client, statusWriter: new StatusWriter(client, {}), expectations, events: { record: () => undefined }, log: createLogger({ level: "silent" }) });
  return { client, writer, expectations };
}

const obj: DeliveryObject = { metadata: { name: "d1", namespace: "shop", resourceVersion: "41", uid: "u1" }, spec: { subscriptionRef: { name: "acme" }, eventType: "order.paid" } };

describe("OutcomeWriter.deleteAt", () => {
  it("deletes only the version it was given, and the cached copy is not planned from until the watch drops it", async () => {
    const seen: Array<{ method?: string; body: string }> = [];
    const { client, writer, expectations } = await writerAnswering(200, seen);
    try {
      expect(await writer.deleteAt("shop/d1", obj)).toBe("deleted");
      expect(seen[0]!.method).toBe("DELETE");
      expect(JSON.parse(seen[0]!.body)).toMatchObject({ preconditions: { resourceVersion: "41" } });
      // The cache still shows version 41 (Pending): a reconcile now must wait, not attempt again.
      expect(expectations.check("shop/d1", "41")).toBe("wait");
      expectations.observe("shop/d1", undefined); // the watch's DELETED
      expect(expectations.check("shop/d1", undefined)).toBe("ok");
    } finally {
      await client.destroy();
    }
  });

  it.each([
    [409, "changed"],
    [404, "gone"],
  ] as const)("answers %i as %s and expects nothing", async (status, result) => {
    const { client, writer, expectations } = await writerAnswering(status, []);
    try {
      expect(await writer.deleteAt("shop/d1", obj)).toBe(result);
      expect(expectations.check("shop/d1", "41")).toBe("ok");
    } finally {
      await client.destroy();
    }
  });
});
