// The attempts a stream message has had, across redeliveries and replicas: JetStream counts
// deliveries (a drain's or a crashed replica's message is delivered again without an attempt),
// not attempts, so the status an attempt's outcome computed (core/attempt/outcome.ts: attempts, history,
// interruptions, nextAttemptAt) is kept in a JetStream key-value bucket, one entry per message
// and subscription. It is written only after a failed or interrupted attempt, read only when a
// message comes again (delivery count above 1), and deleted with the message's final outcome.
// A final outcome that could not be recorded (the dead letter could not be created) is kept
// here too, so the redelivered message records it instead of sending the request again.
import { Kvm, type KV } from "@nats-io/kv";
import { StorageType, type JetStreamClient } from "@nats-io/jetstream";
import type { DeliveryStatus } from "../../api/delivery.js";
import type { Final } from "../../core/attempt/outcome.js";
import { KV_BUCKETS } from "../../jetstream/permissions.js";

export const ATTEMPTS_BUCKET = KV_BUCKETS.attempts;

/**
 * How long an entry lives: longer than any retry schedule (50 attempts at the 1 h Retry-After
 * cap). A message held longer (a subscription paused for weeks) starts its count again.
 */
export const ATTEMPTS_TTL_MS = 14 * 24 * 3_600_000;

/** How long the marker of a purged entry stays (an outage's worth of retries leaves one per message). */
const PURGE_MARKER_TTL_MS = 60_000;

/** What is kept of one message's attempts. */
export interface AttemptRecord {
  status: DeliveryStatus;
  /** Set when the outcome is final but not recorded yet (its dead letter waits to be created). */
  final?: Final;
}

export class AttemptLog {
  private constructor(private readonly kv: KV) {}

  /** Opens the bucket, making it when missing (any replica; the same settings every time). */
  static async open(js: JetStreamClient, opts: { replicas: number }): Promise<AttemptLog> {
    const kv = await new Kvm(js).create(ATTEMPTS_BUCKET, {
      description: "Hookline stream mode: the attempts of messages that failed at least once",
      history: 1,
      ttl: ATTEMPTS_TTL_MS,
      // Message TTLs on: the marker a purge leaves goes after a minute, not after ATTEMPTS_TTL_MS.
      markerTTL: PURGE_MARKER_TTL_MS,
      storage: StorageType.File,
      replicas: opts.replicas,
    });
    return new AttemptLog(kv);
  }

  private static key(consumer: string, seq: number): string {
    return `${consumer}.${seq}`;
  }

  async get(consumer: string, seq: number): Promise<AttemptRecord | undefined> {
    const e = await this.kv.get(AttemptLog.key(consumer, seq));
    if (!e || e.operation !== "PUT" || e.length === 0) return undefined;
    return e.json<AttemptRecord>();
  }

  async put(consumer: string, seq: number, record: AttemptRecord): Promise<void> {
    await this.kv.put(AttemptLog.key(consumer, seq), JSON.stringify(record));
  }

  async delete(consumer: string, seq: number): Promise<void> {
    await this.kv.purge(AttemptLog.key(consumer, seq), { ttl: `${PURGE_MARKER_TTL_MS / 1000}s` });
  }
}
