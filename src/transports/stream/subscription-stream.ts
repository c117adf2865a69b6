// One subscription's share of its durable JetStream consumer on this replica: pulls messages
// while the subscription may be delivered to, and takes each through the same path as a CR-mode
// delivery: plan() (core/attempt/plan.ts: subscription, event type, pause, Secret, attempts left, the
// endpoint's gates) and the attempt executor. Only two things are stream mode's own: how work
// arrives (a pull of at most as many messages as the endpoint has free slots and the replica's
// byte budget has room for (held-bytes.ts); none while the subscription is paused or invalid, or
// its breaker Open or endpoint Disabled, so the stream holds them, except to dead-letter what is
// past the age limit: expiry.ts) and how an outcome is recorded:
//   delivered                      acknowledge
//   retryable, attempts left       keep the attempts (attempt-log.ts), negative acknowledgement
//                                  with the delay core/attempt/outcome.ts computed (Retry-After honoured)
//   exhausted, permanent, gone,    a WebhookDelivery in DeadLettered (or Discarded) with the
//   blocked, type not subscribed,  attempt history (dead-letters.ts), then acknowledge
//   older than the age limit (Expired)
//   type removed, published after  acknowledge, nothing else (removed-types.ts)
//   waiting (paused, Secret...)    negative acknowledgement at once; nothing is fetched until it clears
//   drain                          what is not in flight goes back at once; an attempt cut by
//                                  the drain timeout is recorded as interrupted and goes back too
import type { Consumer, JetStreamClient } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import type { Policy } from "../../core/attempt/policy.js";
import { deadLetter, deliveredFinal, discard, type AttemptResult, type Final, type OutcomeResult } from "../../core/attempt/outcome.js";
import { admit, type Action } from "../../core/attempt/plan.js";
import { matchesEventType } from "../../core/attempt/policy.js";
import { applyFilter } from "../../core/filter.js";
import { fromRfc3339 } from "../../core/rfc3339.js";
import type { EventSink } from "../../kube/events.js";
import type { Metrics } from "../../observability/metrics.js";
import { dataText, decodeMessage, MSG_ID_HEADER, readEventHead, StreamMessageError, type StreamMessage } from "../../jetstream/message.js";
import type { AttemptExecutor } from "../../delivery/engine/attempt.js";
import type { Caches } from "../../delivery/caches.js";
import type { Endpoint, EndpointRegistry } from "../../delivery/engine/endpoints.js";
import type { Finals } from "../../delivery/finals.js";
import { subscriptionRef } from "../../delivery/objects.js";
import { webhookBody } from "../../delivery/payload.js";
import type { ResolvedCredentials } from "../../delivery/engine/credentials.js";
import type { DeliveryStep } from "../../delivery/engine/step.js";
import type { AttemptLog, AttemptRecord } from "./attempt-log.js";
import type { ReplyBatch } from "../../jetstream/replies.js";
import { namespaceStreamName } from "../../jetstream/layout.js";
import type { StreamDeadLetters } from "./dead-letters.js";
import type { OrderedHandOff } from "./ordered-handoff.js";
import { orderingValue } from "../../core/ordering-key.js";
import { stampLane, type LaneRef } from "../../delivery/ordering-lanes.js";
import { checkEveryMs, expiredMessage, isExpired, type OldestMessages } from "./expiry.js";
import { costBytes, LARGEST_MESSAGE_BYTES, messageCost, type HeldAccount, type HeldBudget } from "./held-bytes.js";
import { pull, type PullResult, type Received } from "./pull.js";
import { streamKey } from "./keys.js";
import { RemovedTypes } from "./removed-types.js";
import type { TurnQueue } from "../../lib/turns.js";

/** What every subscription's stream shares on this replica. */
export interface StreamWork {
  js: JetStreamClient;
  /** The connection pulls are sent on (pull.ts), and messages answered on. */
  nc: NatsConnection;
  /** The connection's inbox prefix, under which pulled messages arrive (pull.ts). */
  inboxPrefix: string;
  /** The streams' prefix: a subscription reads its namespace's stream, <prefix>_<namespace>. */
  prefix: string;
  /** HOOKLINE_STREAM_MAX_HELD_BYTES: what this replica's subscriptions hold, together. */
  budget: HeldBudget;
  /** HOOKLINE_STREAM_MAX_AGE_MS: a message older than this becomes a dead letter (Expired). */
  maxAgeMs: number;
  /** The age of each namespace stream's oldest message, for subscriptions that hold theirs. */
  oldest: OldestMessages;
  caches: Caches;
  endpoints: EndpointRegistry;
  /** The delivery step (Secrets, plan, attempt, outcome), as CR mode and replay have it. */
  step: DeliveryStep;
  executor: AttemptExecutor;
  attempts: AttemptLog;
  deadLetters: StreamDeadLetters;
  /** An ordered subscription's events become WebhookDelivery objects, in publish order (ordered-handoff.ts). */
  handOff: OrderedHandOff;
  /** Acknowledgements go out through this, together once per event-loop turn. */
  replies: ReplyBatch;
  /** Large messages are decoded one per event-loop turn (DECODE_ALONE_BYTES). */
  turns: TurnQueue;
  finals: Finals;
  events: EventSink;
  metrics: Metrics;
  /** Aborted when the drain timeout ends the attempts still in flight. */
  signal: AbortSignal;
  log: Logger;
}

export interface SubscriptionIdentity {
  namespace: string;
  name: string;
  uid: string;
  /** Its durable consumer (stream/consumers.ts consumerName). */
  consumer: string;
}

/** What one fetched message takes of the budget (held-bytes.ts messageCost), given back once when it is answered. */
interface Bytes {
  size: number;
  released: boolean;
}

/** A message this replica holds: fetched, not in an attempt, not answered yet. */
interface Held {
  key: string;
  msg: Received;
  bytes: Bytes;
  id: string;
  type: string;
  timestamp: string;
  /** The decoded event; undefined when its data cannot be sent (`invalid` says why). */
  event?: StreamMessage;
  invalid?: string;
  record?: AttemptRecord;
  /** Last time the message's ack wait was reset. */
  since: number;
  timer?: NodeJS.Timeout;
}

/** What an attempt is signed and sent with, looked up before it was planned. */
interface Secrets {
  keys: Buffer[];
  creds: ResolvedCredentials | undefined;
}

/** A dead letter's status is computed for the object it becomes: its first generation. */
const GENERATION = 1;
/** Longest a pull waits for messages (JetStream's minimum is 1 s); a drain waits for it too. */
export const FETCH_EXPIRES_MS = 2_000;
/** A wait shorter than this (a rate-limit token, a clock a little behind) is held here; longer ones go back with the delay. */
const HOLD_MS = 2_000;
/** With nothing to wake it, the loop looks again this often. */
const IDLE_MS = 1_000;
const PARK_RECHECK_MS = 250;
/**
 * An ordered subscription's active deliveries (made from its events, waiting for their lanes) at
 * most, when it sets no spec.maxPending: past it, its events wait in the stream.
 */
export const ORDERED_MAX_ACTIVE = 1_000;
/** How long a delivery made by the hand-over counts before the watch shows it (handedOffActive). */
const HANDED_OFF_UNSEEN_MS = 30_000;
/** How often an ordered subscription at that bound looks whether its deliveries made room. */
const ORDERED_RECHECK_MS = 500;
/** After a message waited for something the user must fix (pause, Secret, spec): fetch no more for this long. */
const WAIT_RECHECK_MS = 1_000;
const SECRET_RECHECK_MS = 2_000;
const RETRY_MS = 1_000;
const HANDBACK_LOST = "hand-back not sent; it comes again after its ack wait (same webhook-id)";
/** A pull made only to dead-letter expired messages asks for this many at most (the first one alone). */
const EXPIRY_BATCH_MAX = 64;
/**
 * What a pull asks for in bytes (it reserves their cost of the budget): this much while the
 * subscription is quiet, so that hundreds of subscriptions can wait for their next event each
 * with a pull open; twice what the last pull brought when its count ended it; doubled when its
 * byte limit did, up to PULL_BYTES_MAX; the largest message's size when the next message did
 * not fit at all.
 */
const PULL_BYTES_IDLE = 32 * 1024;
const PULL_BYTES_MAX = 8 * 1024 * 1024;

/** Held messages reset their ack wait this often (JetStream redelivers after ack wait). */
const KEEPALIVE_MS = 10_000;
/** A message this large or larger is decoded in an event-loop turn of its own (accept). */
const DECODE_ALONE_BYTES = 64 * 1024;
/** A final outcome that could not be recorded is tried again after this. */
const RECORD_RETRY_MS = 5_000;

export class SubscriptionStream {
  readonly subKey: string;
  /** Its namespace's stream (HOOKLINE_<namespace>). */
  readonly stream: string;
  private readonly account: HeldAccount;
  /** When a held subscription's namespace is looked at for expired messages next; the batch of the next such pull. */
  private expiryAt = 0;
  private expiryBatch = 1;
  /** What the next pull asks for in bytes (PULL_BYTES_IDLE, grown while pulls come full); `big`: the next message is larger than the last pull allowed. */
  private pullBytes = PULL_BYTES_IDLE;
  private big = false;
  private readonly held = new Map<string, Held>();
  private readonly running = new Set<string>();
  /** Messages asked for in pulls and not arrived yet. */
  private outstanding = 0;
  private consumer: Consumer | undefined;
  private fetching = true;
  private stopped = false;
  private woken = false;
  private wakeLoop: (() => void) | undefined;
  private retryAt = 0;
  private holdUntil = 0;
  private lastKeepAlive = 0;
  private waitingLogged = false;
  private bound = false;
  private pullFailing = false;
  /** The step's clock. */
  private readonly now: () => number;
  private readonly log: Logger;
  private readonly removed: RemovedTypes;
  readonly counts = { delivered: 0, retried: 0, deadLettered: 0, handedBack: 0, handedOff: 0, pulls: 0, pulled: 0 };

  constructor(
    private readonly w: StreamWork,
    readonly sub: SubscriptionIdentity,
  ) {
    this.subKey = `${sub.namespace}/${sub.name}`;
    this.stream = namespaceStreamName(w.prefix, sub.namespace);
    this.account = w.budget.account(sub.namespace, { wake: () => this.wake(), shed: (bytes) => this.shed(bytes) });
    this.now = w.step.now;
    this.log = w.log.child({ subscription: this.subKey, consumer: sub.consumer });
    this.removed = new RemovedTypes();
  }

  start(): void {
    void this.run();
  }

  /** Attempts in flight. */
  get inFlight(): number {
    return this.running.size;
  }

  /** Nothing in flight, held or on its way. */
  get idle(): boolean {
    return this.running.size === 0 && this.held.size === 0 && this.outstanding === 0;
  }

  /** wake(), as one function: registered at most once for the next free global slot. */
  private readonly wakeOnFree = (): void => this.wake();

  /** Looks again whether to fetch (a slot freed, the endpoint or the subscription changed). */
  wake(): void {
    this.woken = true;
    const w = this.wakeLoop;
    this.wakeLoop = undefined;
    w?.();
  }

  /** The registry woke a held message (a slot freed, the probe reported back). */
  wakeKey(key: string): void {
    const h = this.held.get(key);
    if (!h) {
      this.w.endpoints.settle(key);
      return;
    }
    queueMicrotask(() => void this.step(h));
  }

  /** Drain: no more pulls, held messages go back at once, later arrivals too. */
  stopFetching(): void {
    this.fetching = false;
    for (const h of [...this.held.values()]) this.handBack(h, 0);
    this.wake();
  }

  /** Stops the loop (after stopFetching, or when the subscription is gone). */
  stop(reason: string): void {
    if (this.stopped) return;
    this.stopFetching();
    this.stopped = true;
    this.w.endpoints.offGlobalSlotFree(this.wakeOnFree);
    this.account.close();
    this.log.info({ reason, ...this.counts, inFlight: this.running.size }, "stream consumer stopped");
  }

  // --- the loop ---------------------------------------------------------------------------

  private async run(): Promise<void> {
    while (this.fetching) {
      const now = this.now();
      let until: number | undefined;
      if (now < this.retryAt) until = this.retryAt;
      else if (!this.consumer) {
        await this.bind();
        continue;
      } else {
        try {
          const g = await this.gate(now);
          if ("pull" in g) this.pull(g.pull, g.bytes);
          else until = await this.notPulling(g, now);
        } catch (err) {
          this.log.warn({ err: (err as Error).message }, "stream consumer: cannot decide what to fetch; trying again");
          until = now + RETRY_MS;
        }
      }
      this.keepAlive(now);
      await this.sleep(Math.min(until ?? now + IDLE_MS, now + KEEPALIVE_MS));
    }
  }

  /** The durable consumer; the leader makes it, so it may not exist for a moment. */
  private async bind(): Promise<void> {
    try {
      const c = await this.w.js.consumers.get(this.stream, this.sub.consumer);
      if (!this.fetching) return;
      this.consumer = c;
      if (!this.bound) this.log.info("stream consumer started");
      this.bound = true;
      this.waitingLogged = false;
    } catch (err) {
      if (!this.waitingLogged) this.log.info({ err: (err as Error).message }, "stream consumer: not bound yet (the leader makes the JetStream consumer; NATS may be unreachable); trying again");
      this.waitingLogged = true;
      this.retryAt = this.now() + RETRY_MS;
    }
  }

  /**
   * How many messages to pull now, or until when not to (`holds`: the subscription holds its
   * events, paused or invalid, its Secret missing, its endpoint held back; `budget`: waiting for
   * the byte budget). The endpoint's gates are plan()'s own (core/attempt/plan.ts admit), asked without
   * committing anything: a message is admitted for real when it is planned.
   */
  private async gate(now: number): Promise<{ pull: number; bytes: number } | { until?: number; holds?: boolean; budget?: boolean }> {
    if (now < this.holdUntil) return { until: this.holdUntil, holds: true };
    const sub = this.w.caches.subscription(this.subKey);
    if (!sub || sub.metadata.uid !== this.sub.uid) return { holds: true };
    const view = this.w.caches.subscriptionView(sub);
    if (view.kind !== "ok" || view.policy.paused) return { holds: true };
    const policy = view.policy;
    const ep = this.w.endpoints.ensure(this.subKey, this.sub.uid, sub.status, policy, now);
    const a = admit(now, policy, this.w.endpoints.view(ep));
    if (a.type === "WaitUntil") return { until: a.at, holds: a.why !== "rate" };
    // An ordered subscription's events become deliveries (ordered-handoff.ts): one at a time,
    // none while the endpoint's gates hold, whether or not its request slots are free.
    if (policy.ordering) {
      if (a.type !== "Attempt" && a.type !== "Park") return { holds: true };
      // The deliveries it made wait in etcd for the lanes: at most spec.maxPending (else
      // ORDERED_MAX_ACTIVE) at a time; the rest wait in the namespace's stream, within its quota
      // and age (what passes the age is dead-lettered meanwhile, as for a held subscription).
      if (this.handedOffActive(now) >= (policy.maxPending ?? ORDERED_MAX_ACTIVE)) return { until: now + ORDERED_RECHECK_MS, holds: true };
      // Its consumer lets out one message at a time: the next once this one is answered.
      return this.running.size + this.held.size + this.outstanding > 0 ? {} : this.pullUpTo(1, now, policy);
    }
    if (a.type === "Park") {
      // No global slot free: with nothing of its own in flight, held or on its way, nothing else
      // would wake this loop when one frees, and its messages would wait out the recheck (the
      // benchmark's half rate showed 250-400 ms gaps on single subscriptions): woken at the
      // next release instead. With messages of its own, their release or wakeKey wakes it.
      if (a.why === "global" && this.idle) this.w.endpoints.onGlobalSlotFree(this.wakeOnFree);
      return { until: now + PARK_RECHECK_MS };
    }
    if (a.type !== "Attempt" && a.type !== "DeadLetter") return { holds: true };
    const probe = a.type === "Attempt" && a.probe;
    const busy = ep.inFlight + this.held.size + this.outstanding;
    const want = (probe ? 1 - this.running.size - this.held.size - this.outstanding : policy.maxInFlight - busy);
    // Pulls go in batches of at least half of maxInFlight (or when nothing is busy), not one
    // pull per freed slot: a pull is a request of its own.
    if (want <= 0 || (busy > 0 && want < Math.ceil(policy.maxInFlight / 2))) return {};
    return this.pullUpTo(want, now, policy);
  }

  /**
   * The deliveries this ordered subscription's events became that wait for their lanes: those
   * in the cache, and those made here that the watch has not brought yet (the cache lags the
   * creates; counting it alone let a burst make more than spec.maxPending). One made but never
   * seen (delivered and deleted in between) stops counting after HANDED_OFF_UNSEEN_MS.
   */
  private handedOffActive(now: number): number {
    const cached = this.w.caches.deliveriesOf(this.subKey);
    for (const [key, at] of this.handedOffUnseen) if (cached.has(key) || now - at > HANDED_OFF_UNSEEN_MS) this.handedOffUnseen.delete(key);
    return cached.size + this.handedOffUnseen.size;
  }
  private readonly handedOffUnseen = new Map<string, number>();

  /** A pull of at most `n` messages, unless the subscription's Secret is missing or the byte budget has no room. */
  private async pullUpTo(n: number, now: number, policy: Policy): Promise<{ pull: number; bytes: number } | { until?: number; holds?: boolean; budget?: boolean }> {
    // A Secret missing (signing or credentials): its messages would wait, so none is pulled.
    if ((await this.w.step.gather(this.sub.namespace, policy, true)).secret.kind === "missing") return { until: now + SECRET_RECHECK_MS, holds: true };
    // As many bytes as the byte budget has room for.
    const bytes = this.pullRoom();
    return bytes > 0 ? { pull: n, bytes } : { budget: true };
  }

  /** The bytes the next pull may ask for (its cost reserved in the budget), or 0 when the budget has no room for it now. */
  private pullRoom(): number {
    const need = this.big ? LARGEST_MESSAGE_BYTES : Math.min(this.pullBytes, PULL_BYTES_IDLE);
    const room = this.account.room(messageCost(need));
    return room > 0 ? Math.max(need, Math.min(this.pullBytes, costBytes(room))) : 0;
  }

  /** What the next pull asks for, from how this one ended. */
  private adapt(r: PullResult, asked: number): void {
    // Nothing came because the first message alone is larger than the pull allowed.
    this.big = r.end === "too-big" && r.got === 0;
    let next: number;
    if (this.big) next = Math.max(this.pullBytes, LARGEST_MESSAGE_BYTES);
    // The byte limit ended it: more room next time.
    else if (r.end === "too-big") next = this.pullBytes * 2;
    // The count ended it: room for as much again, with some to spare.
    else if (r.end === "batch") next = 2 * r.bytes;
    // It expired: the subscription is quiet; less each time.
    else next = r.bytes * 2 >= asked ? this.pullBytes : this.pullBytes / 2;
    this.pullBytes = Math.min(PULL_BYTES_MAX, Math.max(PULL_BYTES_IDLE, Math.ceil(next)));
  }

  /** Nothing to pull now: until when, unless a held subscription's expired messages are pulled meanwhile. */
  private async notPulling(g: { until?: number; holds?: boolean; budget?: boolean }, now: number): Promise<number | undefined> {
    // Waiting for room is waiting: the budget wakes it. Anything else wants none now.
    if (!g.budget) this.account.rest();
    if (!g.holds) return g.until;
    const next = await this.expire(now);
    return next === undefined || g.until === undefined ? (g.until ?? next) : Math.min(next, g.until);
  }

  /**
   * A subscription that holds its events is not pulled, but what it holds past the age limit is
   * dead-lettered all the same: when the oldest event of its namespace's stream is expired, it
   * pulls (the first message alone, then batches while every message was expired) and each
   * message is handled as usual: expired ones become dead letters (step), the others are handed
   * back as the subscription's state says (paused: at once). Returns when to look next.
   */
  private async expire(now: number): Promise<number | undefined> {
    if (now < this.expiryAt || this.outstanding > 0) return this.outstanding > 0 ? undefined : this.expiryAt;
    const next = now + checkEveryMs(this.w.maxAgeMs);
    const oldest = await this.w.oldest.oldest(this.stream);
    if (oldest === undefined || !isExpired(oldest, now, this.w.maxAgeMs)) {
      this.expiryAt = next;
      this.expiryBatch = 1;
      return next;
    }
    const bytes = this.pullRoom();
    if (bytes === 0) return undefined;
    this.expiryAt = next;
    this.pull(this.expiryBatch, bytes, (asked, got, expired) => {
      // Every message expired: there may be more; look again at once, with a larger batch.
      const more = got === asked && expired === got;
      this.expiryBatch = more ? Math.min(EXPIRY_BATCH_MAX, asked * 2) : 1;
      if (more) this.expiryAt = 0;
    });
    return undefined;
  }

  private pull(n: number, bytes: number, expiry?: (asked: number, got: number, expired: number) => void): void {
    this.outstanding += n;
    this.counts.pulls++;
    // The cost of what the pull may bring is reserved; each message that arrives takes its own
    // out of it, the rest goes back when the pull ends.
    const reserved = messageCost(bytes);
    this.account.reserve(reserved);
    void (async () => {
      let got = 0;
      let expired = 0;
      let taken = 0;
      try {
        const r = await pull(this.w.nc, this.stream, this.sub.consumer, { inboxPrefix: this.w.inboxPrefix, batch: n, maxBytes: bytes, expiresMs: FETCH_EXPIRES_MS }, (m) => {
          got++;
          this.counts.pulled++;
          this.outstanding--;
          const cost = messageCost(m.size);
          taken += cost;
          this.account.arrived(cost);
          if (expiry && isExpired(m.storedAt, this.now(), this.w.maxAgeMs)) expired++;
          this.accept(m, { size: cost, released: false });
        });
        this.adapt(r, bytes);
        this.pullFailing = false;
      } catch (err) {
        this.retryAt = this.now() + RETRY_MS;
        this.consumer = undefined;
        // Once per outage, not once a second.
        if (this.fetching && !this.pullFailing) this.log.warn({ err: (err as Error).message }, "stream consumer: pull failed; binding again");
        this.pullFailing = true;
      } finally {
        this.outstanding -= n - got;
        this.account.unreserve(Math.max(0, reserved - taken));
        expiry?.(n, got, expired);
        this.wake();
      }
    })();
  }

  /** Gives a message's bytes back to the budget, once. */
  private release(bytes: Bytes): void {
    if (bytes.released) return;
    bytes.released = true;
    this.account.give(bytes.size);
  }

  /**
   * The budget asks for room for a subscription below its share: messages held and not started
   * (parked for a slot, waiting for a token) go back to JetStream, the newest first, until about
   * `bytes` are freed. Returns what was freed.
   */
  private shed(bytes: number): number {
    let freed = 0;
    const held = [...this.held.values()].sort((a, b) => b.msg.seq - a.msg.seq);
    for (const h of held) {
      if (freed >= bytes) break;
      freed += h.bytes.size;
      this.handBack(h, 0);
    }
    if (freed > 0) this.log.debug({ freedBytes: freed }, "stream consumer: handed messages back to make room for another subscription (held-bytes budget)");
    return freed;
  }

  private sleep(until: number): Promise<void> {
    if (this.woken || !this.fetching) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.woken = false;
        if (this.wakeLoop === done) this.wakeLoop = undefined;
        resolve();
      };
      const t = setTimeout(done, Math.max(0, until - this.now()));
      this.wakeLoop = done;
    });
  }

  /** Held messages keep their ack wait from running out (it would deliver them to another replica). */
  private keepAlive(now: number): void {
    if (now - this.lastKeepAlive < KEEPALIVE_MS) return;
    this.lastKeepAlive = now;
    for (const h of this.held.values()) {
      if (now - h.since < KEEPALIVE_MS) continue;
      this.reply(h.msg, "working", "its ack wait not reset; it may be delivered again (same webhook-id)");
      h.since = now;
    }
  }

  // --- one message ------------------------------------------------------------------------

  private accept(msg: Received, bytes: Bytes): void {
    // A large message is decoded (UTF-8 and JSON checked, about 2 ms per 200 KiB) in a turn of its
    // own, so one pull of a tenant's large events does not hold other tenants' messages and
    // answers back; namespaces take turns there (a tenant's queued flood delays another's large
    // message by one piece). Smaller ones go on at once: an ordered subscription's events keep their
    // order by stream sequence (ordered-handoff.ts), not by the order they are decoded in.
    if (msg.data.length >= DECODE_ALONE_BYTES) return this.w.turns.run(() => this.acceptNow(msg, bytes), this.sub.namespace);
    this.acceptNow(msg, bytes);
  }

  private acceptNow(msg: Received, bytes: Bytes): void {
    if (!this.fetching) {
      this.reply(msg, "nak", HANDBACK_LOST);
      this.release(bytes);
      return;
    }
    this.handle(msg, bytes).catch((err: unknown) => {
      // Left unanswered: JetStream delivers it again after its ack wait.
      const key = streamKey(this.sub.namespace, this.sub.consumer, msg.seq);
      if (this.held.get(key)?.bytes === bytes) this.held.delete(key);
      this.release(bytes);
      this.log.error({ seq: msg.seq, err: (err as Error).message }, "stream message not handled; it comes again after its ack wait");
    });
  }

  private async handle(msg: Received, bytes: Bytes): Promise<void> {
    const key = streamKey(this.sub.namespace, this.sub.consumer, msg.seq);
    // A copy delivered again while this replica still holds it (its ack wait ran out): ignored.
    if (this.held.has(key) || this.running.has(key)) return this.release(bytes);
    let event: StreamMessage | undefined;
    let invalid: string | undefined;
    try {
      event = decodeMessage(msg);
    } catch (err) {
      if (!(err instanceof StreamMessageError)) throw err;
      if (err.field === "subject" || err.field === MSG_ID_HEADER) return this.reject(msg, err);
      invalid = err.message;
    }
    const head = event ?? readEventHead(msg);
    if (!head) {
      this.release(bytes);
      return this.poison(msg, invalid ?? "unreadable");
    }
    const h: Held = { key, msg, bytes, id: head.id, type: head.type, timestamp: head.timestamp, ...(event ? { event } : {}), ...(invalid ? { invalid } : {}), since: this.now() };
    this.held.set(key, h);
    if (msg.deliveryCount > 1) {
      try {
        const record = await this.w.attempts.get(this.sub.consumer, msg.seq);
        if (record) h.record = record;
      } catch (err) {
        this.log.warn({ seq: msg.seq, err: (err as Error).message }, "stream message: its attempts cannot be read now; handed back");
        return this.handBack(h, RETRY_MS);
      }
      if (this.held.get(key) !== h) return;
    }
    await this.step(h);
  }

  /** Plans the held message and acts on the plan, exactly as the delivery reconciler does. */
  private async step(h: Held): Promise<void> {
    clearTimeout(h.timer);
    h.timer = undefined;
    if (this.held.get(h.key) !== h) return;
    if (h.record?.final) return this.finish(h, { status: h.record.status, final: h.record.final });
    // Past the age limit: a dead letter, whatever the subscription's state (HOOKLINE_STREAM_MAX_AGE_MS).
    const at = this.now();
    if (isExpired(h.msg.storedAt, at, this.w.maxAgeMs)) return this.finish(h, deadLetter(h.record?.status, GENERATION, at, "Expired", expiredMessage(h.msg.storedAt, at, this.w.maxAgeMs)));
    const sub = this.w.caches.subscription(this.subKey);
    const own = sub && sub.metadata.uid === this.sub.uid ? sub : undefined;
    const subscription = this.w.caches.subscriptionView(own);
    const policy = subscription.kind === "ok" ? subscription.policy : undefined;
    if (await this.answeredAsRemoved(h, policy)) return;
    // The event's data, parsed once for the filter and the hand-off both.
    let parsed: { data: unknown } | undefined;
    const data = (event: StreamMessage): unknown => (parsed ??= { data: JSON.parse(dataText(event)) as unknown }).data;
    if (policy?.filter !== undefined && h.event && !h.record && this.filteredOut(h, h.event, data, policy.filter)) return;
    // Ordered: it becomes a delivery, which CR mode's ordering lanes take through this same step.
    // (One with attempts from the stream, made before spec.ordering was set, finishes here.)
    if (policy?.ordering && h.event && !h.record) return this.handOff(h, h.event, data);
    const status = h.record?.status;
    const nextAttemptAt = fromRfc3339(status?.nextAttemptAt);
    const { secret, keys, creds } = await this.w.step.gather(this.sub.namespace, policy, nextAttemptAt === undefined || nextAttemptAt <= this.now());
    if (this.held.get(h.key) !== h) return; // handed back meanwhile (a drain)

    // No await from plan() to the step's attempt taking the endpoint's slots (as in CR mode).
    const { action, endpoint: ep, now } = this.w.step.plan(h.key, { key: this.subKey, object: own ? { uid: this.sub.uid, status: own.status } : undefined, view: subscription }, secret, () => ({
      phase: status?.phase,
      attempts: status?.attempts ?? 0,
      nextAttemptAt,
      eventType: h.type,
      payloadBytes: h.event?.data.length ?? 0,
      ...(h.invalid !== undefined ? { payloadInvalid: h.invalid } : {}),
    }));
    try {
      await this.act(action, h, policy, ep, { keys, creds }, now);
    } finally {
      this.w.endpoints.settle(h.key);
    }
  }

  /**
   * spec.filter, at this subscription's fan-out: an event it does not match (false, an error on
   * this event, or a filter that does not compile) is acknowledged for this subscription alone
   * and counted (true); the event stays in the stream for the others.
   */
  private filterWarnedAt = -Infinity;
  private filteredOut(h: Held, event: StreamMessage, dataOf: (event: StreamMessage) => unknown, filter: string): boolean {
    let data: unknown;
    try {
      data = dataOf(event);
    } catch {
      return false; // not JSON: plan() discards it as InvalidPayload
    }
    const r = applyFilter(filter, { id: event.id, type: event.type, namespace: this.sub.namespace, data });
    this.w.metrics.eventsFiltered.inc({ namespace: this.sub.namespace, subscription: this.sub.name, result: r.kind });
    if (r.kind === "matched") return false;
    // One warning a minute at most: a filter failing on every event must not flood the log.
    if (r.kind !== "filtered" && this.now() - this.filterWarnedAt >= 60_000) {
      this.filterWarnedAt = this.now();
      this.log.warn({ seq: h.msg.seq, eventId: event.id, result: r.kind, err: r.message }, "stream message: spec.filter failed on it; skipped for this subscription (webhook_events_filtered_total counts the others)");
    }
    this.ack(h);
    return true;
  }

  /**
   * A type no longer listed: published after its removal it was never this subscription's, and
   * is acknowledged (true); published before, plan() dead-letters it (false).
   */
  private async answeredAsRemoved(h: Held, policy: Policy | undefined): Promise<boolean> {
    if (!policy || matchesEventType(policy.eventTypes, h.type)) return false;
    // Not bound (a pull failed): nothing can tell before from after yet; it comes again.
    const when = this.consumer ? await this.removed.when(this.consumer, h.msg) : "unknown";
    if (this.held.get(h.key) !== h) return true;
    if (when === "after") this.ack(h);
    else if (when === "unknown") this.handBack(h, RETRY_MS);
    return when !== "before";
  }

  private async act(action: Action, h: Held, policy: Policy | undefined, ep: Endpoint | undefined, secrets: Secrets, now: number): Promise<void> {
    const status = h.record?.status;
    switch (action.type) {
      case "Attempt":
        return this.attempt(h, action, policy!, ep!, secrets);
      case "WaitUntil": {
        const ms = action.at - now;
        if (ms > HOLD_MS) return this.handBack(h, ms);
        clearTimeout(h.timer);
        h.timer = setTimeout(() => void this.step(h), ms);
        return;
      }
      case "Park":
        // Woken by the registry when a slot frees or the probe reports back (wakeKey).
        this.w.step.park(ep!, h.key, action.why, () => this.wakeKey(h.key));
        return;
      case "Wait":
        // Subscription missing or invalid, paused, Secret missing: nothing is fetched until it clears.
        this.holdUntil = now + WAIT_RECHECK_MS;
        return this.handBack(h, 0);
      case "DeadLetter":
        if (action.reason === "BreakerOpen") this.w.executor.countBreakerOpen(this.subKey);
        return this.finish(h, deadLetter(status, GENERATION, now, action.reason, action.message));
      case "Discard":
        return this.finish(h, discard(status, GENERATION, now, action.reason, action.message));
      case "Hold":
        // Ordering lanes (spec.ordering) are CR mode's (ordered events are handed off as
        // deliveries): plan() is given none here, so this is never returned; should it be, the
        // message goes back to the stream, nothing lost.
        return this.handBack(h, 0);
      case "Nothing":
        return this.ack(h);
    }
  }

  private async attempt(h: Held, action: Extract<Action, { type: "Attempt" }>, policy: Policy, ep: Endpoint, secrets: Secrets): Promise<void> {
    this.held.delete(h.key);
    this.running.add(h.key);
    try {
      const event = h.event!;
      const sent = await this.w.step.run(
        {
          key: h.key,
          endpoint: ep,
          policy,
          action,
          secrets,
          // The webhook id is the event id; `data` the published bytes, unchanged.
          message: () => Promise.resolve({ id: event.id, type: event.type, body: webhookBody(event.id, event.type, event.timestamp, dataText(event)) }),
          signal: this.w.signal,
          // Its attempt number follows the recorded history (as in CR mode).
          status: h.record?.status,
          // [tracing] The message's traceparent/tracestate headers.
          trace: event.traceContext,
        },
        (result) => this.recordAttempt(h, policy, result),
      );
      // Nothing was sent: the probe is another replica's. The message waits in the stream.
      if (sent === undefined) {
        this.counts.handedBack++;
        this.reply(h.msg, "nak", HANDBACK_LOST);
      }
    } finally {
      this.running.delete(h.key);
      this.release(h.bytes);
      this.wake();
    }
  }

  /**
   * The attempt's outcome, computed as CR mode computes a status (core/attempt/outcome.ts), recorded
   * the stream's way; a delivered one needs only its final (the message is acknowledged, no status kept).
   */
  private async recordAttempt(h: Held, policy: Policy, result: AttemptResult): Promise<true> {
    // Delivered: acknowledged, and no status is kept, so none is built (the most common case).
    const delivered = deliveredFinal(result);
    if (delivered) {
      await this.delivered(h, delivered);
      return true;
    }
    const r = this.w.step.outcome(h.record?.status, GENERATION, result, policy);
    if (r.final) {
      await this.finish(h, r);
      return true;
    }
    h.record = { status: r.status };
    try {
      await this.w.attempts.put(this.sub.consumer, h.msg.seq, h.record);
    } catch (err) {
      this.log.warn({ seq: h.msg.seq, err: (err as Error).message }, "stream message: attempt not recorded; it may be attempted once more than maxAttempts");
    }
    const due = fromRfc3339(r.status.nextAttemptAt) ?? this.now();
    this.counts.retried++;
    this.reply(h.msg, "nak", HANDBACK_LOST, Math.max(0, due - this.now()) || undefined);
    return true;
  }

  /**
   * An ordered subscription's event, made a WebhookDelivery and then acknowledged; the consumer
   * lets the next message out only after that. Kept and tried again when it cannot be made now.
   */
  private async handOff(h: Held, event: StreamMessage, dataOf: (event: StreamMessage) => unknown): Promise<void> {
    try {
      const made = await this.w.handOff.make({
        namespace: this.sub.namespace,
        subscription: this.sub.name,
        eventId: h.id,
        eventType: h.type,
        timestamp: h.timestamp,
        payload: dataOf(event),
        ...(event.traceContext ? { traceContext: event.traceContext } : {}),
        origin: `${this.stream}/${h.msg.seq}`,
      });
      if (made.created) this.counts.handedOff++;
      this.handedOffUnseen.set(`${this.sub.namespace}/${made.obj.metadata.name}`, this.now());
    } catch (err) {
      this.log.warn({ seq: h.msg.seq, err: (err as Error).message }, "stream message of an ordered subscription: its delivery cannot be created now; kept and tried again");
      if (this.held.get(h.key) === h) this.handBack(h, RECORD_RETRY_MS);
      return;
    }
    // Handed back meanwhile (a drain): it comes again and finds its delivery.
    if (this.held.get(h.key) === h) this.ack(h);
    // The consumer lets the next message out now: pull it.
    this.wake();
  }

  /** An event's ordering lane when its subscription is ordered (the key's value in the event). */
  private laneOf(eventType: string, payload: unknown): LaneRef | undefined {
    const sub = this.w.caches.subscription(this.subKey);
    const view = sub && sub.metadata.uid === this.sub.uid ? this.w.caches.subscriptionView(sub) : undefined;
    const ordering = view?.kind === "ok" ? view.policy.ordering : undefined;
    if (!ordering) return undefined;
    const value = orderingValue(ordering.parsed, { eventType, payload });
    return value === undefined ? undefined : { key: ordering.key, value };
  }

  /** A final outcome: acknowledged when delivered; otherwise a WebhookDelivery first. */
  private async finish(h: Held, r: OutcomeResult): Promise<void> {
    const final = r.final!;
    if (final.phase === "Succeeded") return this.delivered(h, final);
    let recorded;
    const payload = h.event ? (JSON.parse(dataText(h.event)) as unknown) : undefined;
    // An ordered subscription's dead letter blocks its key, as in CR mode (expired, or of a removed type).
    const lane = final.phase === "DeadLettered" && h.event ? this.laneOf(h.type, payload) : undefined;
    try {
      recorded = await this.w.deadLetters.record({
        namespace: this.sub.namespace,
        subscription: this.sub.name,
        eventId: h.id,
        eventType: h.type,
        timestamp: h.timestamp,
        payload,
        ...(h.event?.traceContext ? { traceContext: h.event.traceContext } : {}),
        origin: `${this.stream}/${h.msg.seq}`,
        result: stampLane(r, lane),
      });
    } catch (err) {
      // Kept, so the message coming again records it and never sends the request again.
      this.log.warn({ seq: h.msg.seq, phase: final.phase, reason: final.reason, err: (err as Error).message }, "stream message: its dead letter cannot be created now; kept and tried again");
      h.record = { status: r.status, final };
      await this.w.attempts.put(this.sub.consumer, h.msg.seq, h.record).catch(() => undefined);
      return this.handBack(h, RECORD_RETRY_MS);
    }
    if (recorded.final) this.w.finals.record(recorded.obj, recorded.final, this.subKey, false);
    this.counts.deadLettered++;
    this.ack(h);
    await this.forgetAttempts(h);
  }

  /** Delivered: acknowledged and counted; its attempts recorded in the bucket, if any, go. */
  private async delivered(h: Held, final: Final): Promise<void> {
    this.ack(h);
    this.counts.delivered++;
    this.w.finals.delivered(final, this.subKey, h.timestamp);
    await this.forgetAttempts(h);
  }

  private async forgetAttempts(h: Held): Promise<void> {
    if (h.record || h.msg.deliveryCount > 1) {
      await this.w.attempts.delete(this.sub.consumer, h.msg.seq).catch((err: unknown) => this.log.debug({ seq: h.msg.seq, err: (err as Error).message }, "attempts of a finished message not deleted (they expire)"));
    }
  }

  /**
   * Acknowledged without waiting for JetStream's confirmation (a request per message would cost
   * more than the delivery), together with the other replies of this event-loop turn (one socket
   * write for all of them). One lost with the connection brings the message back after its ack
   * wait, sent again with the same webhook-id (at least once, as a crash does).
   */
  private ack(h: Held): void {
    this.held.delete(h.key);
    if (!this.running.has(h.key)) this.release(h.bytes);
    this.reply(h.msg, "ack", "acknowledgement not sent; it will be delivered again (same webhook-id)");
  }

  /** An ack, nak (with its delay), working or term, on its way with the others of this turn. */
  private reply(msg: Received, kind: "ack" | "nak" | "working" | "term", lost: string, delayMs?: number): void {
    // Handed back for later, it comes back no later than its age limit: held or not, it is then
    // dead-lettered on time (a breaker's cooldown or a Disabled endpoint's probe may be longer).
    if (kind === "nak" && delayMs !== undefined) {
      const left = msg.storedAt + this.w.maxAgeMs - this.now();
      delayMs = left > 0 ? Math.min(delayMs, Math.ceil(left)) : undefined;
    }
    this.w.replies.add({
      send: () => {
        if (kind === "nak") msg.nak(delayMs);
        else msg[kind]();
      },
      failed: (err) => this.log.warn({ seq: msg.seq, err: err.message }, `stream message: ${lost}`),
    });
  }

  /** Back to the stream, for this or another replica, after `delayMs` (0: at once). */
  private handBack(h: Held, delayMs: number): void {
    clearTimeout(h.timer);
    this.held.delete(h.key);
    if (!this.running.has(h.key)) this.release(h.bytes);
    this.counts.handedBack++;
    this.reply(h.msg, "nak", HANDBACK_LOST, delayMs > 0 ? Math.ceil(delayMs) : undefined);
  }

  /**
   * Published where it does not belong: its event names another namespace or type than its
   * subject, or its Nats-Msg-Id is not its event's (`<namespace>/<id>`). Only a publisher of
   * this subject's namespace (or the operator) can have published it, but what it claims to be
   * cannot be trusted: terminated, not delivered and not recorded as a delivery of anyone's.
   */
  private reject(msg: Received, err: StreamMessageError): void {
    this.log.warn({ seq: msg.seq, subject: msg.subject, field: err.field, err: err.message }, "stream message rejected: it does not belong to its subject; terminated, not delivered");
    const sub = this.w.caches.subscription(this.subKey);
    if (sub) this.w.events.record(subscriptionRef(sub), "Warning", "RejectedStreamMessage", `stream message ${this.stream}/${msg.seq} on ${msg.subject} is not delivered: ${err.message}`);
    this.w.metrics.streamRejected.inc({ namespace: this.sub.namespace, reason: err.field === MSG_ID_HEADER ? "msg_id" : "subject" });
    this.reply(msg, "term", "termination not sent; it comes again after its ack wait and is rejected then");
  }

  /** Not a Hookline event at all (no id or type to name it by): said, and terminated. */
  private poison(msg: Received, why: string): void {
    this.log.warn({ seq: msg.seq, err: why }, "stream message is not a Hookline event; terminated, not delivered");
    const sub = this.w.caches.subscription(this.subKey);
    if (sub) this.w.events.record(subscriptionRef(sub), "Warning", "InvalidStreamMessage", `stream message ${this.stream}/${msg.seq} is not a Hookline event (${why}); it is not delivered`);
    this.w.metrics.deliveriesFinished.inc({ namespace: this.sub.namespace, subscription: this.sub.name, phase: "Discarded", reason: "InvalidPayload" });
    this.reply(msg, "term", "termination not sent; it comes again after its ack wait and is terminated then");
  }
}
