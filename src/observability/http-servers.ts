// The metrics (/metrics) and health (/healthz, /readyz) HTTP servers. Readiness is a function
// the manager owns: not ready before caches sync, while the API server cannot be written, and
// from the first moment of shutdown.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import type { Server as TlsServer } from "node:tls";
import type { Registry } from "prom-client";

export const METRICS_PATH = "/metrics";

/** What a request that may not read /metrics is answered. */
export interface Refusal {
  status: 401 | 403 | 429 | 503;
  message: string;
  headers?: Record<string, string>;
}

/** Who may read /metrics (access/metrics-guard.ts: METRICS_AUTH=kubernetes). */
export interface MetricsGuard {
  /** undefined: the request may read /metrics. */
  check(req: IncomingMessage): Promise<Refusal | undefined>;
}

/** A certificate kept current (access/tls.ts ReloadingTls): served, and swapped on the server when renewed. */
export interface TlsSource {
  readonly current: { cert: Buffer; key: Buffer };
  serve(server: TlsServer): void;
  close(): void;
}

export interface Probes {
  live(): boolean;
  ready(): { ready: boolean; reason?: string };
}

/** Where the operator's servers listen unless told otherwise: every interface (a pod's). */
export const ALL_INTERFACES = "0.0.0.0";

/**
 * An HTTP server, or with `tls` an HTTPS one (TLS 1.2 at least) whose certificate is swapped when
 * renewed: the publish door's and the metrics server's.
 */
export function httpOrHttps(onRequest: (req: IncomingMessage, res: ServerResponse) => void, opts: { tls?: TlsSource | undefined; maxHeaderSize?: number } = {}): Server {
  const base = opts.maxHeaderSize !== undefined ? { maxHeaderSize: opts.maxHeaderSize } : {};
  if (!opts.tls) return createServer(base, onRequest);
  const { cert, key } = opts.tls.current;
  const https = createHttpsServer({ ...base, cert, key, minVersion: "TLSv1.2" }, onRequest);
  opts.tls.serve(https);
  https.on("close", () => opts.tls?.close());
  return https;
}

export async function listen(server: Server, port: number, host = ALL_INTERFACES): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
}

/**
 * GET /metrics. With `tls`, over HTTPS (the certificate reloaded when its files change); with
 * `guard` (METRICS_AUTH=kubernetes), only for the callers it lets through.
 */
export function metricsServer(registry: Registry, opts: { guard?: MetricsGuard | undefined; tls?: TlsSource | undefined } = {}): Server {
  const serve = (res: ServerResponse) => {
    registry
      .metrics()
      .then((text) => {
        res.writeHead(200, { "content-type": registry.contentType });
        res.end(text);
      })
      .catch((err: Error) => {
        res.writeHead(500).end(err.message);
      });
  };
  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== "GET" || req.url?.split("?")[0] !== METRICS_PATH) {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
      return;
    }
    if (!opts.guard) return serve(res);
    opts.guard.check(req).then(
      (refusal) => {
        if (!refusal) return serve(res);
        res.writeHead(refusal.status, { "content-type": "text/plain", ...refusal.headers }).end(`${refusal.message}\n`);
      },
      (err: Error) => res.writeHead(500).end(err.message),
    );
  };
  return httpOrHttps(onRequest, { tls: opts.tls });
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
