import { createServer } from "node:net";
import type { AddressInfo, Server } from "node:net";
import { describe, expect, it } from "vitest";
import { FREE_PORT_FLOOR, ephemeralPortRange, freePorts, parsePortRange, saysPortTaken } from "./ports.js";

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

describe("freePorts", () => {
  it("chooses below the kernel's ephemeral range, where no outgoing connection or listen(0) takes a port between the choice and the bind", async () => {
    const [low] = ephemeralPortRange();
    const ports = await freePorts(40);
    expect(new Set(ports).size).toBe(40);
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(FREE_PORT_FLOOR);
      expect(port).toBeLessThan(low);
    }
  });

  it("skips a port that is taken", async () => {
    const held = await Promise.all(
      (await freePorts(20)).map(
        (port) =>
          new Promise<Server>((resolve) => {
            const s = createServer();
            s.listen(port, "127.0.0.1", () => resolve(s));
          }),
      ),
    );
    try {
      const taken = new Set(held.map((s) => (s.address() as AddressInfo).port));
      for (let i = 0; i < 20; i++) for (const port of await freePorts(5)) expect(taken.has(port)).toBe(false);
    } finally {
      await Promise.all(held.map((s) => new Promise((resolve) => s.close(resolve))));
    }
  });
});

describe("ephemeralPortRange", () => {
  it("reads Linux's ip_local_port_range, and falls back to Linux's default when the text is not two ports", () => {
    expect(parsePortRange("32768\t60999\n")).toEqual([32768, 60999]);
    expect(parsePortRange("1024 65535")).toEqual([1024, 65535]);
    expect(parsePortRange("")).toEqual([32768, 60999]);
    expect(parsePortRange("60999 32768")).toEqual([32768, 60999]);
    expect(parsePortRange("0 99999")).toEqual([32768, 60999]);
  });
});
