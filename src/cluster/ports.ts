// Free-port helpers for the local control plane. Everything binds to 127.0.0.1 only.
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

/**
 * `count` distinct ports the kernel considers free right now. All sockets are held open until
 * every port is chosen, so the same port is never returned twice. A small race remains between
 * closing them and a child binding them; callers retry on "address already in use".
 */
export async function freePorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    for (let i = 0; i < count; i++) servers.push(await listen(0));
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
