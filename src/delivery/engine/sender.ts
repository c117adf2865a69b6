// Sends one webhook attempt (or one OAuth2 token request) over undici, with every limit set on
// purpose: a hard per-request deadline, a connect timeout, a response body read to a small cap
// and then dropped (or returned, up to a cap, for token requests), no redirects, keep-alive, a
// per-origin connection cap (one pool per origin, so a hanging endpoint never holds another
// endpoint's sockets) and the network guard: the host's addresses are checked before
// connecting (IP literals too) and the connected socket's address after, so no packet reaches
// a blocked address and DNS rebinding cannot sneak past the check.
//
// One dispatcher (undici Agent) per distinct TLS identity (client certificate, key, CA bundle;
// keyed by their hash, so a renewed certificate is a new dispatcher) and proxy, reused across
// requests and closed once unused. Through a proxy (spec.proxy.url, or HTTPS_PROXY/HTTP_PROXY
// unless NO_PROXY exempts the host) the sender resolves and checks the destination itself,
// connects to the proxy (checked like any address) and asks it to CONNECT to that checked IP
// address, never to the name: the proxy cannot resolve the name to somewhere else. TLS to the
// endpoint then runs inside the tunnel, end to end (docs/adr/0009-receiver-credentials.md).
import { Agent, buildConnector, type Dispatcher } from "undici";
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { isIP, type Socket } from "node:net";
import { INVALID_REQUEST_CODE, INVALID_URL_CODE } from "../../core/attempt/classify.js";
import { checkAddress, type Cidr } from "../../core/request/netguard.js";
import { proxyFor, parseProxyUrl, type ProxyEnv } from "../../core/request/proxy-env.js";
import { deadline, type DeadlineSignal } from "../../kube/deadline.js";

/** A client certificate and/or private CA for one endpoint (PEM). */
export interface TlsIdentity {
  cert?: string;
  key?: string;
  /** Trusted instead of the public CAs. */
  ca?: string;
  /** A hash of cert, key and ca: which dispatcher carries it. */
  id: string;
}

export interface SendRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  /** Aborted by the operator (drain): the attempt is recorded as interrupted. */
  signal?: AbortSignal;
  tls?: TlsIdentity;
  /** spec.proxy.url: wins over the environment's proxies. */
  proxyUrl?: string;
  /** Read the response body up to this many bytes and return it (token requests); default: drop it. */
  responseBodyLimit?: number;
}

export type SendResult =
  | { kind: "response"; status: number; retryAfter?: string; durationMs: number; body?: string }
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
  /** HTTPS_PROXY, HTTP_PROXY, NO_PROXY (from the Config). */
  proxy?: ProxyEnv;
  /** A dispatcher for a TLS identity or proxy unused this long is closed. Default 5 min. */
  idleDispatcherMs?: number;
}

/** The code of a response body above SendRequest.responseBodyLimit. */
export const RESPONSE_TOO_LARGE = "HOOKLINE_RESPONSE_TOO_LARGE";
/** Codes of a proxy that did not open the tunnel. */
export const PROXY_CODES = { refused: "HOOKLINE_PROXY_REFUSED", auth: "HOOKLINE_PROXY_AUTH", timeout: "HOOKLINE_PROXY_TIMEOUT", closed: "HOOKLINE_PROXY_CLOSED" } as const;
/** Bytes of a proxy's answer to CONNECT read at most. */
const MAX_CONNECT_RESPONSE = 16_384;

export class BlockedAddressError extends Error {
  readonly code = "HOOKLINE_BLOCKED_ADDRESS";
  constructor(message: string) {
    super(message);
    this.name = "BlockedAddressError";
  }
}

type ConnectOptions = Parameters<buildConnector.connector>[0];
type ConnectCallback = Parameters<buildConnector.connector>[1];

interface Slot {
  agent: Agent;
  inFlight: number;
  lastUsed: number;
}

export class Sender {
  /** By `<tls id>|<proxy url>`; "|" is the plain one, never closed while the sender lives. */
  private readonly slots = new Map<string, Slot>();
  private readonly maxResponseBytes: number;
  private readonly connectTimeoutMs: number;
  private readonly proxyConnect: buildConnector.connector;
  private readonly sweep: NodeJS.Timeout;

  constructor(private readonly opts: SenderOptions) {
    this.maxResponseBytes = opts.maxResponseBytes ?? 4096;
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 10_000;
    // To the proxy itself: the public CAs, the guarded lookup.
    this.proxyConnect = buildConnector({ timeout: this.connectTimeoutMs, lookup: this.guardedLookup.bind(this) } as buildConnector.BuildOptions);
    this.slots.set("|", this.slot(undefined, undefined));
    this.sweep = setInterval(() => void this.closeIdle(), Math.min(60_000, opts.idleDispatcherMs ?? 300_000));
    this.sweep.unref();
  }

  /** Dispatchers open now (the plain one included). */
  get dispatchers(): number {
    return this.slots.size;
  }

  private slot(tls: TlsIdentity | undefined, proxyUrl: string | undefined): Slot {
    return {
      agent: new Agent({
        connect: this.connector(tls, proxyUrl ? parseProxyUrl(proxyUrl) : undefined),
        connections: this.opts.connectionsPerOrigin ?? 128,
        keepAliveTimeout: 4_000,
        keepAliveMaxTimeout: 60_000,
        pipelining: 1,
      }),
      inFlight: 0,
      lastUsed: Date.now(),
    };
  }

  private slotFor(req: SendRequest): Slot {
    const key = `${req.tls?.id ?? ""}|${req.proxyUrl ?? ""}`;
    let slot = this.slots.get(key);
    if (!slot) {
      slot = this.slot(req.tls, req.proxyUrl);
      this.slots.set(key, slot);
    }
    slot.lastUsed = Date.now();
    return slot;
  }

  /** Closes dispatchers nothing used for idleDispatcherMs (a rotated certificate's old one). */
  async closeIdle(now = Date.now()): Promise<void> {
    const idle = [...this.slots].filter(([key, s]) => key !== "|" && s.inFlight === 0 && now - s.lastUsed >= (this.opts.idleDispatcherMs ?? 300_000));
    for (const [key] of idle) this.slots.delete(key);
    await Promise.all(idle.map(([, s]) => s.agent.close().catch(() => undefined)));
  }

  /** The connect function of one dispatcher: direct, or through a proxy; the guard on both. */
  private connector(tls: TlsIdentity | undefined, fixedProxy: URL | undefined) {
    const base = buildConnector({
      timeout: this.connectTimeoutMs,
      lookup: this.guardedLookup.bind(this),
      ...(tls?.cert !== undefined && tls.key !== undefined ? { cert: tls.cert, key: tls.key } : {}),
      ...(tls?.ca !== undefined ? { ca: tls.ca } : {}),
    } as buildConnector.BuildOptions);
    return (options: ConnectOptions, callback: ConnectCallback) => {
      const host = stripBrackets(options.hostname);
      const plainHttp = options.protocol === "http:";
      const proxy = fixedProxy ?? (this.opts.proxy ? proxyFor(this.opts.proxy, { protocol: options.protocol, hostname: host, port: options.port }) : undefined);
      if (proxy) return this.tunnel(base, options, proxy, callback);
      if (isIP(host)) {
        const problem = this.problem(host, plainHttp);
        if (problem) return callback(new BlockedAddressError(problem), null);
      }
      base(options, (err, socket) => {
        if (err || !socket) return callback(err ?? new Error("no socket"), null);
        const remote = socket.remoteAddress;
        const problem = remote ? this.problem(remote, plainHttp) : "connected socket has no remote address";
        if (problem) {
          socket.destroy();
          return callback(new BlockedAddressError(problem), null);
        }
        callback(null, socket);
      });
    };
  }

  /**
   * Through a proxy: the destination is resolved and checked here (with plain http only to
   * allowed networks), the proxy's address is checked like any other, and the proxy is asked
   * to CONNECT to the checked IP address. TLS to the endpoint runs inside the tunnel.
   */
  private tunnel(base: buildConnector.connector, options: ConnectOptions, proxy: URL, callback: ConnectCallback): void {
    const host = stripBrackets(options.hostname);
    const https = options.protocol === "https:";
    const port = options.port || (https ? "443" : "80");
    this.destination(host, !https, (err, ip) => {
      if (err || ip === undefined) return callback(err ?? new Error(`${host} has no addresses`), null);
      const proxyHost = stripBrackets(proxy.hostname);
      if (isIP(proxyHost)) {
        const problem = this.problem(proxyHost, false);
        if (problem) return callback(new BlockedAddressError(`proxy ${problem}`), null);
      }
      const proxyPort = proxy.port || (proxy.protocol === "https:" ? "443" : "80");
      this.proxyConnect({ hostname: proxy.hostname, host: proxy.host, protocol: proxy.protocol, port: proxyPort }, (perr, socket) => {
        if (perr || !socket) return callback(perr ? prefixed(perr, "proxy") : new Error("no socket"), null);
        const remote = socket.remoteAddress;
        const problem = remote ? this.problem(remote, false) : "connected socket has no remote address";
        if (problem) {
          socket.destroy();
          return callback(new BlockedAddressError(`proxy ${problem}`), null);
        }
        const authority = isIP(ip) === 6 ? `[${ip}]:${port}` : `${ip}:${port}`;
        openTunnel(socket, authority, proxyAuthorization(proxy), this.connectTimeoutMs, (terr) => {
          if (terr) {
            socket.destroy();
            return callback(terr, null);
          }
          if (!https) return callback(null, socket);
          base({ ...options, httpSocket: socket }, callback);
        });
      });
    });
  }

  /** The checked address to CONNECT to: an IP literal as is, a name's first address (all checked). */
  private destination(host: string, plainHttp: boolean, cb: (err: Error | null, ip?: string) => void): void {
    const pick = (ip: string) => {
      const problem = this.problem(ip, plainHttp);
      return problem ? cb(new BlockedAddressError(problem)) : cb(null, ip);
    };
    if (isIP(host)) return pick(host);
    this.guardedLookup(host, { all: true }, (err, addresses) => {
      if (err) return cb(err);
      const first = Array.isArray(addresses) ? addresses[0] : undefined;
      if (!first) return cb(Object.assign(new Error(`${host} has no addresses`), { code: "ENOTFOUND" }));
      pick(first.address);
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
    const slot = this.slotFor(req);
    slot.inFlight++;
    try {
      const res: Dispatcher.ResponseData = await this.dispatch(slot.agent, url, req, signal);
      const durationMs = elapsed();
      let body: string | undefined;
      if (req.responseBodyLimit !== undefined) {
        body = await readBody(res, req.responseBodyLimit);
        if (body === undefined) return { kind: "error", code: RESPONSE_TOO_LARGE, message: `the response body is larger than ${req.responseBodyLimit} bytes`, durationMs: elapsed() };
      } else {
        // Read a little of the body so the connection can be reused; drop the rest with it.
        await res.body.dump({ limit: this.maxResponseBytes }).catch(() => undefined);
      }
      const retryAfter = res.headers["retry-after"];
      return { kind: "response", status: res.statusCode, durationMs, ...(typeof retryAfter === "string" ? { retryAfter } : {}), ...(body !== undefined ? { body } : {}) };
    } catch (err) {
      const durationMs = elapsed();
      if (d.expired) return { kind: "error", code: "TimeoutError", message: `no response within ${req.timeoutMs}ms`, durationMs };
      if (req.signal?.aborted) return { kind: "error", code: "HOOKLINE_INTERRUPTED", message: "interrupted by operator shutdown", durationMs, interrupted: true };
      return { kind: "error", ...describeError(err), durationMs };
    } finally {
      slot.inFlight--;
      slot.lastUsed = Date.now();
      d.clear();
    }
  }

  /**
   * Starts the request. A synchronous throw means our own request could not be built (nothing
   * was sent): it becomes an error with a code classified as invalid_request, never a network one.
   * undici reports most such errors (a refused header) as a rejection with UND_ERR_INVALID_ARG.
   */
  private dispatch(agent: Agent, url: URL, req: SendRequest, signal: AbortSignal | DeadlineSignal): Promise<Dispatcher.ResponseData> {
    try {
      return agent.request({
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
    clearInterval(this.sweep);
    await Promise.all([...this.slots.values()].map((s) => s.agent.close()));
  }

  async destroy(): Promise<void> {
    clearInterval(this.sweep);
    await Promise.all([...this.slots.values()].map((s) => s.agent.destroy()));
  }
}

/** The body as UTF-8 when it has at most `limit` bytes; undefined (and the stream dropped) when larger. */
async function readBody(res: Dispatcher.ResponseData, limit: number): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    n += chunk.length;
    if (n > limit) {
      res.body.destroy();
      return undefined;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** Basic credentials from the proxy URL (HTTPS_PROXY=http://user:pass@proxy:3128), if any. */
function proxyAuthorization(proxy: URL): string | undefined {
  if (!proxy.username && !proxy.password) return undefined;
  return `Basic ${Buffer.from(`${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`).toString("base64")}`;
}

/** Sends CONNECT on `socket` and waits for a 2xx answer (headers only, at most 16 KiB). */
function openTunnel(socket: Socket, authority: string, authorization: string | undefined, timeoutMs: number, cb: (err: Error | null) => void): void {
  let buf = Buffer.alloc(0);
  let finished = false;
  const done = (err: Error | null, rest?: Buffer) => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    socket.off("data", onData).off("error", onError).off("close", onClose);
    if (!err) {
      socket.pause();
      if (rest?.length) socket.unshift(rest);
    }
    cb(err);
  };
  const fail = (code: string, message: string) => done(Object.assign(new Error(message), { code }));
  const onData = (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    const end = buf.indexOf("\r\n\r\n");
    if (end === -1) {
      if (buf.length > MAX_CONNECT_RESPONSE) fail(PROXY_CODES.refused, `the proxy's answer to CONNECT is larger than ${MAX_CONNECT_RESPONSE} bytes`);
      return;
    }
    const status = /^HTTP\/1\.[01] (\d{3})/.exec(buf.subarray(0, end).toString("latin1"));
    if (!status) return fail(PROXY_CODES.refused, "the proxy did not answer CONNECT with HTTP/1.x");
    const code = Number(status[1]);
    if (code === 407) return fail(PROXY_CODES.auth, "the proxy answered CONNECT with 407 Proxy Authentication Required");
    if (code < 200 || code > 299) return fail(PROXY_CODES.refused, `the proxy answered CONNECT with ${code}`);
    done(null, buf.subarray(end + 4));
  };
  const onError = (err: Error) => done(prefixed(err, "proxy"));
  const onClose = () => fail(PROXY_CODES.closed, "the proxy closed the connection during CONNECT");
  const timer = setTimeout(() => fail(PROXY_CODES.timeout, `the proxy did not answer CONNECT within ${timeoutMs} ms`), timeoutMs);
  socket.on("data", onData).on("error", onError).on("close", onClose);
  socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${authorization ? `Proxy-Authorization: ${authorization}\r\n` : ""}\r\n`);
}

/** The same error (code kept for classification), its message saying which hop failed. */
function prefixed(err: Error, hop: string): Error {
  const code = (err as { code?: string }).code;
  return Object.assign(new Error(`${hop}: ${code ? messageFor(code, err.message) : err.message}`), code ? { code } : {});
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
