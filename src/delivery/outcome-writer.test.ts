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
import type { OutcomeResult } from "../core/attempt/outcome.js";

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

/** An API server answering every request with `status`, recording what it got. */
function writerAnswering(status: number, seen: Array<{ method?: string; body: string }>) {
  const answer = status === 200 ? { kind: "Status", status: "Success" } : { kind: "Status", status: "Failure", code: status, reason: status === 409 ? "Conflict" : "NotFound", message: "x" };
  return writerScripted(() => [status, answer], seen);
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

/** An API server answering each request with `next()` (status, body), recording what it got. */
async function writerScripted(next: () => [number, unknown], seen: Array<{ method?: string; body: string }>) {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString("utf8")));
    req.on("end", () => {
      seen.push({ method: req.method, body });
      const [status, answer] = next();
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(answer));
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

/** The answers in turn; then a 500. */
const inTurn = (answers: Array<[number, unknown]>) => (): [number, unknown] => answers.shift() ?? [500, { kind: "Status", status: "Failure", code: 500, message: "no more answers" }];

describe("OutcomeWriter.write: an outcome computed from a status that moved on", () => {
  const CONFLICT = [409, { kind: "Status", status: "Failure", code: 409, reason: "Conflict", message: "the object has been modified" }] as [number, unknown];
  const attempt = (number: number, outcome: "Failed" | "Succeeded") => ({ number, startedAt: "2026-12-07T20:52:00Z", durationMs: 2, outcome });
  // The copy the attempt was planned from (a new leader's cache behind the API server): attempt #1 failed.
  const stale: DeliveryObject = { ...obj, metadata: { ...obj.metadata, resourceVersion: "3209" }, status: { phase: "Retrying", attempts: 1, lastAttempt: attempt(1, "Failed") } };
  // What the API server holds: another replica recorded attempt #2 (failed) meanwhile.
  const moved: DeliveryObject = { ...obj, metadata: { ...obj.metadata, resourceVersion: "3362" }, status: { phase: "Retrying", attempts: 2, lastAttempt: attempt(2, "Failed") } };
  const next = (outcome: "Failed" | "Succeeded") => (s: DeliveryObject["status"]): OutcomeResult => {
    const number = (s?.lastAttempt?.number ?? 0) + 1;
    return {
      status: { ...s, phase: outcome === "Succeeded" ? "Succeeded" : "Retrying", attempts: (s?.attempts ?? 0) + 1, lastAttempt: attempt(number, outcome) },
      ...(outcome === "Succeeded" ? { final: { phase: "Succeeded", reason: "Delivered", message: "delivered" } } : {}),
    };
  };

  it("records a delivered attempt as the next one, so the event is not sent again (the soak's seed 151283 sent it twice)", async () => {
    const seen: Array<{ method?: string; body: string }> = [];
    const { client, writer } = await writerScripted(inTurn([CONFLICT, [200, moved], [200, { ...moved, metadata: { ...moved.metadata, resourceVersion: "3711" } }]]), seen);
    try {
      const written = await writer.write("shop/d1", stale, next("Succeeded"));
      expect(seen.map((s) => s.method)).toEqual(["PATCH", "GET", "PATCH"]);
      const patch = JSON.parse(seen[2]!.body) as { metadata: { resourceVersion: string }; status: { phase: string; attempts: number; lastAttempt: { number: number } } };
      expect(patch.metadata.resourceVersion).toBe("3362");
      expect(patch.status).toMatchObject({ phase: "Succeeded", attempts: 3, lastAttempt: { number: 3 } });
      expect(written?.final?.phase).toBe("Succeeded");
    } finally {
      await client.destroy();
    }
  });

  it("drops a failed attempt's outcome: the newer attempt's record stands", async () => {
    const seen: Array<{ method?: string; body: string }> = [];
    const { client, writer } = await writerScripted(inTurn([CONFLICT, [200, moved]]), seen);
    try {
      const written = await writer.write("shop/d1", stale, next("Failed"));
      expect(seen.map((s) => s.method)).toEqual(["PATCH", "GET"]);
      expect(written?.obj.status?.lastAttempt?.number).toBe(2);
      expect(written?.final).toBeUndefined();
    } finally {
      await client.destroy();
    }
  });

  it("drops a delivered attempt's outcome on a delivery already final: a dead letter is not rewritten", async () => {
    const seen: Array<{ method?: string; body: string }> = [];
    const dead: DeliveryObject = { ...moved, status: { ...moved.status, phase: "DeadLettered" } };
    const { client, writer } = await writerScripted(inTurn([CONFLICT, [200, dead]]), seen);
    try {
      const written = await writer.write("shop/d1", stale, next("Succeeded"));
      expect(seen.map((s) => s.method)).toEqual(["PATCH", "GET"]);
      expect(written?.obj.status?.phase).toBe("DeadLettered");
      expect(written?.final).toBeUndefined();
    } finally {
      await client.destroy();
    }
  });
});
