import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { freePorts, saysPortTaken } from "./ports.js";

describe("saysPortTaken", () => {
  it("knows Node's EADDRINUSE, as a real second listen on a port reports it", async () => {
    const [port] = await freePorts(1);
    const first = createServer();
    await new Promise<void>((resolve) => first.listen(port, "127.0.0.1", resolve));
    try {
      const err = await new Promise<Error>((resolve) => createServer().once("error", resolve).listen(port, "127.0.0.1"));
      expect(saysPortTaken(err.message)).toBe(true);
      expect(saysPortTaken(JSON.stringify({ err: { code: (err as NodeJS.ErrnoException).code } }))).toBe(true);
    } finally {
      await new Promise((resolve) => first.close(resolve));
    }
  });

  it.each([
    "[FTL] Error listening on port: 127.0.0.1:4222, \"listen tcp 127.0.0.1:4222: bind: address already in use\"",
    '{"level":"fatal","msg":"listener failed","error":"listen tcp 127.0.0.1:2379: bind: address already in use"}',
    "E1206 failed to listen on 127.0.0.1:6443: listen tcp 127.0.0.1:6443: bind: address already in use",
    "port 4222 is already in use (the cluster port of nats-server node 2)",
  ])("knows %s", (text) => {
    expect(saysPortTaken(text)).toBe(true);
  });

  it.each([
    "listen tcp 10.9.9.9:6443: bind: cannot assign requested address",
    "open /var/lib/etcd/member: permission denied",
    "nats-server exited with code 1",
  ])("does not take %s for a taken port", (text) => {
    expect(saysPortTaken(text)).toBe(false);
  });
});
