// A real HTTP receiver on 127.0.0.1 for integration tests. Each request is recorded (time,
// path, headers, body) and answered by a script: a status, a delay, a hang, or a reset. Tracks
// concurrency so tests can assert limits. `startHttps` serves TLS and can require a client
// certificate from a given CA (each request records the certificate it came with).
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import type { TLSSocket } from "node:tls";
import { Webhook } from "standardwebhooks";

export interface ReceivedRequest {
  n: number;
  at: number;
  path: string;
  headers: IncomingHttpHeaders;
  /** The body decoded as UTF-8, whole (invalid bytes become U+FFFD). */
  body: string;
  /** The body's bytes as received. */
  bytes: Buffer;
  /** Requests open at the moment this one arrived (itself included). */
  concurrent: number;
  /** Over TLS with a client certificate: its subject CN and SHA-256 fingerprint. */
  clientCertificate?: { cn: string; fingerprint256: string };
}

export interface HttpsOptions {
  cert: string;
  key: string;
  /** CA certificates client certificates must chain to. */
  clientCa?: string;
  /** Refuse the TLS handshake without a client certificate signed by clientCa. */
  requireClientCert?: boolean;
}

export type Reply =
  | number
  | { status: number; headers?: Record<string, string>; delayMs?: number; body?: string }
  | "hang" // never answer (until the receiver closes)
  | "reset"; // destroy the connection

export type Script = (req: ReceivedRequest) => Reply | Promise<Reply>;

export class Receiver {
  readonly requests: ReceivedRequest[] = [];
  private open = 0;
  maxConcurrent = 0;
  private readonly sockets = new Set<Socket>();
  private readonly hanging = new Set<ServerResponse>();
  private waiters: Array<() => void> = [];

  /** TLS handshakes refused (no or a wrong client certificate). */
  tlsErrors = 0;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    public script: Script,
    private readonly scheme: "http" | "https" = "http",
  ) {}

  static start(script: Script = () => 200): Promise<Receiver> {
    return Receiver.listen(script, undefined);
  }

  /** An HTTPS receiver on 127.0.0.1 with `tls.cert` (issue it for IP 127.0.0.1). */
  static startHttps(tls: HttpsOptions, script: Script = () => 200): Promise<Receiver> {
    return Receiver.listen(script, tls);
  }

  private static async listen(script: Script, tls: HttpsOptions | undefined): Promise<Receiver> {
    const holder: { self?: Receiver } = {};
    const onRequest = (req: IncomingMessage, res: ServerResponse) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => void holder.self!.handle(req.url ?? "/", req.headers, Buffer.concat(chunks), res, peerCertificate(req)));
    };
    const server: Server = tls
      ? (createHttpsServer({ cert: tls.cert, key: tls.key, ...(tls.clientCa ? { ca: tls.clientCa } : {}), requestCert: !!tls.requireClientCert, rejectUnauthorized: !!tls.requireClientCert }, onRequest))
      : createServer(onRequest);
    server.keepAliveTimeout = 5_000;
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const self = new Receiver(server, (server.address() as AddressInfo).port, script, tls ? "https" : "http");
    server.on("tlsClientError", () => self.tlsErrors++);
    holder.self = self;
    server.on("connection", (s) => {
      self.sockets.add(s);
      s.on("close", () => self.sockets.delete(s));
    });
    return self;
  }

  /** Replies with the statuses in order, then `then` forever. */
  static sequence(statuses: number[], then = 200): Script {
    let i = 0;
    return () => statuses[i++] ?? then;
  }

  url(path = "/hook"): string {
    return `${this.scheme}://127.0.0.1:${this.port}${path}`;
  }

  private async handle(path: string, headers: IncomingHttpHeaders, bytes: Buffer, res: ServerResponse, clientCertificate: ReceivedRequest["clientCertificate"]): Promise<void> {
    this.open++;
    this.maxConcurrent = Math.max(this.maxConcurrent, this.open);
    const req: ReceivedRequest = { n: this.requests.length + 1, at: Date.now(), path, headers, body: bytes.toString("utf8"), bytes, concurrent: this.open, ...(clientCertificate ? { clientCertificate } : {}) };
    this.requests.push(req);
    for (const w of this.waiters.splice(0)) w();
    res.on("close", () => this.open--);
    let reply: Reply;
    try {
      reply = await this.script(req);
    } catch {
      reply = 500;
    }
    if (reply === "hang") {
      this.hanging.add(res);
      return;
    }
    if (reply === "reset") {
      res.socket?.destroy();
      return;
    }
    const r = typeof reply === "number" ? { status: reply } : reply;
    if (r.delayMs) await new Promise((resolve) => setTimeout(resolve, r.delayMs));
    if (res.destroyed) return;
    res.writeHead(r.status, { "content-type": "text/plain", ...(r.headers ?? {}) });
    res.end(r.body ?? "");
  }

  /** Requests open right now (answered ones and timed-out ones are closed). */
  get openRequests(): number {
    return this.open;
  }

  /** Resolves once at least `n` requests arrived (or rejects after timeoutMs). */
  async waitForRequests(n: number, timeoutMs = 30_000): Promise<ReceivedRequest[]> {
    const deadline = performance.now() + timeoutMs; // monotonic, as waitFor's
    while (this.requests.length < n) {
      const left = deadline - performance.now();
      if (left <= 0) throw new Error(`receiver got ${this.requests.length} requests, expected ${n} within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    return this.requests;
  }

  /** Verifies a request's Standard Webhooks signature with the `standardwebhooks` library. */
  static verify(req: ReceivedRequest, secret: string): unknown {
    return new Webhook(secret).verify(req.body, {
      "webhook-id": String(req.headers["webhook-id"]),
      "webhook-timestamp": String(req.headers["webhook-timestamp"]),
      "webhook-signature": String(req.headers["webhook-signature"]),
    });
  }

  /** Answers every hanging request with `status`. */
  releaseHanging(status = 200): void {
    for (const res of this.hanging) if (!res.destroyed) res.writeHead(status).end();
    this.hanging.clear();
  }

  async close(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

function peerCertificate(req: IncomingMessage): ReceivedRequest["clientCertificate"] {
  const socket = req.socket as Partial<TLSSocket>;
  const peer = socket.getPeerCertificate?.();
  if (!peer || !peer.fingerprint256) return undefined;
  const cn = peer.subject?.CN;
  return { cn: Array.isArray(cn) ? cn.join(",") : (cn ?? ""), fingerprint256: peer.fingerprint256 };
}
