// The connection to NATS JetStream for stream mode: connect (and reconnect forever, with
// backoff), make sure a namespace's stream exists with the settings Hookline relies on, and
// publish a message so that it returns only once JetStream acknowledged the write (stored:
// durable). Failures that a producer should retry are one error class, StreamUnavailableError,
// whose message names where the URL came from (HOOKLINE_NATS_URL, --nats); a namespace over its
// quota is another, StreamQuotaExceededError.
//
// The streams (layout.ts, docs/adr/0013-one-stream-per-namespace.md): one per namespace,
// HOOKLINE_<namespace> on hookline.<namespace>.>, interest retention (a message is kept until
// every consumer whose filter matches it acknowledged it, and dropped at once when none does),
// discard new with the namespace's quota (a full namespace refuses a publish instead of losing
// stored events), a duplicate window keyed by Nats-Msg-Id, max_msg_size above the largest event.
// The operator makes them, each claimed by its installation (HOOKLINE_INSTALLATION in the
// stream's metadata: another installation refuses it); a publisher never does.
import { readFileSync } from "node:fs";
import { connect, errors as natsErrors, headers as natsHeaders, RequestError, usernamePasswordAuthenticator, type NatsConnection, type NodeConnectionOptions } from "@nats-io/transport-node";
import { JetStreamApiError, jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager, type StreamInfo } from "@nats-io/jetstream";
import { DEFAULT_LAYOUT, legacyStreamPlan, namespaceOfStream, namespaceStreamConfig, namespaceStreamName, OWNER_METADATA, streamDifferences, streamOwner, streamOwnerProblem, type LayoutSettings } from "./layout.js";
import { MSG_ID_HEADER, type OutgoingMessage } from "./message.js";
import { ALL_SUBJECTS, parseEventSubject } from "./subjects.js";
import { parseNatsUrl, redactNatsUrl } from "./url.js";
import { doubling } from "../lib/backoff.js";
import { sleep } from "../lib/sleep.js";

/** The prefix of every namespace's stream (HOOKLINE_<namespace>), and the name of the one stream of earlier versions. */
export const STREAM_NAME = DEFAULT_LAYOUT.name;

/** What Hookline decides about the streams (layout.ts); defaults in DEFAULT_STREAM_SETTINGS. */
export type StreamSettings = LayoutSettings;

/** The streams' metadata key naming the installation that uses them: another installation refuses them. */
export { OWNER_METADATA };

export const DEFAULT_STREAM_SETTINGS: StreamSettings = DEFAULT_LAYOUT;

const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
const DEFAULT_PUBLISH_TIMEOUT_MS = 5_000;

/** Publishing is not possible now; publishing the same event again later is safe. */
export class StreamUnavailableError extends Error {
  override readonly name = "StreamUnavailableError";
  constructor(
    message: string,
    /**
     * unreachable: no connection; no-jetstream: the server has none; no-stream: nothing stores
     * the namespace's subjects (the operator makes its stream); timeout: no acknowledgement;
     * refused: JetStream said no; legacy-stream: the one stream of earlier versions still holds
     * events (the operator neither deletes nor moves them); closed: this client was closed.
     */
    readonly reason: "unreachable" | "no-jetstream" | "no-stream" | "timeout" | "refused" | "legacy-stream" | "closed",
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** Which of a namespace's quotas refused a publish. */
export type StreamQuota = "messages" | "bytes";

/**
 * JetStream refused the event: its namespace's stream holds as many messages, or as many bytes,
 * as its quota allows (HOOKLINE_STREAM_NAMESPACE_MAX_MESSAGES, _MAX_BYTES). Other namespaces
 * are not affected. Publishing the same event again once the namespace's subscriptions caught
 * up is safe (same id: nothing is duplicated).
 */
export class StreamQuotaExceededError extends Error {
  override readonly name = "StreamQuotaExceededError";
  constructor(
    readonly namespace: string,
    /** The namespace's stream (HOOKLINE_<namespace>). */
    readonly stream: string,
    readonly quota: StreamQuota,
    options?: ErrorOptions,
  ) {
    super(
      `namespace ${namespace} is over its stream quota of ${quota === "messages" ? "messages (HOOKLINE_STREAM_NAMESPACE_MAX_MESSAGES)" : "bytes (HOOKLINE_STREAM_NAMESPACE_MAX_BYTES)"}: ` +
        `stream ${stream} holds as many events not yet delivered as it may, and JetStream refused this one. ` +
        `Publish it again with the same id once the namespace's subscriptions caught up (nothing is duplicated); other namespaces are not affected`,
      options,
    );
  }
}

/** JetStream's error code when a message could not be stored; its description says which limit. */
const STORE_FAILED = 10077;
const QUOTA_DESCRIPTIONS: Record<string, StreamQuota> = { "maximum messages exceeded": "messages", "maximum bytes exceeded": "bytes" };

/** One namespace's stream as listed (namespaceStreams). */
export interface NamespaceStream {
  namespace: string;
  stream: string;
  /** Events it holds (not yet acknowledged by every interested consumer), and their bytes. */
  messages: number;
  bytes: number;
  consumers: number;
  /** When its oldest message was stored (epoch ms); absent when it holds none. */
  oldestAt?: number;
  /** The installation that claimed it (HOOKLINE_INSTALLATION); absent when none did. */
  owner?: string;
}

/** What JetStream answered for one published message. */
export interface StreamAck {
  stream: string;
  /** The message's sequence in the stream (for a duplicate: the one stored first). */
  seq: number;
  /** True when the same Nats-Msg-Id was published within the duplicate window: stored once, not twice. */
  duplicate: boolean;
}

export type StreamConnectionEvent =
  | { type: "connected" | "reconnected" | "disconnected"; server: string }
  | { type: "retrying"; attempt: number; delayMs: number; error: string }
  | { type: "error"; error: string }
  | { type: "closed" };

export interface ConnectStreamOptions {
  /** HOOKLINE_NATS_URL or --nats: nats://host:port or tls://…, or a comma-separated list. */
  url: string;
  /** Where the URL came from, named in every error ("HOOKLINE_NATS_URL", "--nats"). */
  source: string;
  /** Client name in the server's monitoring (connz). */
  name?: string;
  /**
   * Keep trying the first connection (with backoff) until it succeeds or `signal` aborts:
   * the operator. Without it, one attempt that throws StreamUnavailableError: a CLI, a script.
   */
  waitForServer?: boolean;
  signal?: AbortSignal;
  /** One connection attempt; default 5 s. */
  connectTimeoutMs?: number;
  /** How long a publish waits for JetStream's acknowledgement; default 5 s. */
  publishTimeoutMs?: number;
  /** Connection changes and retries, for logs. Never carries credentials. */
  onEvent?: (event: StreamConnectionEvent) => void;
  /** The streams ensureStream makes (the operator); defaults in DEFAULT_STREAM_SETTINGS. */
  stream?: Partial<StreamSettings>;
  /** Credentials besides the URL's (stream/auth.ts NatsClientAuth): a user and the file holding its password, read at each connection attempt. */
  credentials?: { user: string; passwordFile: string };
  /** TLS files (CA of the server's certificate; this client's certificate and key): any of them requires TLS, as tls:// does. */
  tls?: { caFile?: string; certFile?: string; keyFile?: string };
  /** Replies (JetStream's answers, pulled messages) come on this subject prefix; default _INBOX. */
  inboxPrefix?: string;
}

/** The password of a password file: its content without a final newline. Read at each connection attempt, so a rotated Secret is used at the next one. */
function passwordFrom(file: string): string {
  try {
    return readFileSync(file, "utf8").replace(/\r?\n$/, "");
  } catch (err) {
    throw new Error(`cannot read the NATS password file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/** Reconnect delays: 250 ms doubling to 5 s, plus up to 20 % jitter. */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  const base = doubling(attempt, 250, 5_000);
  return Math.round(base * (1 + 0.2 * random()));
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error && err.cause.message !== err.message ? ` (${err.cause.message})` : "";
  return `${err.message}${cause}`;
}

/** A Permissions Violation of the NATS server: this user may not publish to (or subscribe to) that subject. */
function isPermissionViolation(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = e.cause) if (e instanceof natsErrors.PermissionViolationError) return true;
  return false;
}

const isNoResponders = (err: unknown): boolean => err instanceof Error && (err instanceof RequestError ? err.isNoResponders() : err.cause instanceof RequestError && err.cause.isNoResponders());

/** A connection to NATS with JetStream, shared by every publish of a process (and later every consumer). */
export class StreamConnection {
  readonly js: JetStreamClient;
  readonly settings: StreamSettings;
  /** The URL without credentials, for messages and logs. */
  readonly where: string;
  private connected = true;
  private manager?: Promise<JetStreamManager>;
  private closing = false;

  private constructor(
    readonly nc: NatsConnection,
    private readonly opts: ConnectStreamOptions,
    private readonly reconnects: { attempt: number },
  ) {
    this.js = jetstream(nc);
    this.settings = { ...DEFAULT_STREAM_SETTINGS, ...opts.stream };
    this.where = `${redactNatsUrl(opts.url)} (${opts.source})`;
    void this.watch();
  }

  /**
   * Connects to the NATS server(s) of `opts.url`. Once connected it reconnects forever, with
   * backoff, whenever the connection drops. Throws StreamUnavailableError naming opts.source
   * when the server cannot be reached (unless waitForServer), or when it has no JetStream.
   */
  static async connect(opts: ConnectStreamOptions): Promise<StreamConnection> {
    const parsed = parseNatsUrl(opts.url);
    const where = `${redactNatsUrl(opts.url)} (${opts.source})`;
    const reconnects = { attempt: 0 };
    const options: NodeConnectionOptions = {
      servers: parsed.servers,
      name: opts.name ?? "hookline",
      timeout: opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
      maxReconnectAttempts: -1,
      reconnectDelayHandler: () => backoffMs(reconnects.attempt++),
      ...(parsed.tls || opts.tls ? { tls: { ...opts.tls } } : {}),
      ...(parsed.user !== undefined ? { user: parsed.user, pass: parsed.pass } : {}),
      ...(parsed.token !== undefined ? { token: parsed.token } : {}),
      ...(opts.credentials ? { authenticator: usernamePasswordAuthenticator(opts.credentials.user, () => passwordFrom(opts.credentials!.passwordFile)) } : {}),
      ...(opts.inboxPrefix ? { inboxPrefix: opts.inboxPrefix } : {}),
    };
    for (let attempt = 0; ; attempt++) {
      if (opts.signal?.aborted) throw new StreamUnavailableError(`connecting to NATS at ${where} was cancelled`, "closed");
      try {
        const nc = await connect(options);
        const conn = new StreamConnection(nc, opts, reconnects);
        opts.onEvent?.({ type: "connected", server: nc.getServer() });
        return conn;
      } catch (err) {
        const auth = err instanceof natsErrors.AuthorizationError || err instanceof natsErrors.UserAuthenticationExpiredError;
        const message = auth ? `NATS at ${where} refused the credentials: ${describe(err)}` : `cannot reach NATS at ${where}: ${describe(err)}`;
        // Credentials do not get better by retrying: only a server that is not up yet does.
        if (!opts.waitForServer || auth) throw new StreamUnavailableError(message, "unreachable", { cause: err });
        const delayMs = backoffMs(attempt);
        opts.onEvent?.({ type: "retrying", attempt: attempt + 1, delayMs, error: message });
        await sleep(delayMs, opts.signal);
      }
    }
  }

  private async watch(): Promise<void> {
    const emit = this.opts.onEvent ?? (() => undefined);
    try {
      for await (const s of this.nc.status()) {
        if (s.type === "disconnect") {
          this.connected = false;
          emit({ type: "disconnected", server: s.server });
        } else if (s.type === "reconnect") {
          this.connected = true;
          this.reconnects.attempt = 0;
          emit({ type: "reconnected", server: s.server });
        } else if (s.type === "error") {
          emit({ type: "error", error: describe(s.error) });
        } else if (s.type === "close") {
          this.connected = false;
        }
      }
    } catch (err) {
      emit({ type: "error", error: describe(err) });
    }
    this.connected = false;
    emit({ type: "closed" });
  }

  /**
   * Whether the server this connection is on refuses a client without credentials: its INFO
   * says it requires authentication (users, tokens, nkeys, accounts) or a verified TLS client
   * certificate. Otherwise anyone who reaches it gets in, whatever this client sent.
   */
  serverAuthenticates(): boolean {
    const info = this.nc.info;
    return info?.auth_required === true || info?.tls_verify === true;
  }

  /** The prefix of this connection's inboxes (replies, pulled messages): ConnectStreamOptions.inboxPrefix, or NATS's default. */
  get inboxPrefix(): string {
    return this.opts.inboxPrefix ?? "_INBOX";
  }

  /** Whether the connection is up now (false while reconnecting and after close). */
  isConnected(): boolean {
    return this.connected && !this.nc.isClosed();
  }

  /** The JetStream manager (stream and consumer API); fails with StreamUnavailableError when the server has no JetStream. */
  jetstreamManager(): Promise<JetStreamManager> {
    this.manager ??= jetstreamManager(this.nc).catch((err: unknown) => {
      this.manager = undefined;
      throw this.unavailable(err, "managing JetStream");
    });
    return this.manager;
  }

  /**
   * Before the first namespace stream: the one stream of earlier versions (named like the
   * prefix, on hookline.>) takes every namespace's subjects. Empty, it is deleted (nothing is
   * lost), after its subjects were moved aside so that no publish lands in it meanwhile; holding
   * events, it is refused with StreamUnavailableError "legacy-stream", neither deleted nor
   * changed: its events are delivered by the version that wrote them (layout.ts). A stream of
   * another installation (HOOKLINE_INSTALLATION), the old one or a namespace's, is refused
   * ("refused", the operator not ready) and left as it is: the account holds two installations.
   */
  async prepare(): Promise<{ legacy: "none" | "removed" }> {
    const jsm = await this.jetstreamManager();
    const name = this.settings.name;
    const info = await this.run(`reading stream ${name}`, () => streamInfo(jsm, name));
    const plan = legacyStreamPlan(info);
    // Another installation's streams on this account: the mistake is said at once (not ready), and none of them is touched.
    if (plan !== "none") this.checkOwner(name, streamOwner(info!));
    for (const ns of await this.namespaceStreams()) this.checkOwner(ns.stream, ns.owner);
    if (plan === "none") return { legacy: "none" };
    if (plan === "remove") {
      // Moved aside first, then read again: a publish that came between the two reads is seen,
      // and the stream is put back and refused instead of deleted with it.
      const subjects = info!.config.subjects ?? [];
      await this.run(`retiring stream ${name}`, () => jsm.streams.update(name, { subjects: [`${name}.retired`] }));
      const again = await this.run(`reading stream ${name}`, () => streamInfo(jsm, name));
      if (again && again.state.messages === 0) {
        await this.run(`deleting the empty stream ${name}`, () => jsm.streams.delete(name));
        return { legacy: "removed" };
      }
      if (again) await this.run(`restoring stream ${name}`, () => jsm.streams.update(name, { subjects }));
    }
    const held = (await this.run(`reading stream ${name}`, () => streamInfo(jsm, name)))?.state.messages ?? 0;
    throw new StreamUnavailableError(
      `stream ${name} on NATS at ${this.where} is the one stream of an earlier Hookline (subjects ${ALL_SUBJECTS}) and holds ${held} events not yet delivered; ` +
        `this version keeps one stream per namespace (${name}_<namespace>) and neither deletes nor moves them. Let the earlier version deliver them ` +
        `(stop the producers, wait until nats stream info ${name} shows 0 messages); this operator then removes the empty stream by itself. ` +
        `To drop them instead: nats stream rm ${name}`,
      "legacy-stream",
    );
  }

  /**
   * Creates `namespace`'s stream, or updates what may change (subjects, duplicate window, the
   * quota, the backstop age, replicas) when it exists with other values. A stream of that name
   * with another retention or storage is refused: changing them would need a new stream, which
   * only an operator of the NATS server should decide (the error says so). The operator only:
   * publishers never make streams.
   */
  async ensureStream(namespace: string): Promise<{ action: "created" | "updated" | "unchanged"; info: StreamInfo }> {
    const jsm = await this.jetstreamManager();
    const wanted = namespaceStreamConfig(this.settings, namespace);
    let info = await this.run(`reading stream ${wanted.name}`, () => streamInfo(jsm, wanted.name));
    if (!info) {
      try {
        return { action: "created", info: await jsm.streams.add(wanted) };
      } catch (err) {
        // Another replica created it first: compare with what is there.
        if (!(err instanceof JetStreamApiError && err.code === STREAM_NAME_IN_USE)) throw this.noRoom(err, wanted.name) ?? this.unavailable(err, `creating stream ${wanted.name}`);
        info = await this.run(`reading stream ${wanted.name}`, () => jsm.streams.info(wanted.name));
      }
    }
    const have = info.config;
    this.checkOwner(wanted.name, streamOwner(info));
    if (have.retention !== wanted.retention || have.storage !== wanted.storage) {
      throw new StreamUnavailableError(
        `stream ${wanted.name} on NATS at ${this.where} has retention ${have.retention} and storage ${have.storage}; Hookline needs retention ${wanted.retention} and storage ${wanted.storage}. ` +
          `These cannot change on a stream: delete it (nats stream rm ${wanted.name}) once it holds nothing undelivered, or point Hookline at another server`,
        "refused",
      );
    }
    const changed = streamDifferences(have, wanted);
    if (changed.length === 0) return { action: "unchanged", info };
    const { name: _name, retention: _r, storage: _s, ...mutable } = wanted;
    try {
      info = await jsm.streams.update(wanted.name, { ...mutable, metadata: { ...(have.metadata ?? {}), ...mutable.metadata } });
    } catch (err) {
      throw this.noRoom(err, wanted.name) ?? this.unavailable(err, `updating stream ${wanted.name} (${changed.join(", ")})`);
    }
    return { action: "updated", info };
  }

  /** Throws StreamUnavailableError "refused" when another installation claimed the stream (HOOKLINE_INSTALLATION). */
  private checkOwner(stream: string, owner: string | undefined): void {
    const problem = streamOwnerProblem(owner, this.settings.owner);
    if (problem) throw new StreamUnavailableError(`stream ${stream} on NATS at ${this.where} ${problem}`, "refused");
  }

  /**
   * JetStream reserves each stream's max_bytes on its servers' storage: a namespace's stream is
   * refused when the quotas of every namespace (times their replicas) pass what the servers have.
   */
  private noRoom(err: unknown, stream: string): StreamUnavailableError | undefined {
    if (!(err instanceof JetStreamApiError && (err.code === STORAGE_RESOURCES_EXCEEDED || err.code === MEMORY_RESOURCES_EXCEEDED))) return undefined;
    const { namespaceMaxBytes: bytes, replicas } = this.settings;
    return new StreamUnavailableError(
      `JetStream at ${this.where} has no room for stream ${stream}: every namespace's stream reserves its quota of ${bytes} bytes (HOOKLINE_STREAM_NAMESPACE_MAX_BYTES)` +
        `${replicas > 1 ? ` on each of its ${replicas} replicas` : ""} on the servers' JetStream storage, and what is left is less (${err.message}). ` +
        `Give the NATS servers more JetStream storage (max_file, the NATS chart's fileStore size) or lower the quota (docs/capacity.md#stream-mode)`,
      "refused",
      { cause: err },
    );
  }

  /** Hookline's namespace streams on the server (recognized by name and metadata), with what each holds. */
  async namespaceStreams(): Promise<NamespaceStream[]> {
    const jsm = await this.jetstreamManager();
    return this.run("listing streams", async () => {
      const out: NamespaceStream[] = [];
      for await (const si of jsm.streams.list()) {
        const namespace = namespaceOfStream(this.settings.name, si);
        if (namespace === undefined) continue;
        const firstAt = si.state.messages > 0 ? Date.parse(si.state.first_ts) : NaN;
        const owner = streamOwner(si);
        out.push({
          namespace,
          stream: si.config.name,
          messages: si.state.messages,
          bytes: si.state.bytes,
          consumers: si.state.consumer_count,
          ...(Number.isFinite(firstAt) ? { oldestAt: firstAt } : {}),
          ...(owner !== undefined ? { owner } : {}),
        });
      }
      return out.sort((a, b) => (a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : 0));
    });
  }

  /** Deletes a namespace's stream (the leader, for one with no subscription, no consumer and no message left). */
  async deleteStream(name: string): Promise<boolean> {
    const jsm = await this.jetstreamManager();
    try {
      return await jsm.streams.delete(name);
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === STREAM_NOT_FOUND) return false;
      throw this.unavailable(err, `deleting stream ${name}`);
    }
  }

  /** The stream a message goes to (its namespace's). */
  streamOf(message: OutgoingMessage): { namespace: string; stream: string } | undefined {
    const ns = parseEventSubject(message.subject)?.namespace;
    return ns === undefined ? undefined : { namespace: ns, stream: namespaceStreamName(this.settings.name, ns) };
  }

  /**
   * Publishes one message and resolves once JetStream stored it (or recognized its
   * Nats-Msg-Id within the duplicate window: `duplicate: true`, stored once). Throws
   * StreamQuotaExceededError when the namespace's stream is full, StreamUnavailableError
   * otherwise (no-stream when the namespace has no stream yet: the operator makes it).
   */
  async publish(message: OutgoingMessage, opts: { timeoutMs?: number } = {}): Promise<StreamAck> {
    if (this.closing || this.nc.isClosed()) throw new StreamUnavailableError(`the connection to NATS at ${this.where} is closed`, "closed");
    if (!this.isConnected()) throw new StreamUnavailableError(`not connected to NATS at ${this.where} (reconnecting); publish again shortly: nothing is duplicated`, "unreachable");
    const h = natsHeaders();
    for (const [k, v] of message.headers) if (k !== MSG_ID_HEADER) h.set(k, v);
    try {
      const ack = await this.js.publish(message.subject, message.body, { msgID: message.msgId, headers: h, timeout: opts.timeoutMs ?? this.opts.publishTimeoutMs ?? DEFAULT_PUBLISH_TIMEOUT_MS });
      return { stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate };
    } catch (err) {
      const target = this.streamOf(message);
      const quota = err instanceof JetStreamApiError && err.code === STORE_FAILED ? QUOTA_DESCRIPTIONS[err.message.trim().toLowerCase()] : undefined;
      if (quota && target) throw new StreamQuotaExceededError(target.namespace, target.stream, quota, { cause: err });
      if (isNoResponders(err) && target) {
        throw new StreamUnavailableError(
          `no JetStream stream takes ${message.subject} on NATS at ${this.where}: stream ${target.stream} is missing. The operator (stream mode) makes it with the namespace's first WebhookSubscription; ` +
            `until one exists, nothing in namespace ${target.namespace} would be delivered`,
          "no-stream",
          { cause: err },
        );
      }
      throw this.unavailable(err, "publishing");
    }
  }

  private async run<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw this.unavailable(err, what);
    }
  }

  private unavailable(err: unknown, what: string): StreamUnavailableError {
    if (err instanceof StreamUnavailableError) return err;
    const detail = describe(err);
    if (err instanceof natsErrors.TimeoutError || (err instanceof Error && err.cause instanceof natsErrors.TimeoutError)) {
      return new StreamUnavailableError(
        `no answer from JetStream at ${this.where} while ${what}${what === "publishing" ? ": the event may or may not be stored; publish it again with the same id, within the duplicate window nothing is duplicated" : ""}`,
        "timeout",
        { cause: err },
      );
    }
    if (isNoResponders(err)) return new StreamUnavailableError(`NATS at ${this.where} has no JetStream (start nats-server with --jetstream) while ${what}`, "no-jetstream", { cause: err });
    if (isPermissionViolation(err)) return new StreamUnavailableError(`NATS at ${this.where} refused ${what}: ${detail}: the NATS user of ${this.opts.source} may not do it (docs/stream-mode.md says what each user may do)`, "refused", { cause: err });
    if (err instanceof natsErrors.ClosedConnectionError || err instanceof natsErrors.DrainingConnectionError) return new StreamUnavailableError(`the connection to NATS at ${this.where} is closed`, "closed", { cause: err });
    if (err instanceof JetStreamApiError) return new StreamUnavailableError(`JetStream at ${this.where} refused ${what}: ${detail} (JetStream error ${err.code})`, "refused", { cause: err });
    return new StreamUnavailableError(`${what} on NATS at ${this.where} failed: ${detail}`, "refused", { cause: err });
  }

  /** Flushes what is pending and closes the connection. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    if (this.nc.isClosed()) return;
    try {
      await this.nc.drain();
    } catch {
      await this.nc.close().catch(() => undefined);
    }
  }
}

const STREAM_NOT_FOUND = 10059;
const STREAM_NAME_IN_USE = 10058;
const STORAGE_RESOURCES_EXCEEDED = 10047;
const MEMORY_RESOURCES_EXCEEDED = 10028;

/** A stream's info; undefined when there is none of that name. */
async function streamInfo(jsm: JetStreamManager, name: string): Promise<StreamInfo | undefined> {
  try {
    return await jsm.streams.info(name);
  } catch (err) {
    if (err instanceof JetStreamApiError && err.code === STREAM_NOT_FOUND) return undefined;
    throw err;
  }
}
