// Free-port helpers for the local control plane. Everything binds to 127.0.0.1 only.
import { randomInt } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import type { Server } from "node:net";

const HOST = "127.0.0.1";

function listen(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    // exclusive: do not share a handle with a cluster primary; we want the real bind result.
    server.listen({ host: HOST, port, exclusive: true }, () => resolve(server));
  });
}

/** A listener on the port, or undefined when the port is taken (or reserved). */
async function listenIfFree(port: number): Promise<Server | undefined> {
  try {
    return await listen(port);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EADDRINUSE" || code === "EACCES") return undefined;
    throw err;
  }
}

function close(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

/** True when nothing listens on 127.0.0.1:port (we could bind it a moment ago). */
export async function isPortFree(port: number): Promise<boolean> {
  try {
    await close(await listen(port));
    return true;
  } catch {
    return false;
  }
}

/** Linux's default ephemeral range, used when the kernel's cannot be read. */
const LINUX_DEFAULT_RANGE: [number, number] = [32768, 60999];

/** The lowest port freePorts chooses: above the well-known and most registered service ports. */
export const FREE_PORT_FLOOR = 10_000;

/** Parses ip_local_port_range ("32768\t60999"); Linux's default when it is not two ports. */
export function parsePortRange(text: string): [number, number] {
  const [a, b] = text.trim().split(/\s+/).map(Number);
  const ok = (n: number | undefined): n is number => n !== undefined && Number.isInteger(n) && n > 0 && n <= 65535;
  if (!ok(a) || !ok(b)) return [...LINUX_DEFAULT_RANGE];
  return a <= b ? [a, b] : [b, a];
}

/** The kernel's range for ephemeral ports: the local ports of outgoing connections and of listen(0). */
export function ephemeralPortRange(): [number, number] {
  try {
    return parsePortRange(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8"));
  } catch {
    return [...LINUX_DEFAULT_RANGE];
  }
}

/**
 * `count` distinct ports free right now, chosen at random below the kernel's ephemeral range.
 * A port from listen(0) lies inside that range, and so does the local port of every outgoing
 * connection: between the choice and a child's bind, any connection on the machine could take
 * it (CI saw nats-server fail so). Below the range only another explicit bind can. All sockets
 * are held open until every port is chosen, so the same port is never returned twice; callers
 * still retry on "address already in use". Where the range leaves too little room below it,
 * the kernel chooses (listen(0)).
 */
export async function freePorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    const top = ephemeralPortRange()[0] - 1;
    const room = top - FREE_PORT_FLOOR + 1;
    if (room < count * 64) {
      for (let i = 0; i < count; i++) servers.push(await listen(0));
    } else {
      const tried = new Set<number>();
      while (servers.length < count) {
        if (tried.size >= room) throw new Error(`no ${count} free ports between ${FREE_PORT_FLOOR} and ${top}`);
        const port = FREE_PORT_FLOOR + randomInt(room);
        if (tried.has(port)) continue;
        tried.add(port);
        const server = await listenIfFree(port);
        if (server) servers.push(server);
      }
    }
    return servers.map((s) => {
      const addr = s.address();
      if (addr === null || typeof addr === "string") throw new Error("unexpected server address");
      return addr.port;
    });
  } finally {
    await Promise.all(servers.map(close));
  }
}

/**
 * Whether a startup failure's text says a port was taken: Node's EADDRINUSE, the Go servers'
 * "bind: address already in use" (nats-server, etcd, kube-apiserver), or this module's callers'
 * own "port N is already in use". One test for every launcher that retries with other ports.
 */
export function saysPortTaken(text: string): boolean {
  return /EADDRINUSE|already in use/i.test(text);
}
