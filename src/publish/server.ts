// The HTTP publish door, on its own port (PUBLISH_PORT): `POST /v1/namespaces/{ns}/events` with
// `{"type","id"?,"data"}`, for services in any language. The caller is authenticated with a
// Kubernetes ServiceAccount token issued for the door's audience (TokenReview with audiences,
// `hookline` by default) and authorized like a kubectl user would be (a SubjectAccessReview for
// `create webhookdeliveries.hookline.dev` in that namespace); only then are the deliveries
// created, with the operator's identity. Unauthenticated callers get one generic answer (which
// check failed goes to the log and a metric label), and an address that keeps failing gets 429
// before any TokenReview (auth-failures.ts); so does a caller refused too often, before any
// SubjectAccessReview (the same limiter, per identity). A caller that may not `get` deliveries is
// not told how an existing delivery of its event id differs (fanout.ts mayReadExisting). Optionally HTTPS, with a certificate reloaded from
// its files (tls.ts). Matching reads the operator's subscription cache. Bodies are streamed
// against a limit, never buffered past it. Tokens and payloads are never logged. The W3C
// traceparent/tracestate headers are the event's trace context (spec.traceContext). See
// docs/publishing.md for the API reference. In stream mode (a `stream` publisher given) the
// event becomes one JetStream message instead of deliveries, with the same checks before it and
// the same answers (docs/stream-mode.md).
import type { FilterOutcome } from "../core/filter.js";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Server as HttpsServer } from "node:https";
import type { Logger } from "pino";
import { DELIVERY, GROUP, MAX_PAYLOAD_BYTES } from "../api/names.js";
import { ApiError, type KubeClient } from "../kube/client.js";
import { StreamQuotaExceededError, StreamUnavailableError } from "../jetstream/jetstream.js";
import type { TraceContext } from "../jetstream/message.js";
import { httpOrHttps } from "../observability/http-servers.js";
import type { PublishDoorMetrics } from "../observability/metrics.js";
import { objectPath, CORE } from "../kube/types.js";
import { bearerToken, DEFAULT_AUDIENCE, identityKey, Reviewer, TtlCache, type AuthFailure, type Authorization, type Caller, type ReviewerOptions } from "../access/auth.js";
import { AuthFailureLimiter, clientKey, DEFAULT_AUTH_FAILURE_LIMIT, type AuthFailureLimit } from "../access/auth-failures.js";
import { BacklogFullError, IdempotencyConflictError, PayloadTooLargeError, PublishFailedError, PublishInputError } from "./errors.js";
import { publish, type SubscriptionLike } from "./fanout.js";
import { validateTraceContext } from "./input.js";
import { publishToStream, type StreamPublisher } from "./stream.js";
import type { ReloadingTls } from "../access/tls.js";

export interface PublishServerOptions {
  /** The operator's client: it runs the reviews and creates the deliveries. */
  client: KubeClient;
  log: Logger;
  /** Requests are refused with 503 while this says not ready. */
  ready(): { ready: boolean; reason?: string };
  /** The operator's subscription cache; when absent, subscriptions are listed per request. */
  subscriptions?: () => Iterable<SubscriptionLike>;
  /** Namespaces the operator watches (empty: all); others answer 404. */
  watchNamespaces?: readonly string[];
  /** TokenReview / SubjectAccessReview answer cache (default 10 s, 10 000 entries) and the token audiences (default ["hookline"]). */
  reviews?: ReviewerOptions;
  /** Failed authentications allowed per client address (default: 10 at once, then 10 a minute). */
  authFailures?: AuthFailureLimit;
  /** SubjectAccessReviews answered "no" allowed per caller identity (default: 10 at once, then 10 a minute). */
  authzDenials?: AuthFailureLimit;
  /** Counters of refused credentials; absent in tests that do not read them. */
  metrics?: PublishDoorMetrics;
  /** Serve HTTPS with this certificate, reloaded when its files change; absent: plain HTTP. */
  tls?: ReloadingTls;
  /** For tests: the clock of the failed-authentication limit. */
  now?: () => number;
  /** Largest request body; default MAX_PAYLOAD_BYTES plus 16 KiB for the envelope. */
  maxBodyBytes?: number;
  /** Each subscription filter's result at fan-out (webhook_events_filtered_total). */
  onFilter?: (namespace: string, subscription: string, result: FilterOutcome) => void;
  /** Pending deliveries of a subscription (the operator's cache), for spec.maxPending; when absent, listed. */
  pendingOf?: (namespace: string, subscription: string) => number;
  /**
   * Stream mode: publish each event as one JetStream message here (a StreamConnection from
   * HOOKLINE_NATS_URL) instead of creating deliveries. Authentication, authorization, the
   * namespace checks and the event's validation are the same; `subscriptions` and
   * `pendingOf` are not used. A W3C `traceparent` (and `tracestate`) request header travels
   * with the event.
   */
  stream?: StreamPublisher;
  /** Stream mode: each namespace's quota (named in a 429), and what to count when one refuses an event. */
  streamQuota?: { messages: number; bytes: number; refused?: (namespace: string, quota: "messages" | "bytes") => void };
}

/** How long a producer refused by its namespace's full stream is told to wait. */
export const QUOTA_RETRY_AFTER_SECONDS = 10;

export const EVENTS_PATH = /^\/v1\/namespaces\/([^/]+)\/events\/?$/;
const ENVELOPE_BYTES = 16 * 1024;
/** A refused body is read and dropped up to this many bytes (so the client sees the answer), then the connection is cut. */
const DISCARD_LIMIT_BYTES = 4 * 1024 * 1024;
const BODY_FIELDS = new Set(["type", "id", "data"]);
const NAMESPACE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DELIVERY_RESOURCE = `${DELIVERY.plural}.${GROUP}`;
/** Room for the longest W3C tracestate (16 447 characters) beside a bearer token and the usual headers. */
const MAX_HEADER_BYTES = 32 * 1024;
const DEFAULT_AUTHZ_DENIALS: AuthFailureLimit = { burst: 10, perMinute: 10 };
/** Strict: invalid bytes throw; a leading BOM is kept (and refused by JSON.parse, as before). */
const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

interface Reply {
  status: number;
  body: Record<string, unknown>;
  headers?: Record<string, string>;
}

const refuse = (status: number, error: string, extra: Record<string, unknown> = {}, headers?: Record<string, string>): Reply => ({ status, body: { error, ...extra }, ...(headers ? { headers } : {}) });

function send(res: ServerResponse, reply: Reply): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(reply.body);
  res.writeHead(reply.status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), "cache-control": "no-store", ...(reply.headers ?? {}) });
  res.end(text);
}

/** Drops what is left of a request body, up to DISCARD_LIMIT_BYTES, then cuts the connection. */
const discarding = new WeakSet<IncomingMessage>();

function discardBody(req: IncomingMessage): void {
  if (req.complete || discarding.has(req)) return;
  discarding.add(req);
  let dropped = 0;
  req.removeAllListeners("data");
  req.on("data", (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > DISCARD_LIMIT_BYTES) req.socket.destroy();
  });
  req.on("error", () => undefined);
  req.resume();
}

type Body = { ok: true; body: Buffer } | { ok: false };

/** Reads a body up to `limit` bytes; past it, resolves `ok: false` at once and drops the rest. */
function readBody(req: IncomingMessage, limit: number): Promise<Body> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.off("data", onData);
        chunks.length = 0;
        discardBody(req);
        resolve({ ok: false });
        return;
      }
      chunks.push(chunk);
    };
    req.on("data", onData);
    req.once("end", () => resolve({ ok: true, body: Buffer.concat(chunks) }));
    req.once("error", reject);
  });
}

/** 413: `declared` is the Content-Length; without one, the body was cut off past the limit. */
function tooLarge(limit: number, declared?: number): Reply {
  const size = declared !== undefined ? `${declared} bytes` : `more than ${limit} bytes`;
  return refuse(413, `the request body is ${size}; the limit is ${limit} bytes (data at most ${MAX_PAYLOAD_BYTES} bytes serialized)`, { field: "data", limit: MAX_PAYLOAD_BYTES });
}

/** The parsed body as publish input, or the 400 naming what is wrong. */
function parseBody(raw: Buffer, namespace: string): { ok: true; input: { namespace: string; type: string; id?: string; data: unknown } } | { ok: false; reply: Reply } {
  let text: string;
  try {
    // The whole body at once (never chunk by chunk), and strictly: bytes that are not UTF-8
    // would otherwise become U+FFFD in the payload, signed and delivered as if intended.
    text = UTF8.decode(raw);
  } catch {
    return { ok: false, reply: refuse(400, "the body is not valid UTF-8; send JSON encoded as UTF-8", { field: "body" }) };
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    const detail = raw.length === 0 ? "the body is empty" : (err as Error).message;
    return { ok: false, reply: refuse(400, `the body is not valid JSON (${detail}); send {"type": "...", "id": "...", "data": ...}`, { field: "body" }) };
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return { ok: false, reply: refuse(400, 'the body must be a JSON object: {"type": "...", "id": "...", "data": ...}', { field: "body" }) };
  }
  const unknown = Object.keys(body).find((k) => !BODY_FIELDS.has(k));
  if (unknown !== undefined) {
    const hint = unknown === "namespace" ? "the namespace is taken from the URL path" : "expected type, id and data";
    return { ok: false, reply: refuse(400, `unknown field "${unknown}" (${hint})`, { field: unknown }) };
  }
  return { ok: true, input: { ...(body as { type: string; id?: string; data: unknown }), namespace } };
}

/** The namespace of a request to the one route, or the 404/405 for anything else. */
function routeOf(req: IncomingMessage): { namespace: string } | Reply {
  const route = EVENTS_PATH.exec((req.url ?? "/").split("?")[0]!);
  if (!route) return refuse(404, `not found: POST /v1/namespaces/{namespace}/events is the only route`);
  if (req.method !== "POST") return refuse(405, `method ${req.method ?? "?"} not allowed: use POST`, {}, { allow: "POST" });
  let namespace: string;
  try {
    namespace = decodeURIComponent(route[1]!);
  } catch {
    return refuse(404, "not found: the namespace in the path is not valid");
  }
  if (!NAMESPACE.test(namespace) || namespace.length > 63) return refuse(404, `namespace "${namespace}" not found: not a valid namespace name`);
  return { namespace };
}

/** The answer to a typed publish failure; undefined for anything else. */
function publishErrorReply(err: unknown): Reply | undefined {
  if (err instanceof PayloadTooLargeError) return refuse(413, err.message, { field: err.field, limit: err.limit });
  if (err instanceof PublishInputError) return refuse(400, err.message, { field: err.field });
  if (err instanceof IdempotencyConflictError) return refuse(409, err.message, { field: "id", delivery: err.delivery });
  // Backpressure: what could be created was; the rest waits for the backlog to shrink.
  if (err instanceof BacklogFullError) {
    return refuse(429, err.message, { id: err.result.id, deliveries: err.result.deliveries, full: err.full }, { "retry-after": String(err.retryAfterSeconds) });
  }
  // Stream mode: JetStream not reachable or not acknowledging. The same request again is safe.
  if (err instanceof StreamUnavailableError) return refuse(503, err.message, { reason: err.reason }, { "retry-after": "1" });
  if (err instanceof PublishFailedError) {
    // Deliveries already created stay; the same request again creates only the missing ones.
    const transient = err.failures.some((f) => f.status === undefined || f.status === 429 || f.status >= 500);
    const failures = err.failures.map(({ subscription, name, message }) => ({ subscription, name, message }));
    return refuse(transient ? 503 : 500, err.message, { id: err.result.id, deliveries: err.result.deliveries, failures }, transient ? { "retry-after": "1" } : undefined);
  }
  return undefined;
}

/** 429: the namespace's stream is full; this namespace waits, the others publish normally. */
function quotaReply(err: StreamQuotaExceededError, quota: PublishServerOptions["streamQuota"]): Reply {
  quota?.refused?.(err.namespace, err.quota);
  const limit = quota?.[err.quota];
  return refuse(429, err.message, { namespace: err.namespace, stream: err.stream, quota: err.quota, ...(limit ? { limit } : {}) }, { "retry-after": String(QUOTA_RETRY_AFTER_SECONDS) });
}

/**
 * The request's W3C trace context in the stored form, or the 400 naming the header. Refused
 * rather than ignored (as W3C lets a tracing participant do): a producer sends it to have its
 * webhooks traced, and a silent drop would hide its mistake. Several tracestate headers are
 * joined by Node with ", ", as W3C asks; several traceparent headers are refused.
 */
function traceContextOf(req: IncomingMessage): { ok: true; trace: TraceContext | undefined } | { ok: false; reply: Reply } {
  const traceparent = req.headersDistinct.traceparent;
  const tracestate = req.headersDistinct.tracestate?.join(",");
  if (!traceparent) {
    if (tracestate !== undefined && tracestate.replace(/[ \t,]/g, "") !== "") return { ok: false, reply: refuse(400, "the tracestate header needs a traceparent header beside it", { field: "tracestate" }) };
    return { ok: true, trace: undefined };
  }
  if (traceparent.length > 1) return { ok: false, reply: refuse(400, "send one traceparent header, not several", { field: "traceparent" }) };
  try {
    return { ok: true, trace: validateTraceContext({ traceparent: traceparent[0]!, ...(tracestate !== undefined ? { tracestate } : {}) }) };
  } catch (err) {
    if (!(err instanceof PublishInputError)) throw err;
    const header = err.field === "traceContext.tracestate" ? "tracestate" : "traceparent";
    return { ok: false, reply: refuse(400, `the ${header} header is invalid: ${err.message}`, { field: header }) };
  }
}

export function publishServer(opts: PublishServerOptions): Server | HttpsServer {
  const { client, log } = opts;
  const limit = opts.maxBodyBytes ?? MAX_PAYLOAD_BYTES + ENVELOPE_BYTES;
  const reviewer = new Reviewer(client, opts.reviews);
  const limiter = new AuthFailureLimiter(opts.authFailures ?? DEFAULT_AUTH_FAILURE_LIMIT, opts.now ? { now: opts.now } : {});
  const denials = new AuthFailureLimiter(opts.authzDenials ?? DEFAULT_AUTHZ_DENIALS, opts.now ? { now: opts.now } : {});
  const audience = opts.reviews?.audiences?.[0] ?? DEFAULT_AUDIENCE;
  // One answer for every failed authentication: which check failed is for the log and the metric.
  const unauthenticated = refuse(
    401,
    `authentication failed: send a Kubernetes ServiceAccount token issued for this door as Authorization: Bearer <token> (kubectl create token SERVICEACCOUNT --audience ${audience}, or a projected token in the pod)`,
    {},
    { "www-authenticate": 'Bearer realm="hookline"' },
  );

  /** A failed authentication: counted, logged (never the token), and 429 once the address has failed too often. */
  const failed = (client: string, failure: AuthFailure | "missing_token", detail: string, counted: boolean): Reply => {
    const allowance = counted ? { ok: true as const } : limiter.take(client);
    if (!allowance.ok) return throttled(client, allowance.retryAfterSeconds);
    opts.metrics?.authFailures.inc({ reason: failure });
    log.info({ client, reason: failure, detail }, "publish authentication failed");
    return unauthenticated;
  };
  const throttled = (client: string, retryAfterSeconds: number): Reply => {
    opts.metrics?.authThrottled.inc();
    log.debug({ client, retryAfterSeconds }, "publish authentication throttled");
    return refuse(429, `too many failed authentications from your address; retry in ${retryAfterSeconds} s with a valid token`, {}, { "retry-after": String(retryAfterSeconds) });
  };

  /**
   * The TokenReview, behind the failed-authentication limit: a token already reviewed (valid or
   * not) costs no API call; a new one takes from the address's allowance first, given back if
   * it is valid.
   */
  const authenticate = async (req: IncomingMessage): Promise<{ ok: true; caller: Caller; token: string } | { ok: false; reply: Reply }> => {
    const client = clientKey(req.socket.remoteAddress);
    const token = bearerToken(req);
    if (!token) return { ok: false, reply: failed(client, "missing_token", req.headers.authorization ? "the Authorization header is not Bearer <token>" : "no Authorization header", false) };
    const known = reviewer.knows(token);
    if (!known) {
      const allowance = limiter.take(client);
      if (!allowance.ok) return { ok: false, reply: throttled(client, allowance.retryAfterSeconds) };
    }
    const authn = await reviewer.authenticate(token);
    if (authn.ok) {
      if (!known) limiter.refund(client);
      return { ok: true, caller: authn.caller, token };
    }
    return { ok: false, reply: failed(client, authn.failure, authn.reason, !known) };
  };
  /**
   * The SubjectAccessReview for `create`, behind a limit per caller identity, as the TokenReview
   * is behind one per address: an answer held costs no API call; a new question takes from the
   * identity's allowance first, given back when the answer is yes. A caller refused everywhere
   * (a valid token, no rights) cannot make the operator ask once per namespace name it invents.
   */
  const authorize = async (caller: Caller, namespace: string): Promise<Authorization | { throttled: Reply }> => {
    const known = reviewer.knowsAccess(caller, namespace);
    const identity = identityKey(caller);
    if (!known) {
      const allowance = denials.take(identity);
      if (!allowance.ok) {
        opts.metrics?.authzThrottled.inc();
        log.debug({ caller: caller.username, namespace, retryAfterSeconds: allowance.retryAfterSeconds }, "publish authorization throttled");
        return { throttled: refuse(429, `too many refused authorizations for ${caller.username}; retry in ${allowance.retryAfterSeconds} s where it may create ${DELIVERY_RESOURCE}`, {}, { "retry-after": String(allowance.retryAfterSeconds) }) };
      }
    }
    const authz = await reviewer.authorize(caller, namespace);
    if (authz.allowed && !known) denials.refund(identity);
    return authz;
  };
  const namespaces = new TtlCache<boolean | undefined>(opts.reviews?.ttlMs ?? 10_000, 10_000, opts.reviews?.now);
  const watched = opts.watchNamespaces?.length ? new Set(opts.watchNamespaces) : undefined;

  /** Whether the namespace exists; undefined when the operator may not read namespaces. */
  const namespaceExists = (ns: string) =>
    namespaces.get(ns, async () => {
      try {
        await client.request({ method: "GET", path: objectPath(CORE.namespaces, undefined, ns) });
        return true;
      } catch (err) {
        if (err instanceof ApiError && err.isNotFound) return false;
        if (err instanceof ApiError && err.status === 403) return undefined;
        throw err;
      }
    });

  /** Stream mode: one JetStream message; a namespace at its quota is a 429, NATS unavailable a 503. */
  const intoStream = async (stream: StreamPublisher, input: Parameters<typeof publishToStream>[1], traceContext: TraceContext | undefined, caller: string): Promise<Reply> => {
    try {
      const result = await publishToStream(stream, input, traceContext ? { traceContext } : {});
      log.info({ namespace: result.namespace, type: result.type, id: result.id, caller, stream: result.stream, seq: result.seq, duplicate: result.result === "duplicate" }, "event published");
      return { status: 202, body: result as unknown as Record<string, unknown> };
    } catch (err) {
      const reply = err instanceof StreamQuotaExceededError ? quotaReply(err, opts.streamQuota) : publishErrorReply(err);
      if (!reply) throw err;
      return reply;
    }
  };

  const handle = async (req: IncomingMessage): Promise<Reply & { caller?: string }> => {
    const route = routeOf(req);
    if ("status" in route) return route;
    const { namespace } = route;

    const readiness = opts.ready();
    if (!readiness.ready) return refuse(503, `not ready: ${readiness.reason ?? "starting"}; retry shortly`, {}, { "retry-after": "1" });

    const declared = req.headers["content-length"] !== undefined ? Number(req.headers["content-length"]) : undefined;
    if (declared !== undefined && declared > limit) return tooLarge(limit, declared);

    const authn = await authenticate(req);
    if (!authn.ok) return authn.reply;
    const caller = authn.caller.username;
    const authz = await authorize(authn.caller, namespace);
    if ("throttled" in authz) return { ...authz.throttled, caller };
    if (!authz.allowed) return { ...refuse(403, `forbidden: ${authz.reason}`), caller };

    const exists = await namespaceExists(namespace);
    if (exists === false) return { ...refuse(404, `namespace "${namespace}" not found`), caller };
    if (watched && !watched.has(namespace)) return { ...refuse(404, `namespace "${namespace}" is not watched by this operator (WATCH_NAMESPACES); events published there would not be delivered`), caller };

    const read = await readBody(req, limit);
    if (!read.ok) return { ...tooLarge(limit), caller };
    const parsed = parseBody(read.body, namespace);
    if (!parsed.ok) return { ...parsed.reply, caller };
    const trace = traceContextOf(req);
    if (!trace.ok) return { ...trace.reply, caller };
    const traceContext = trace.trace;
    if (opts.stream) return { ...(await intoStream(opts.stream, parsed.input, traceContext, caller)), caller };
    try {
      const pendingOf = opts.pendingOf;
      const result = await publish(client, parsed.input, {
        ...(opts.subscriptions ? { subscriptions: opts.subscriptions } : {}),
        ...(pendingOf ? { pendingCount: (ns: string, sub: string) => pendingOf(ns, sub) } : {}),
        ...(traceContext ? { traceContext } : {}),
        ...(opts.onFilter ? { onFilter: (sub: string, r: FilterOutcome) => opts.onFilter!(namespace, sub, r) } : {}),
        // The deliveries are read with the operator's rights: how an existing one differs is told only to a caller that may read it.
        mayReadExisting: () => reviewer.authorize(authn.caller, namespace, "get").then((a) => a.allowed),
      });
      const created = result.deliveries.filter((d) => d.result === "created").length;
      log.info({ namespace, type: result.type, id: result.id, caller, created, existing: result.deliveries.length - created }, "event published");
      return { status: 202, body: result as unknown as Record<string, unknown>, caller };
    } catch (err) {
      const reply = publishErrorReply(err);
      if (!reply) throw err;
      return { ...reply, caller };
    }
  };

  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    const started = performance.now();
    handle(req)
      .catch((err: Error): Reply => {
        log.warn({ err: err.message }, "publish request failed");
        return refuse(503, `the Kubernetes API server could not be reached or refused the operator: ${err.message}; retry shortly`, {}, { "retry-after": "1" });
      })
      .then((reply: Reply & { caller?: string }) => {
        send(res, reply);
        discardBody(req);
        if (reply.status !== 202) log.debug({ status: reply.status, caller: reply.caller, path: (req.url ?? "").split("?")[0], durationMs: Math.round(performance.now() - started) }, "publish request refused");
      })
      .catch(() => res.destroy());
  };
  const server = httpOrHttps(onRequest, { tls: opts.tls, maxHeaderSize: MAX_HEADER_BYTES });
  // Slow or stalled clients cannot hold a connection for long.
  server.requestTimeout = 30_000;
  server.headersTimeout = 10_000;
  return server;
}
