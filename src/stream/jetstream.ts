// The connection to NATS JetStream for stream mode: connect (and reconnect forever, with
// backoff), make sure the one stream exists with the settings Hookline relies on, and publish a
// message so that it returns only once JetStream acknowledged the write (stored: durable).
// Failures that a producer should retry are one error class, StreamUnavailableError, whose
// message names where the URL came from (HOOKLINE_NATS_URL, --nats).
//
// The stream (docs/adr/0007-stream-mode-on-jetstream.md):
//   HOOKLINE, subjects hookline.>, file storage, retention interest (a message is kept until
//   every consumer whose filter matches it acknowledged it, and dropped at once when none
//   does), discard new (a full stream refuses a publish instead of losing stored events),
//   a duplicate window keyed by Nats-Msg-Id, and max_msg_size above the largest event.
import { readFileSync } from "node:fs";
import { connect, errors as natsErrors, headers as natsHeaders, RequestError, usernamePasswordAuthenticator, type NatsConnection, type NodeConnectionOptions } from "@nats-io/transport-node";
import { DiscardPolicy, JetStreamApiError, jetstream, jetstreamManager, RetentionPolicy, StorageType, type JetStreamClient, type JetStreamManager, type StreamConfig, type StreamInfo } from "@nats-io/jetstream";
import { MAX_MESSAGE_BYTES, MSG_ID_HEADER, type OutgoingMessage } from "./message.js";
import { ALL_SUBJECTS } from "./subjects.js";
import { parseNatsUrl, redactNatsUrl } from "./url.js";

export const STREAM_NAME = "HOOKLINE";

/** What Hookline decides about the stream; defaults in DEFAULT_STREAM_SETTINGS. */
export interface StreamSettings {
  /** Stream name; default HOOKLINE. */
  name: string;
  /** How long a Nats-Msg-Id is remembered: a publish of the same event id in this window is stored once. Default 2 minutes (JetStream's own default). */
  duplicateWindowMs: number;
  /** Replicas in a NATS cluster (1..5); default 1. Use 3 on a production cluster. */
  replicas: number;
  /** Oldest message kept even if not acknowledged; default 0: no limit (an undelivered event is never dropped by age). */
  maxAgeMs: number;
  /** Largest stream size in bytes; default -1: the server's JetStream limit. When full, publishes are refused (discard new). */
  maxBytes: number;
  /** The installation that claims the stream (HOOKLINE_INSTALLATION; stream metadata OWNER_METADATA); undefined: no claim made or checked (a publisher). */
  owner?: string;
}

/** The stream's metadata key naming the installation that uses it: another installation refuses the stream. */
export const OWNER_METADATA = "hookline.dev/installation";

export const DEFAULT_STREAM_SETTINGS: StreamSettings = { name: STREAM_NAME, duplicateWindowMs: 120_000, replicas: 1, maxAgeMs: 0, maxBytes: -1 };

const NANOS_PER_MS = 1_000_000;
const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
const DEFAULT_PUBLISH_TIMEOUT_MS = 5_000;

/** The stream's configuration for `settings`. Pure. */
export function streamConfig(settings: StreamSettings = DEFAULT_STREAM_SETTINGS): Partial<StreamConfig> & { name: string } {
  return {
    name: settings.name,
    description: "Hookline stream mode: one message per published event (docs/stream-mode.md)",
    subjects: [ALL_SUBJECTS],
    retention: RetentionPolicy.Interest,
    storage: StorageType.File,
    discard: DiscardPolicy.New,
    duplicate_window: settings.duplicateWindowMs * NANOS_PER_MS,
    max_msg_size: MAX_MESSAGE_BYTES,
    max_age: settings.maxAgeMs * NANOS_PER_MS,
    max_bytes: settings.maxBytes,
    num_replicas: settings.replicas,
    ...(settings.owner !== undefined ? { metadata: { [OWNER_METADATA]: settings.owner } } : {}),
  };
}

/** Publishing is not possible now; publishing the same event again later is safe. */
export class StreamUnavailableError extends Error {
  override readonly name = "StreamUnavailableError";
  constructor(
    message: string,
    /** unreachable: no connection; no-jetstream: the server has none; no-stream: nothing stores hookline.>; timeout: no acknowledgement; refused: JetStream said no; closed: this client was closed. */
    readonly reason: "unreachable" | "no-jetstream" | "no-stream" | "timeout" | "refused" | "closed",
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
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
  /** The stream ensureStream makes; defaults in DEFAULT_STREAM_SETTINGS. */
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
  const base = Math.min(5_000, 250 * 2 ** Math.min(attempt, 10));
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
  private streamEnsured = false;
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
   * Creates the stream, or updates what may change (subjects, duplicate window, limits,
   * replicas) when it exists with other values. A stream of that name with another retention
   * or storage is refused: changing them would need a new stream, which only an operator of the
   * NATS server should decide (the error says so).
   */
  async ensureStream(): Promise<{ action: "created" | "updated" | "unchanged"; info: StreamInfo }> {
    const jsm = await this.jetstreamManager();
    const wanted = streamConfig(this.settings);
    const run = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
      try {
        return await fn();
      } catch (err) {
        throw this.unavailable(err, what);
      }
    };
    let info = await run(`reading stream ${wanted.name}`, async () => {
      try {
        return await jsm.streams.info(wanted.name);
      } catch (err) {
        if (err instanceof JetStreamApiError && err.code === STREAM_NOT_FOUND) return undefined;
        throw err;
      }
    });
    if (!info) {
      try {
        info = await jsm.streams.add(wanted);
        this.streamEnsured = true;
        return { action: "created", info };
      } catch (err) {
        // Another replica or publisher created it first: compare with what is there.
        if (!(err instanceof JetStreamApiError && err.code === STREAM_NAME_IN_USE)) throw this.unavailable(err, `creating stream ${wanted.name}`);
        info = await run(`reading stream ${wanted.name}`, () => jsm.streams.info(wanted.name));
      }
    }
    const have = info.config;
    const owner = have.metadata?.[OWNER_METADATA];
    if (this.settings.owner !== undefined && owner !== undefined && owner !== this.settings.owner) {
      throw new StreamUnavailableError(
        `stream ${wanted.name} on NATS at ${this.where} belongs to another Hookline installation, ${JSON.stringify(owner)} (this one is ${JSON.stringify(this.settings.owner)}, HOOKLINE_INSTALLATION): ` +
          `two installations on one stream would take each other's events and delete each other's consumers. Give each installation its own NATS account (docs/stream-mode.md); ` +
          `if ${JSON.stringify(owner)} is this installation under an earlier name, set HOOKLINE_INSTALLATION=${owner}`,
        "refused",
      );
    }
    if (have.retention !== wanted.retention || have.storage !== wanted.storage) {
      throw new StreamUnavailableError(
        `stream ${wanted.name} on NATS at ${this.where} has retention ${have.retention} and storage ${have.storage}; Hookline needs retention ${wanted.retention} and storage ${wanted.storage}. ` +
          `These cannot change on a stream: delete it (nats stream rm ${wanted.name}) once it holds nothing undelivered, or point Hookline at another server`,
        "refused",
      );
    }
    const changed = (["subjects", "duplicate_window", "max_msg_size", "max_age", "max_bytes", "discard", "num_replicas"] as const).filter((k) => JSON.stringify(have[k]) !== JSON.stringify(wanted[k]));
    // A stream made before installations claimed one (or by a publisher) is claimed now.
    const update: string[] = [...changed, ...(this.settings.owner !== undefined && owner === undefined ? ["metadata"] : [])];
    this.streamEnsured = true;
    if (update.length === 0) return { action: "unchanged", info };
    const { name: _name, retention: _r, storage: _s, ...mutable } = wanted;
    info = await run(`updating stream ${wanted.name} (${update.join(", ")})`, () => jsm.streams.update(wanted.name, mutable));
    return { action: "updated", info };
  }

  /**
   * Publishes one message and resolves once JetStream stored it (or recognized its
   * Nats-Msg-Id within the duplicate window: `duplicate: true`, stored once). When no stream
   * takes the subject yet, creates it (ensureStream) and publishes again, once.
   */
  async publish(message: OutgoingMessage, opts: { timeoutMs?: number } = {}): Promise<StreamAck> {
    if (this.closing || this.nc.isClosed()) throw new StreamUnavailableError(`the connection to NATS at ${this.where} is closed`, "closed");
    if (!this.isConnected()) throw new StreamUnavailableError(`not connected to NATS at ${this.where} (reconnecting); publish again shortly: nothing is duplicated`, "unreachable");
    const h = natsHeaders();
    for (const [k, v] of message.headers) if (k !== MSG_ID_HEADER) h.set(k, v);
    const once = () => this.js.publish(message.subject, message.body, { msgID: message.msgId, headers: h, timeout: opts.timeoutMs ?? this.opts.publishTimeoutMs ?? DEFAULT_PUBLISH_TIMEOUT_MS });
    try {
      let ack;
      try {
        ack = await once();
      } catch (err) {
        if (!isNoResponders(err) || this.streamEnsured) throw err;
        await this.ensureStream().catch((e: unknown) => {
          // A publisher's user may not make the stream (docs/stream-mode.md): only the operator does.
          throw isPermissionViolation(e) ? new StreamUnavailableError(`no JetStream stream takes ${ALL_SUBJECTS} on NATS at ${this.where}: stream ${this.settings.name} is missing (the operator creates it in stream mode; this NATS user may not)`, "no-stream", { cause: e }) : e;
        });
        ack = await once();
      }
      return { stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate };
    } catch (err) {
      throw this.unavailable(err, "publishing");
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
    if (isNoResponders(err)) {
      return what === "publishing" ?
          new StreamUnavailableError(`no JetStream stream takes ${ALL_SUBJECTS} on NATS at ${this.where}: stream ${this.settings.name} is missing (the operator creates it in stream mode)`, "no-stream", { cause: err })
        : new StreamUnavailableError(`NATS at ${this.where} has no JetStream (start nats-server with --jetstream) while ${what}`, "no-jetstream", { cause: err });
    }
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

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}
