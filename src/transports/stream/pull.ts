// How stream messages arrive on this replica: one pull request to a subscription's consumer that
// asks JetStream for at most `batch` messages and at most `maxBytes` bytes, so what a pull
// brings fits the room the held-bytes budget reserved for it (held-bytes.ts). The client
// library's fetch takes a count or a byte limit, not both, and ends a pull whose next message is
// larger than its byte limit by dropping the messages it had not handed out yet; this sends
// JetStream's pull request itself ($JS.API.CONSUMER.MSG.NEXT) and reads the answers on an inbox
// (under the connection's own prefix: the operator's user may read no other):
//   a message          detached (below) and handed to `onMessage`
//   408, 404           the pull expired: no more messages now
//   409 size > bytes   the next message is larger than `maxBytes`: ask again with more room
//   409 batch done     JetStream handed out `batch` messages; on a cluster they may come after it: wait for them a moment
//   100                an idle heartbeat (not asked for): ignored
//   anything else      PullError (the consumer was deleted, JetStream went away...)
// A pull that hears nothing ends `expiresMs` plus a margin after it was sent (the server's own
// 408 may be lost with the connection).
//
// A message is detached from the client's network buffers: the client hands it out as a view
// into the buffer it read from the socket (a chunk of the stream, or a buffer grown to about
// twice the message), so a message held for minutes would keep that buffer alive and what the
// budget counts would differ from what the process holds. A detached message owns an exact copy
// of its body, its decoded headers and its reply subject, and answers JetStream on that subject
// with the payloads of JetStream's acknowledgement protocol (those the client's JsMsg sends).
import { createInbox, type Msg, type NatsConnection } from "@nats-io/transport-node";
import type { HeaderReader } from "../../jetstream/message.js";

/** A fetched message, detached. */
export interface Received {
  /** Its sequence in the stream. */
  seq: number;
  /** How many times JetStream delivered it (this one included). */
  deliveryCount: number;
  /** When JetStream stored it (epoch ms). */
  storedAt: number;
  subject: string;
  headers: HeaderReader | undefined;
  /** The body, an exact copy. */
  data: Uint8Array;
  /** Its size as JetStream counts it against a pull's byte limit: subject, reply subject, headers and body. */
  size: number;
  ack(): void;
  /** Hand it back, for delivery again at once or after `delayMs`. */
  nak(delayMs?: number): void;
  /** Reset its ack wait. */
  working(): void;
  /** Never deliver it again. */
  term(): void;
}

export interface PullOptions {
  /**
   * The connection's inbox prefix: the messages arrive on an inbox under it. The operator's is its
   * own (stream/permissions.ts OPERATOR_INBOX_PREFIX): on the shared _INBOX a publisher could read them.
   */
  inboxPrefix: string;
  batch: number;
  maxBytes: number;
  /** How long JetStream keeps the pull open waiting for messages (at least 1 s). */
  expiresMs: number;
}

export interface PullResult {
  got: number;
  /** Bytes of what arrived, as JetStream counts them. */
  bytes: number;
  /** batch: all asked for came; expired: no more now; too-big: the next message is larger than maxBytes. */
  end: "batch" | "expired" | "too-big";
}

/** A pull JetStream refused or could not answer; `code` is its status when it sent one. */
export class PullError extends Error {
  override readonly name = "PullError";
  constructor(
    message: string,
    readonly code?: number,
  ) {
    super(message);
  }
}

const ENCODER = new TextEncoder();
const ACK = ENCODER.encode("+ACK");
const NAK = ENCODER.encode("-NAK");
const WPI = ENCODER.encode("+WPI");
const TERM = ENCODER.encode("+TERM");
const NANOS_PER_MS = 1_000_000;
/** How long a pull whose batch JetStream says it handed out waits for the messages still on their way. */
const BATCH_STRAGGLERS_MS = 2_000;
/** How long after its expiry a pull that heard nothing is given up. */
const SILENCE_MARGIN_MS = 5_000;

/** One pull; resolves when it ended, having handed every message that came to `onMessage`. */
export function pull(nc: NatsConnection, stream: string, consumer: string, opts: PullOptions, onMessage: (m: Received) => void): Promise<PullResult> {
  return new Promise<PullResult>((resolve, reject) => {
    let got = 0;
    let bytes = 0;
    let done = false;
    const inbox = createInbox(opts.inboxPrefix);
    const end = (how: PullResult["end"] | PullError) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sub.unsubscribe();
      if (how instanceof PullError) reject(how);
      else resolve({ got, bytes, end: how });
    };
    const sub = nc.subscribe(inbox, {
      callback: (err, m) => {
        if (done) return;
        if (err) return end(new PullError(err.message));
        const status = statusOf(m);
        if (status === undefined) {
          const r = detach(m, nc);
          got++;
          bytes += r.size;
          onMessage(r);
          if (got >= opts.batch) end("batch");
          return;
        }
        const how = statusEnd(status);
        if (how === "ignore") return;
        if (how === "batch" && got < opts.batch) {
          // On a cluster JetStream's word that it handed out the whole batch can overtake the
          // messages (they come through another node): wait a moment for them.
          clearTimeout(timer);
          timer = setTimeout(() => end("batch"), BATCH_STRAGGLERS_MS);
          return;
        }
        end(how ?? new PullError(`JetStream answered the pull on ${stream} > ${consumer} with ${status.code} ${status.description}`, status.code));
      },
    });
    let timer = setTimeout(() => end("expired"), opts.expiresMs + SILENCE_MARGIN_MS);
    try {
      nc.publish(`$JS.API.CONSUMER.MSG.NEXT.${stream}.${consumer}`, JSON.stringify({ batch: opts.batch, max_bytes: opts.maxBytes, expires: opts.expiresMs * NANOS_PER_MS }), { reply: inbox });
    } catch (err) {
      end(new PullError((err as Error).message));
    }
  });
}

/**
 * What a status message (code, lowercase description) says of the pull: it ended (and how),
 * "ignore" (a heartbeat), or undefined (an error: the consumer is gone, JetStream went away).
 */
export function statusEnd(status: { code: number; description: string }): PullResult["end"] | "ignore" | undefined {
  if (status.code === 100) return "ignore";
  if (status.code === 404 || status.code === 408) return "expired";
  if (status.code === 409 && status.description === "message size exceeds maxbytes") return "too-big";
  // The server handed out as many messages as the pull asked for, with bytes to spare. On a
  // cluster this can arrive before the messages do (pull() waits for them a moment; any lost on
  // the way JetStream sends again after the ack wait). Nothing is wrong with the consumer.
  if (status.code === 409 && status.description === "batch completed") return "batch";
  // A new leader or a server shutting down: nothing is wrong with the consumer, pull again.
  if (status.code === 409 && (status.description.includes("leadership change") || status.description.includes("server shutdown"))) return "expired";
  return undefined;
}

/** A status message of the pull (code and lowercase description), or undefined for a stream message. */
function statusOf(m: Msg): { code: number; description: string } | undefined {
  if (m.reply || !m.headers || m.data.length > 0 || !m.headers.code) return undefined;
  return { code: m.headers.code, description: m.headers.description.trim().toLowerCase() };
}

/** The delivery of a message, from its reply subject: $JS.ACK.[<domain>.<account hash>.]<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<timestamp ns>.<pending>[.<token>]. */
export function deliveryOf(reply: string): { deliveryCount: number; seq: number; storedAt: number } {
  const t = reply.split(".");
  if (t.length === 9) t.splice(2, 0, "_", "");
  if (t.length < 11 || t[0] !== "$JS" || t[1] !== "ACK") throw new PullError(`not a JetStream message (reply subject ${JSON.stringify(reply)})`);
  return { deliveryCount: Number(t[6]), seq: Number(t[7]), storedAt: Number(BigInt(t[9]!) / 1_000_000n) };
}

function detach(m: Msg, nc: NatsConnection): Received {
  const reply = m.reply ?? "";
  const { deliveryCount, seq, storedAt } = deliveryOf(reply);
  const headers = m.headers;
  const data = new Uint8Array(m.data.length);
  data.set(m.data);
  const counted = (m as { size?: () => number }).size?.();
  const send = (payload: Uint8Array) => nc.publish(reply, payload);
  return {
    seq,
    deliveryCount,
    storedAt,
    subject: m.subject,
    headers,
    data,
    size: typeof counted === "number" && counted > 0 ? counted : data.length + m.subject.length + reply.length,
    ack: () => send(ACK),
    nak: (delayMs) => send(delayMs ? ENCODER.encode(`-NAK ${JSON.stringify({ delay: Math.round(delayMs * NANOS_PER_MS) })}`) : NAK),
    working: () => send(WPI),
    term: () => send(TERM),
  };
}
