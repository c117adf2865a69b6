// The metrics (/metrics) and health (/healthz, /readyz) HTTP servers. Readiness is a function
// the manager owns: not ready before caches sync, while the API server cannot be written, and
// from the first moment of shutdown.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";

export interface Probes {
  live(): boolean;
  ready(): { ready: boolean; reason?: string };
}

export async function listen(server: Server, port: number, host = "0.0.0.0"): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
}

export function metricsServer(registry: Registry): Server {
  return createServer((req, res) => {
    if (req.method === "GET" && req.url?.split("?")[0] === "/metrics") {
      registry
        .metrics()
        .then((text) => {
          res.writeHead(200, { "content-type": registry.contentType });
          res.end(text);
        })
        .catch((err: Error) => {
          res.writeHead(500).end(err.message);
        });
      return;
    }
    res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
  });
}

export function healthServer(probes: Probes): Server {
  return createServer((req, res) => {
    const path = req.url?.split("?")[0];
    if (path === "/healthz" || path === "/livez") {
      const ok = probes.live();
      res.writeHead(ok ? 200 : 500, { "content-type": "text/plain" }).end(ok ? "ok\n" : "not live\n");
      return;
    }
    if (path === "/readyz") {
      const { ready, reason } = probes.ready();
      res.writeHead(ready ? 200 : 503, { "content-type": "text/plain" }).end(ready ? "ok\n" : `not ready: ${reason ?? "starting"}\n`);
      return;
    }
    res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
  });
}

export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections?.();
  });
}

/** An HTTP server as a manager runnable: listens on `port` (0 picks one) and reports the port. */
/** `host`: the address to listen on; every interface (0.0.0.0) unless given. */
export function serverRunnable(name: string, server: Server, port: number, onListening: (port: number) => void, host?: string): { name: string; start(): Promise<void>; stop(): Promise<void> } {
  return {
    name,
    start: async () => onListening(await listen(server, port, host)),
    stop: () => closeServer(server),
  };
}
