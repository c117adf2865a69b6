// Stream mode's delivery on this replica (every replica runs it, leader or not): one
// SubscriptionStream per WebhookSubscription, reading from the subscription's durable consumer,
// which JetStream shares between the replicas' pulls (max_ack_pending = maxInFlight bounds the
// subscription across all of them; each replica also holds to its own slots). It opens the two
// key-value buckets once NATS is reachable, follows the subscription cache, routes the
// registry's wake-ups of stream keys, and drains on SIGTERM: no more pulls, what is held goes
// back at once, in-flight attempts get the drain timeout, then are interrupted and go back too.
// Nothing is dead-lettered by a rollout (unless WEBHOOK_DRAIN_TIMEOUT_ACTION=dead-letter).
import type { ReflectorHandler } from "../../kube/reflector.js";
import { objectKey } from "../../kube/types.js";
import type { LeaderRunnable } from "../../runtime/manager.js";
import { consumerName } from "../../jetstream/consumers.js";
import type { DrainReport } from "../../delivery/leader-term.js";
import type { SubscriptionObject } from "../../delivery/objects.js";
import { AttemptLog } from "./attempt-log.js";
import { StreamDeadLetters, type StreamDeadLettersDeps } from "./dead-letters.js";
import { OrderedHandOff } from "./ordered-handoff.js";
import { checkEveryMs, OldestMessages } from "./expiry.js";
import type { StreamLink } from "./link.js";
import type { SharedEndpoints } from "./shared-endpoints.js";
import { FETCH_EXPIRES_MS, SubscriptionStream, type StreamWork } from "./subscription-stream.js";
import { sharedAbortController } from "../../runtime/shared-abort.js";
import { ReplyBatch } from "../../jetstream/replies.js";
import { TurnQueue } from "../../lib/turns.js";
import { doubling } from "../../lib/backoff.js";

export interface StreamDeliveryDeps extends Omit<StreamWork, "js" | "nc" | "inboxPrefix" | "prefix" | "oldest" | "attempts" | "deadLetters" | "handOff" | "replies" | "turns" | "signal">, StreamDeadLettersDeps {
  link: StreamLink;
  shared: SharedEndpoints;
}

const OPEN_RETRY_MS = { initial: 1_000, max: 30_000 };
const POLL_MS = 20;

export class StreamDelivery implements LeaderRunnable {
  readonly name = "stream delivery";
  /** By consumer name. */
  private readonly streams = new Map<string, SubscriptionStream>();
  private work: StreamWork | undefined;
  private attemptsAbort = sharedAbortController();
  /** Every stream's acknowledgements, sent together once per event-loop turn. */
  private readonly replies = new ReplyBatch();
  private readonly turns: TurnQueue;
  private openAbort = new AbortController();
  private running = false;
  /** The last drain's report. */
  lastDrain: DrainReport = { finishedInGrace: true, inFlight: 0, interrupted: 0 };

  constructor(private readonly d: StreamDeliveryDeps) {
    // A message's handling catches its own errors; one that escapes is a bug, logged, and the next still runs.
    this.turns = new TurnQueue((err) => d.log.error({ err: (err as Error).message }, "stream message not handled"));
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.attemptsAbort = sharedAbortController();
    this.openAbort = new AbortController();
    void this.open();
  }

  private async open(): Promise<void> {
    const signal = this.openAbort.signal;
    for (let attempt = 0; !signal.aborted; attempt++) {
      try {
        const conn = await this.d.link.connected(signal);
        const opts = { replicas: conn.settings.replicas };
        const attempts = await AttemptLog.open(conn.js, opts);
        await this.d.shared.open(conn.js, opts);
        if (signal.aborted) return;
        const oldest = new OldestMessages(() => conn.jetstreamManager(), checkEveryMs(this.d.maxAgeMs));
        this.work = { ...this.d, js: conn.js, nc: conn.nc, inboxPrefix: conn.inboxPrefix, prefix: conn.settings.name, oldest, attempts, deadLetters: new StreamDeadLetters(this.d), handOff: new OrderedHandOff(this.d), replies: this.replies, turns: this.turns, signal: this.attemptsAbort.signal };
        this.sync();
        return;
      } catch (err) {
        if (signal.aborted) return;
        const delayMs = doubling(attempt, OPEN_RETRY_MS.initial, OPEN_RETRY_MS.max);
        this.d.log.error({ err: (err as Error).message, retryInMs: delayMs }, "stream mode: cannot open the key-value buckets; trying again");
        await new Promise((r) => setTimeout(r, delayMs).unref());
      }
    }
  }

  /** A subscription changed in the cache: its stream starts, stops, or looks again. */
  subscriptionChanged(subKey: string): void {
    if (this.work && this.running) this.syncOne(subKey);
  }

  private sync(): void {
    const keys = new Set<string>();
    for (const s of this.d.caches.subscriptions.values()) keys.add(objectKey(s.metadata));
    for (const s of this.streams.values()) keys.add(s.subKey);
    for (const key of keys) this.syncOne(key);
  }

  private syncOne(subKey: string): void {
    const work = this.work!;
    const sub = this.d.caches.subscription(subKey);
    const live = sub && !sub.metadata.deletionTimestamp && sub.metadata.uid ? sub : undefined;
    for (const [name, s] of this.streams) {
      if (s.subKey !== subKey || s.sub.uid === live?.metadata.uid) continue;
      s.stop(live ? "the subscription was created again" : "the subscription was deleted");
      this.streams.delete(name);
    }
    if (!live) return;
    const identity = { namespace: live.metadata.namespace!, name: live.metadata.name, uid: live.metadata.uid! };
    let consumer: string;
    try {
      consumer = consumerName(identity);
    } catch {
      return;
    }
    const existing = this.streams.get(consumer);
    if (existing) return existing.wake();
    const s = new SubscriptionStream(work, { ...identity, consumer });
    this.streams.set(consumer, s);
    s.start();
  }

  /** The endpoint of a subscription changed (another replica's state was taken): its stream looks again. */
  wakeSubscription(subKey: string): void {
    for (const s of this.streams.values()) if (s.subKey === subKey) s.wake();
  }

  /** Attempts in flight from the stream. */
  get inFlight(): number {
    let n = 0;
    for (const s of this.streams.values()) n += s.inFlight;
    return n;
  }

  async stop(graceMs: number): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.openAbort.abort();
    const streams = [...this.streams.values()];
    for (const s of streams) s.stopFetching();
    const inFlight = this.inFlight;
    const finishedInGrace = await until(() => this.inFlight === 0, graceMs);
    const interrupted = this.inFlight;
    // The attempts still out end as interrupted: recorded, and handed back for another replica.
    if (!finishedInGrace) this.attemptsAbort.abort(new Error("drain timeout"));
    // Pulls still open end within their expiry; what they bring goes back at once.
    await until(() => streams.every((s) => s.idle), FETCH_EXPIRES_MS + 10_000);
    for (const s of streams) s.stop("shutdown");
    this.streams.clear();
    // On the connection before the link closes it.
    this.replies.flush();
    await this.d.shared.close();
    this.work = undefined;
    this.lastDrain = { finishedInGrace, inFlight, interrupted };
  }
}

/** Resolves true once `done()` holds, false after `ms`. */
async function until(done: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  return true;
}

/**
 * The subscription cache's handler, also telling stream mode of every change of a subscription;
 * `specChanged` is false for a change of status or metadata only (the leader's rollups).
 */
export function withSubscriptionListeners(inner: ReflectorHandler<SubscriptionObject>, listeners: ReadonlyArray<(subKey: string, specChanged: boolean) => void>): ReflectorHandler<SubscriptionObject> {
  const tell = (s: SubscriptionObject, specChanged: boolean) => {
    const key = objectKey(s.metadata);
    for (const l of listeners) l(key, specChanged);
  };
  return {
    add: (s) => {
      inner.add(s);
      tell(s, true);
    },
    update: (old, s) => {
      inner.update(old, s);
      tell(s, old.metadata.generation !== s.metadata.generation || old.metadata.uid !== s.metadata.uid || !!s.metadata.deletionTimestamp);
    },
    delete: (s) => {
      inner.delete(s);
      tell(s, true);
    },
    ...(inner.listed ? { listed: (startedAt: number) => inner.listed!(startedAt) } : {}),
  };
}
