// A small Kubernetes REST client on one undici Pool. Credentials and TLS come from a kubeconfig
// (./kubeconfig.ts: files, in-cluster tokens; exec plugins through @kubernetes/client-node); the
// requests are ours, so we can ask for metadata-only and Table projections, reuse connections,
// stream watches and count every request by verb and resource. See docs/adr/0002-own-kube-client-on-undici.md.
import { Pool, errors as undiciErrors } from "undici";
import type { ClusterCredentials, HttpsOptions } from "./kubeconfig.js";
import type { IncomingHttpHeaders } from "node:http";
import { deadline, type DeadlineSignal } from "./deadline.js";

export type Verb = "get" | "list" | "watch" | "create" | "update" | "patch" | "delete" | "deletecollection";

/** Counts API requests; the benchmark and tests read writes per delivery from it. */
export interface RequestObserver {
  observe(verb: Verb, resource: string, code: number, seconds: number): void;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    message: string,
    readonly body?: unknown,
  ) {
    super(message);
    this.name = "ApiError";
  }
  get isNotFound() {
    return this.status === 404;
  }
  get isConflict() {
    return this.status === 409 && this.reason === "Conflict";
  }
  get isAlreadyExists() {
    return this.status === 409 && this.reason === "AlreadyExists";
  }
  get isGone() {
    return this.status === 410;
  }
  /**
   * The API server refused this one request (invalid, forbidden, too large): it says nothing
   * about the API server's health and nothing about other objects. 5xx, 429 and timeouts are
   * outages; 404 and 409 are answers the caller handles.
   */
  get isRefused() {
    return this.status >= 400 && this.status < 500 && this.status !== 404 && this.status !== 408 && this.status !== 409 && this.status !== 429;
  }
}

/** The answer of a request, or undefined when the object does not exist (404). */
export async function ignoreNotFound<T>(request: Promise<T>): Promise<T | undefined> {
  try {
    return await request;
  } catch (err) {
    if (err instanceof ApiError && err.isNotFound) return undefined;
    throw err;
  }
}

export const ACCEPT = {
  json: "application/json",
  /** For lists. */
  metadata: "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
  /** For watches: the List form makes the API server answer a watch with 200 and an empty body. */
  metadataWatch: "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
  /**
   * For one object (get, and the answer to a write). Never send the List form with a write: the
   * API server applies the write and only then fails to encode the answer (406).
   */
  objectMetadata: "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
  table: "application/json;as=Table;g=meta.k8s.io;v=v1,application/json",
} as const;

export const CONTENT_TYPE = {
  json: "application/json",
  merge: "application/merge-patch+json",
  jsonPatch: "application/json-patch+json",
  apply: "application/apply-patch+yaml",
} as const;

export interface RequestOptions {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  contentType?: string;
  accept?: string;
  signal?: AbortSignal;
  /** Whole-request deadline; default 30 s. */
  timeoutMs?: number;
}

export interface ClientOptions {
  observer?: RequestObserver;
  userAgent?: string;
  /** Max concurrent connections to the API server (watches hold one each). */
  connections?: number;
}

const AUTH_TTL_MS = 30_000;

export class KubeClient {
  private authHeaders: Record<string, string> = {};
  private authFetchedAt = -Infinity;
  private authPending: Promise<void> | undefined;

  private constructor(
    readonly server: string,
    private readonly pool: Pool,
    private readonly kc: ClusterCredentials,
    private readonly opts: ClientOptions,
  ) {}

  static async create(kc: ClusterCredentials, opts: ClientOptions = {}): Promise<KubeClient> {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error("kubeconfig has no current cluster: set a context (kubectl config use-context) or KUBECONFIG");
    const https: HttpsOptions = {};
    await kc.applyToHTTPSOptions(https);
    const server = cluster.server.replace(/\/+$/, "");
    const pool = new Pool(server, {
      connections: opts.connections ?? 64,
      keepAliveTimeout: 30_000,
      headersTimeout: 60_000,
      // Watches stream for minutes; their liveness is checked by the reflector's watchdog.
      bodyTimeout: 0,
      connect: {
        ca: https.ca,
        cert: https.cert,
        key: https.key,
        rejectUnauthorized: cluster.skipTLSVerify ? false : https.rejectUnauthorized ?? true,
        ...(cluster.tlsServerName ? { servername: cluster.tlsServerName } : {}),
      },
    });
    const client = new KubeClient(server, pool, kc, opts);
    client.authHeaders = pickAuth(https.headers);
    client.authFetchedAt = Date.now();
    return client;
  }

  async close(): Promise<void> {
    await this.pool.close().catch(() => this.pool.destroy());
  }

  /** Closes at once, aborting open requests and watches. */
  async destroy(): Promise<void> {
    await this.pool.destroy();
  }

  private async auth(): Promise<Record<string, string>> {
    if (Date.now() - this.authFetchedAt < AUTH_TTL_MS) return this.authHeaders;
    this.authPending ??= (async () => {
      const opts: { headers?: Record<string, string> } = {};
      await this.kc.applyToHTTPSOptions(opts);
      this.authHeaders = pickAuth(opts.headers);
      this.authFetchedAt = Date.now();
    })().finally(() => {
      this.authPending = undefined;
    });
    await this.authPending;
    return this.authHeaders;
  }

  async request<T = unknown>(opts: RequestOptions): Promise<T> {
    const d = deadline(opts.timeoutMs ?? 30_000, opts.signal);
    try {
      const res = await this.send(opts, d.signal);
      const text = await res.body.text();
      if (res.statusCode >= 400) throw toApiError(res.statusCode, text);
      return (text ? JSON.parse(text) : undefined) as T;
    } finally {
      d.clear();
    }
  }

  /** Opens a streaming request (watch). The caller consumes and closes `body`; no deadline. */
  async stream(opts: RequestOptions): Promise<{ statusCode: number; headers: IncomingHttpHeaders; body: AsyncIterable<Buffer> & { destroy(err?: Error): void } }> {
    const res = await this.send(opts, opts.signal);
    if (res.statusCode >= 400) throw toApiError(res.statusCode, await res.body.text());
    return res;
  }

  private async send(opts: RequestOptions, signal: AbortSignal | DeadlineSignal | undefined) {
    const started = performance.now();
    const { verb, resource } = classifyRequest(opts);
    const headers: Record<string, string> = {
      ...(await this.auth()),
      accept: opts.accept ?? ACCEPT.json,
      "user-agent": this.opts.userAgent ?? "hookline",
    };
    let body: string | undefined;
    if (opts.body !== undefined) {
      body = typeof opts.body === "string" ? opts.body : JSON.stringify(opts.body);
      headers["content-type"] = opts.contentType ?? CONTENT_TYPE.json;
    }
    let code = 0;
    try {
      // reset: false keeps the connection after a DELETE with a body (DeleteOptions): undici
      // otherwise closes it, and every retention delete would pay a new TLS handshake.
      const res = await this.pool.request({ method: opts.method, path: withQuery(opts.path, opts.query), headers, body, signal, reset: false });
      code = res.statusCode;
      return res;
    } catch (err) {
      throw describeTransportError(err, opts);
    } finally {
      this.opts.observer?.observe(verb, resource, code, (performance.now() - started) / 1000);
    }
  }
}

function pickAuth(headers: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers ?? {})) if (k.toLowerCase() === "authorization") out.authorization = String(v);
  return out;
}

function withQuery(path: string, query: RequestOptions["query"]): string {
  if (!query) return path;
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== "") params.set(k, String(v));
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}

/** Maps a request to the verb and resource Kubernetes' audit log would name. */
export function classifyRequest(opts: Pick<RequestOptions, "method" | "path" | "query">): { verb: Verb; resource: string } {
  const parts = opts.path.split("?")[0]!.split("/").filter(Boolean);
  // Non-resource URLs (/version, /readyz): the audit log names them by path, with the HTTP verb.
  if (parts[0] !== "api" && parts[0] !== "apis") return { verb: "get", resource: `/${parts.join("/")}` };
  // /api/v1/namespaces/ns/secrets/name, /apis/g/v/namespaces/ns/plural/name/status, /apis/g/v/plural
  const start = parts[0] === "api" ? 2 : 3;
  let rest = parts.slice(start);
  if (rest[0] === "namespaces" && rest.length > 2) rest = rest.slice(2);
  const resource = rest[0] ?? "unknown";
  const sub = rest[2];
  const isItem = rest.length >= 2;
  let verb: Verb;
  switch (opts.method) {
    case "GET":
      verb = [1, true, "1", "true"].includes(opts.query?.watch as never) ? "watch" : isItem ? "get" : "list";
      break;
    case "POST":
      verb = "create";
      break;
    case "PUT":
      verb = "update";
      break;
    case "PATCH":
      verb = "patch";
      break;
    case "DELETE":
      verb = isItem ? "delete" : "deletecollection";
      break;
  }
  return { verb, resource: sub ? `${resource}/${sub}` : resource };
}

function toApiError(status: number, text: string): ApiError {
  let body: { reason?: string; message?: string } | undefined;
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    body = undefined;
  }
  const message = body?.message ?? (text.slice(0, 300) || `HTTP ${status}`);
  return new ApiError(status, body?.reason ?? "", message, body);
}

function describeTransportError(err: unknown, opts: RequestOptions): Error {
  if (err instanceof undiciErrors.UndiciError || err instanceof Error) {
    const e = err as Error & { code?: string };
    const wrapped = new Error(`${opts.method} ${opts.path.split("?")[0]}: ${e.code ?? e.name}: ${e.message}`, { cause: err });
    (wrapped as Error & { code?: string }).code = e.code ?? e.name;
    return wrapped;
  }
  return new Error(String(err));
}
