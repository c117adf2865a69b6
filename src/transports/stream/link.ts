// The operator's connection to NATS JetStream in stream mode (HOOKLINE_NATS_URL): connects in
// the background from the first moment, so CR mode and the probes never wait for NATS; checks
// the layout once (prepare: the one stream of earlier versions, removed when empty, refused
// while it holds events; any stream another installation claimed, refused); makes the
// namespaces' streams on demand (ensureStream); answers readiness; and is the publisher the
// HTTP door writes to, making the namespace's stream when it has none yet. Everything of stream
// mode that needs JetStream waits for `connected()`.
//
// A NATS that lets anyone in is refused (stream/auth.ts): without credentials the link does not
// connect at all; connected to a server that does not require authentication (at the first
// connection or a reconnection) it closes the connection. Either way the operator is not ready
// and says why, until HOOKLINE_NATS_ALLOW_INSECURE=true.
import type { Logger } from "pino";
import { noCredentialsProblem, openServerProblem, type NatsClientAuth } from "../../jetstream/auth.js";
import { STREAM_NAME, StreamConnection, StreamUnavailableError, type StreamAck, type StreamSettings } from "../../jetstream/jetstream.js";
import { namespaceStreamName } from "../../jetstream/layout.js";
import type { OutgoingMessage } from "../../jetstream/message.js";
import { OPERATOR_INBOX_PREFIX } from "../../jetstream/permissions.js";
import { parseNatsUrl, redactNatsUrl } from "../../jetstream/url.js";
import { doubling } from "../../lib/backoff.js";
import { sleep } from "../../lib/sleep.js";

export interface StreamLinkOptions {
  /** HOOKLINE_NATS_URL (may hold credentials: only ever passed to the client). */
  url: string;
  /** Client name in the server's monitoring (the replica's identity). */
  name: string;
  log: Logger;
  stream?: Partial<StreamSettings>;
  /** Credentials besides the URL's, TLS files, and HOOKLINE_NATS_ALLOW_INSECURE. */
  auth?: NatsClientAuth & { allowInsecure: boolean };
}

/** Between attempts to make the stream (a server without JetStream, a stream of the wrong kind). */
const ENSURE_RETRY_MS = { initial: 1_000, max: 30_000 };

export class StreamLink {
  private conn: StreamConnection | undefined;
  private readonly abort = new AbortController();
  private readonly ready: Promise<StreamConnection>;
  private resolveReady!: (c: StreamConnection) => void;
  private streamReady = false;
  private started = false;
  /** Why stream mode is off: NATS would let anyone in (stream/auth.ts). */
  private insecure: string | undefined;
  /** Why the stream cannot be used, as last seen (another installation's, of the wrong kind). */
  private streamProblem: string | undefined;

  constructor(private readonly o: StreamLinkOptions) {
    this.ready = new Promise((resolve) => (this.resolveReady = resolve));
  }

  /** Starts connecting (in the background: this returns at once). */
  start(): void {
    if (this.started) return;
    this.started = true;
    void this.connect();
  }

  private async connect(): Promise<void> {
    const { log } = this.o;
    const auth = this.o.auth ?? { allowInsecure: false };
    const where = redactNatsUrl(this.o.url);
    this.insecure = noCredentialsProblem(where, parseNatsUrl(this.o.url), auth, auth.allowInsecure);
    if (this.insecure) {
      log.error({ url: where }, this.insecure);
      return;
    }
    let conn: StreamConnection | undefined;
    for (let attempt = 0; !conn && !this.abort.signal.aborted; attempt++) {
      try {
        conn = await StreamConnection.connect({
          url: this.o.url,
          source: "HOOKLINE_NATS_URL",
          name: this.o.name,
          waitForServer: true,
          signal: this.abort.signal,
          inboxPrefix: OPERATOR_INBOX_PREFIX,
          ...(auth.credentials ? { credentials: auth.credentials } : {}),
          ...(auth.tls ? { tls: auth.tls } : {}),
          ...(this.o.stream ? { stream: this.o.stream } : {}),
          onEvent: (e) => {
            if (e.type === "retrying") log.warn({ attempt: e.attempt, retryInMs: e.delayMs, err: e.error }, "stream mode: NATS not reachable yet");
            else if (e.type === "disconnected") log.warn({ server: e.server }, "stream mode: disconnected from NATS; reconnecting");
            else if (e.type === "reconnected" || e.type === "connected") log.info({ server: e.server }, `stream mode: ${e.type} to NATS`);
            else if (e.type === "error") log.warn({ err: e.error }, "stream mode: NATS connection error");
            if (e.type === "reconnected") this.checkServer(where, auth.allowInsecure);
          },
        });
      } catch (err) {
        if (!this.abort.signal.aborted) log.error({ err: (err as Error).message }, "stream mode: cannot connect to NATS");
        return;
      }
      // An open server may get authentication later: looked at again, not given up on.
      if (!this.checkServer(where, auth.allowInsecure, conn)) {
        await conn.close();
        conn = undefined;
        await sleep(doubling(attempt, ENSURE_RETRY_MS.initial, ENSURE_RETRY_MS.max), this.abort.signal);
      }
    }
    if (!conn) return;
    if (!conn.serverAuthenticates()) log.warn({ url: where }, "stream mode: NATS does not require authentication; used because HOOKLINE_NATS_ALLOW_INSECURE=true (anyone who can reach it can publish into any namespace and read every event)");
    this.conn = conn;
    for (let attempt = 0; !this.abort.signal.aborted; attempt++) {
      try {
        const { legacy } = await conn.prepare();
        if (legacy === "removed") log.info({ stream: conn.settings.name }, "stream mode: the empty stream of an earlier Hookline (one for every namespace) was removed");
        log.info({ streams: `${conn.settings.name}_<namespace>` }, "stream mode: JetStream ready");
        this.streamReady = true;
        this.resolveReady(conn);
        return;
      } catch (err) {
        const delayMs = doubling(attempt, ENSURE_RETRY_MS.initial, ENSURE_RETRY_MS.max);
        this.streamProblem = (err as Error).message;
        log.error({ err: (err as Error).message, retryInMs: delayMs }, "stream mode: JetStream cannot be used yet");
        await sleep(delayMs, this.abort.signal);
      }
    }
  }

  /**
   * Whether the server `conn` is on (the link's own by default) requires authentication, or
   * HOOKLINE_NATS_ALLOW_INSECURE accepts it; an open one is said, and the link's own connection
   * to it closed (a reconnection to such a server: stream mode stops until a restart).
   */
  private checkServer(where: string, allowInsecure: boolean, conn = this.conn): boolean {
    if (!conn) return true;
    const problem = openServerProblem(where, conn.serverAuthenticates(), allowInsecure);
    this.insecure = problem;
    if (!problem) return true;
    this.o.log.error({ url: where }, problem);
    if (conn === this.conn) {
      this.o.log.error("stream mode: the connection to NATS is closed; restart the operator once NATS requires authentication");
      this.streamReady = false;
      void conn.close();
    }
    return false;
  }

  /** Resolves once connected with the stream made; rejects when `signal` aborts first. */
  connected(signal?: AbortSignal): Promise<StreamConnection> {
    if (!signal) return this.ready;
    return new Promise((resolve, reject) => {
      const onAbort = () => reject(new Error("stopped before NATS was reachable"));
      if (signal.aborted) return onAbort();
      signal.addEventListener("abort", onAbort, { once: true });
      void this.ready.then((c) => {
        signal.removeEventListener("abort", onAbort);
        resolve(c);
      });
    });
  }

  /** The streams' prefix (HOOKLINE unless configured otherwise). */
  get prefix(): string {
    return this.conn?.settings.name ?? this.o.stream?.name ?? STREAM_NAME;
  }

  /** The stream of `namespace` (HOOKLINE_<namespace>). */
  streamOf(namespace: string): string {
    return namespaceStreamName(this.prefix, namespace);
  }

  /**
   * Makes `namespace`'s stream, or brings it to the configured settings (one read when it is as
   * configured). The leader calls it before each subscription's consumer; the HTTP door when a
   * namespace has no stream yet.
   */
  async ensureStream(namespace: string, signal?: AbortSignal): Promise<void> {
    const conn = await this.connected(signal);
    const { action } = await conn.ensureStream(namespace);
    if (action !== "unchanged") this.o.log.info({ namespace, stream: this.streamOf(namespace), action }, `stream mode: namespace stream ${action}`);
  }

  /** Whether NATS is reachable now and the stream is made (readiness). */
  isConnected(): boolean {
    return this.streamReady && (this.conn?.isConnected() ?? false);
  }

  /** Why not ready, for /readyz; undefined when connected. */
  problem(): string | undefined {
    if (this.insecure) return this.insecure;
    if (this.isConnected()) return undefined;
    if (!this.conn) return "NATS (HOOKLINE_NATS_URL) cannot be reached yet";
    if (this.streamReady) return "NATS (HOOKLINE_NATS_URL) cannot be reached; reconnecting";
    return `NATS (HOOKLINE_NATS_URL) has no usable JetStream stream yet${this.streamProblem ? `: ${this.streamProblem}` : ""}`;
  }

  /**
   * The publisher of the HTTP door: refuses (503 there) while NATS is not reachable; a namespace
   * without a stream gets it made (the door checked the namespace exists and is served), then
   * the event is published again, once.
   */
  async publish(message: OutgoingMessage, opts?: { timeoutMs?: number }): Promise<StreamAck> {
    const conn = this.conn;
    if (!conn || !this.streamReady) throw new StreamUnavailableError("not connected to NATS (HOOKLINE_NATS_URL) yet; publish again shortly: nothing is duplicated", "unreachable");
    try {
      return await conn.publish(message, opts);
    } catch (err) {
      const target = conn.streamOf(message);
      if (!(err instanceof StreamUnavailableError && err.reason === "no-stream") || !target) throw err;
      await this.ensureStream(target.namespace);
      return conn.publish(message, opts);
    }
  }

  /** Stops connecting, flushes and closes the connection. */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.conn?.close();
  }
}
