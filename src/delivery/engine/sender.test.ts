// The sender against a real HTTP server on 127.0.0.1: a request the HTTP client refuses to build
// (a header it does not allow) comes back as an error with undici's code and a clear reason,
// classified permanent and silent towards the endpoint; nothing reaches the server.
import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { classify, endpointSignal } from "../../core/attempt/classify.js";
import { parseCidrList } from "../../core/request/netguard.js";
import { Sender } from "./sender.js";

let server: Server;
let url: string;
let received = 0;
const sender = new Sender({ allowedNetworks: parseCidrList("127.0.0.0/8") });

beforeAll(async () => {
  server = createServer((req, res) => {
    received++;
    req.resume();
    req.on("end", () => res.end("ok"));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`;
});
afterAll(async () => {
  await sender.destroy();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe("Sender: a request that cannot be built", () => {
  it.each([
    ["Upgrade", { upgrade: "websocket" }, "UND_ERR_INVALID_ARG", "invalid upgrade header"],
    ["Keep-Alive", { "keep-alive": "timeout=5" }, "UND_ERR_INVALID_ARG", "invalid keep-alive header"],
    ["Transfer-Encoding", { "transfer-encoding": "chunked" }, "UND_ERR_INVALID_ARG", "invalid transfer-encoding header"],
    ["Expect", { expect: "100-continue" }, "UND_ERR_NOT_SUPPORTED", "expect header not supported"],
    ["a Content-Length that does not match", { "content-length": "1" }, "UND_ERR_REQ_CONTENT_LENGTH_MISMATCH", "content-length"],
    ["a value with a control character", { "x-tenant": "a\u0007b" }, "UND_ERR_INVALID_ARG", "invalid x-tenant header"],
    ["a value with a line break", { "x-tenant": "a\r\nx-injected: 1" }, "UND_ERR_INVALID_ARG", "invalid x-tenant header"],
    ["a value above U+00FF", { "x-tenant": "\u0100" }, "UND_ERR_INVALID_ARG", "invalid x-tenant header"],
  ])("%s: undici's code, a clear reason, permanent, nothing sent, no endpoint signal", async (_name, headers, code, text) => {
    const before = received;
    const sent = await sender.send({ url, headers: { "content-type": "application/json", ...headers }, body: '{"a":1}', timeoutMs: 5_000 });
    expect(sent).toMatchObject({ kind: "error", code });
    if (sent.kind !== "error") return;
    expect(sent.message).toMatch(/^the request could not be built: /);
    expect(sent.message).toContain(text);
    const c = classify({ kind: "error", code: sent.code, name: sent.code });
    expect(c).toEqual({ verdict: "permanent", reason: "invalid_request" });
    expect(endpointSignal(c)).toBe("none");
    expect(received).toBe(before);
  });

  it("the same sender then delivers a good request", async () => {
    const sent = await sender.send({ url, headers: { "content-type": "application/json", "x-tenant": "acme" }, body: '{"a":1}', timeoutMs: 5_000 });
    expect(sent).toMatchObject({ kind: "response", status: 200 });
  });
});

describe("Sender: the request's deadline and the operator's abort", () => {
  let hanging: Server;
  let hangUrl: string;
  let slowBody: string;
  let hangs = 0;
  beforeAll(async () => {
    hanging = createServer((req, res) => {
      req.resume();
      if (req.url === "/hang") hangs++;
      // /slow-body answers its headers at once and then drips the body, never ending it.
      if (req.url === "/slow-body") {
        res.writeHead(200, { "content-type": "text/plain" });
        const t = setInterval(() => res.write("."), 20);
        res.on("close", () => clearInterval(t));
      }
      // Anything else never answers.
    });
    await new Promise<void>((resolve) => hanging.listen(0, "127.0.0.1", resolve));
    const port = (hanging.address() as { port: number }).port;
    hangUrl = `http://127.0.0.1:${port}/hang`;
    slowBody = `http://127.0.0.1:${port}/slow-body`;
  });
  afterAll(async () => {
    hanging.closeAllConnections();
    await new Promise((resolve) => hanging.close(resolve));
  });

  it("a receiver that never answers ends in a TimeoutError at the deadline", async () => {
    const sent = await sender.send({ url: hangUrl, headers: { "content-type": "application/json" }, body: "{}", timeoutMs: 300 });
    expect(sent).toMatchObject({ kind: "error", code: "TimeoutError", message: "no response within 300ms" });
    expect(sent.durationMs).toBeGreaterThanOrEqual(250);
  });

  it("a response whose body keeps dripping, each chunk inside undici's body timeout, still ends at the deadline", async () => {
    const reading = new Sender({ allowedNetworks: parseCidrList("127.0.0.0/8"), maxResponseBytes: 1 << 20 });
    try {
      const sent = await reading.send({ url: slowBody, headers: { "content-type": "application/json" }, body: "{}", timeoutMs: 400, responseBodyLimit: 1 << 20 });
      expect(sent).toMatchObject({ kind: "error", code: "TimeoutError" });
    } finally {
      await reading.destroy();
    }
  });

  it("the operator's abort interrupts every request in flight under it, and none that already ended", async () => {
    const drain = new AbortController();
    const done = await sender.send({ url, headers: { "content-type": "application/json" }, body: "{}", timeoutMs: 5_000, signal: drain.signal });
    expect(done).toMatchObject({ kind: "response", status: 200 });
    const before = hangs;
    const inFlight = Array.from({ length: 5 }, () => sender.send({ url: hangUrl, headers: { "content-type": "application/json" }, body: "{}", timeoutMs: 30_000, signal: drain.signal }));
    // Abort once the server has all five (the requests are on their way, not queued).
    await expect.poll(() => hangs - before, { timeout: 5_000, interval: 10 }).toBe(5);
    drain.abort(new Error("drain"));
    const results = await Promise.all(inFlight);
    for (const r of results) expect(r).toMatchObject({ kind: "error", code: "HOOKLINE_INTERRUPTED", interrupted: true });
    // Under an aborted signal a new request is interrupted at once.
    const late = await sender.send({ url, headers: { "content-type": "application/json" }, body: "{}", timeoutMs: 5_000, signal: drain.signal });
    expect(late).toMatchObject({ kind: "error", code: "HOOKLINE_INTERRUPTED" });
  });
});
