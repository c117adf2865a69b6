// Sends one webhook attempt over one shared undici Agent, with every limit set on purpose:
// a hard per-attempt deadline, a connect timeout, a response body read to a small cap and then
// dropped, no redirects, keep-alive, a per-origin connection cap (one pool per origin, so a
// hanging endpoint never holds another endpoint's sockets) and the network guard: the host's
// addresses are checked before connecting (IP literals too) and the connected socket's address
// after, so no packet reaches a blocked address and DNS rebinding cannot sneak past the check.
import { Agent, buildConnector, type Dispatcher } from "undici";
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { isIP } from "node:net";
import { INVALID_REQUEST_CODE, INVALID_URL_CODE } from "../core/classify.js";
import { checkAddress, type Cidr } from "../core/netguard.js";
import { deadline } from "../kube/deadline.js";

export interface SendRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  /** Aborted by the operator (drain): the attempt is recorded as interrupted. */
  signal?: AbortSignal;
}

export type SendResult =
  | { kind: "response"; status: number; retryAfter?: string; durationMs: number }
  | { kind: "error"; code: string; message: string; durationMs: number; interrupted?: boolean };

export interface SenderOptions {
  allowedNetworks: Cidr[];
  /** Connections per origin (each subscription's maxInFlight stays below it). */
  connectionsPerOrigin?: number;
  /** Bytes of a response body read before it is dropped. */
  maxResponseBytes?: number;
  connectTimeoutMs?: number;
  /** For tests: resolve names differently. */
  lookup?: typeof dnsLookup;
}

export class BlockedAddressError extends Error {
  readonly code = "HOOKLINE_BLOCKED_ADDRESS";
  constructor(message: string) {
    super(message);
    this.name = "BlockedAddressError";
  }
}

type ConnectOptions = Parameters<buildConnector.connector>[0];
type ConnectCallback = Parameters<buildConnector.connector>[1];

export class Sender {
  private readonly agent: Agent;
  private readonly maxResponseBytes: number;

  constructor(private readonly opts: SenderOptions) {
    this.maxResponseBytes = opts.maxResponseBytes ?? 4096;
    const guardedLookup = this.guardedLookup.bind(this);
    const base = buildConnector({ timeout: opts.connectTimeoutMs ?? 10_000, lookup: guardedLookup } as buildConnector.BuildOptions);
    const connect = (options: ConnectOptions, callback: ConnectCallback) => {
      const host = stripBrackets(options.hostname);
      const plainHttp = options.protocol === "http:";
      if (isIP(host)) {
        const problem = this.problem(host, plainHttp);
        if (problem) return callback(new BlockedAddressError(problem), null);
      }
      base({ ...options, ...({ hookline: { plainHttp } } as object) }, (err, socket) => {
        if (err || !socket) return callback(err ?? new Error("no socket"), null);
        const remote = (socket).remoteAddress;
        const problem = remote ? this.problem(remote, plainHttp) : "connected socket has no remote address";
        if (problem) {
          socket.destroy();
          return callback(new BlockedAddressError(problem), null);
        }
        callback(null, socket);
      });
    };
    this.agent = new Agent({
      connect,
      connections: opts.connectionsPerOrigin ?? 128,
      keepAliveTimeout: 4_000,
      keepAliveMaxTimeout: 60_000,
      pipelining: 1,
    });
  }

  /** Why `ip` may not be reached, or undefined when it may. */
  private problem(ip: string, plainHttp: boolean): string | undefined {
    const verdict = checkAddress(ip, this.opts.allowedNetworks);
    if (!verdict.allowed) return `address ${ip} is ${verdict.category} and not in WEBHOOK_ALLOWED_NETWORKS`;
    // Plain http only inside networks the operator explicitly allows (in-cluster services).
    if (plainHttp && !this.opts.allowedNetworks.some((c) => checkAddress(ip, [c]).allowed && checkAddress(ip, []).allowed === false)) {
      if (checkAddress(ip, []).allowed) return `plain http to public address ${ip} is not allowed: use https`;
    }
    return undefined;
  }

  private guardedLookup(hostname: string, options: { all?: boolean; family?: number }, callback: (err: NodeJS.ErrnoException | null, address?: string | LookupAddress[], family?: number) => void): void {
    const lookup = this.opts.lookup ?? dnsLookup;
    lookup(hostname, { all: true, family: options.family ?? 0 }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err);
      // Fail closed: one blocked address blocks the name (a rebinding name mixes good and bad).
      for (const a of addresses) {
        const problem = this.problem(a.address, false);
        if (problem) return callback(Object.assign(new BlockedAddressError(`${hostname} resolves to ${problem.replace(/^address /, "")}`), { errno: 0 }));
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0];
      if (!first) return callback(Object.assign(new Error(`${hostname} has no addresses`), { code: "ENOTFOUND" }));
      callback(null, first.address, first.family);
    });
  }

  async send(req: SendRequest): Promise<SendResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const d = deadline(req.timeoutMs, req.signal);
    const signal = d.signal;
    let url: URL;
    try {
      url = new URL(req.url);
    } catch {
      return { kind: "error", code: INVALID_URL_CODE, message: "the request could not be built: the subscription URL is not a valid URL", durationMs: 0 };
    }
    try {
      const res: Dispatcher.ResponseData = await this.dispatch(url, req, signal);
      const durationMs = elapsed();
      // Read a little of the body so the connection can be reused; drop the rest with it.
      await res.body.dump({ limit: this.maxResponseBytes }).catch(() => undefined);
      const retryAfter = res.headers["retry-after"];
      return { kind: "response", status: res.statusCode, durationMs, ...(typeof retryAfter === "string" ? { retryAfter } : {}) };
    } catch (err) {
      const durationMs = elapsed();
      if (d.expired) return { kind: "error", code: "TimeoutError", message: `no response within ${req.timeoutMs}ms`, durationMs };
      if (req.signal?.aborted) return { kind: "error", code: "HOOKLINE_INTERRUPTED", message: "interrupted by operator shutdown", durationMs, interrupted: true };
      return { kind: "error", ...describeError(err), durationMs };
    } finally {
      d.clear();
    }
  }

  /**
   * Starts the request. A synchronous throw means our own request could not be built (nothing
   * was sent): it becomes an error with a code classified as invalid_request, never a network one.
   * undici reports most such errors (a refused header) as a rejection with UND_ERR_INVALID_ARG.
   */
  private dispatch(url: URL, req: SendRequest, signal: AbortSignal): Promise<Dispatcher.ResponseData> {
    try {
      return this.agent.request({
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: "POST",
        headers: req.headers,
        body: req.body,
        signal,
        headersTimeout: req.timeoutMs,
        bodyTimeout: req.timeoutMs,
      });
    } catch (err) {
      const { message } = describeError(err);
      return Promise.reject(Object.assign(new Error(message), { code: INVALID_REQUEST_CODE }));
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }

  async destroy(): Promise<void> {
    await this.agent.destroy();
  }
}

function stripBrackets(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

/** A stable code and a short message without URLs or headers (they can hold secrets). */
export function describeError(err: unknown): { code: string; message: string } {
  let e = err as (Error & { code?: string; cause?: unknown }) | undefined;
  // undici wraps connect errors; the useful code is often on the cause.
  for (let depth = 0; e && depth < 3; depth++) {
    if (e instanceof BlockedAddressError) return { code: e.code, message: e.message };
    if (e.code && e.code !== "UND_ERR") return { code: e.code, message: messageFor(e.code, e.message) };
    e = e.cause as typeof e;
  }
  const base = err as Error | undefined;
  return { code: base?.name ?? "Error", message: base?.message?.slice(0, 200) ?? "unknown error" };
}

// Our own request refused by the HTTP client before anything was sent (see classify.ts).
const BUILD_ERROR_CODES = new Set(["UND_ERR_INVALID_ARG", "UND_ERR_NOT_SUPPORTED", "UND_ERR_REQ_CONTENT_LENGTH_MISMATCH", "ERR_INVALID_ARG_TYPE", "ERR_INVALID_ARG_VALUE", "ERR_INVALID_CHAR", "ERR_INVALID_HTTP_TOKEN", "ERR_HTTP_INVALID_HEADER_VALUE", INVALID_REQUEST_CODE]);

function messageFor(code: string, fallback: string): string {
  // undici names the header ("invalid upgrade header"), never its value.
  if (BUILD_ERROR_CODES.has(code)) return `the request could not be built: ${fallback.replace(/https?:\/\/\S+/g, "<url>").slice(0, 200)}`;
  const known: Record<string, string> = {
    ECONNREFUSED: "connection refused",
    ECONNRESET: "connection reset by the endpoint",
    EPIPE: "connection closed while sending",
    ETIMEDOUT: "connection timed out",
    EHOSTUNREACH: "host unreachable",
    ENETUNREACH: "network unreachable",
    ENOTFOUND: "host name not found",
    EAI_AGAIN: "temporary DNS failure",
    UND_ERR_CONNECT_TIMEOUT: "connect timed out",
    UND_ERR_HEADERS_TIMEOUT: "no response headers before the timeout",
    UND_ERR_BODY_TIMEOUT: "response body stalled",
    UND_ERR_SOCKET: "connection closed by the endpoint",
    UND_ERR_CLOSED: "connection closed",
  };
  return known[code] ?? (code.startsWith("ERR_TLS") || code.includes("CERT") ? `TLS error (${code})` : fallback.replace(/https?:\/\/\S+/g, "<url>").slice(0, 200));
}
