// The age limit of stream mode's events (HOOKLINE_STREAM_MAX_AGE_MS): an event not delivered
// by that age after JetStream stored it becomes a dead letter with reason Expired, never a
// silent drop. A subscription that is pulled meets its expired messages as they come (each is
// checked before it is planned); one that holds its events (paused, Secret missing, spec
// invalid, breaker Open, endpoint Disabled) is not pulled, so every replica looks, every
// `checkEveryMs(maxAgeMs)`, at how old the oldest event of the namespace's stream is (one read
// per namespace and period, shared by its subscriptions: OldestMessages) and, when it is past
// the age, pulls the held subscription's messages anyway to dead-letter the expired ones
// (subscription-stream.ts). JetStream's own max_age on the stream is a backstop well above the
// age (stream/layout.ts backstopAgeMs): it only drops what no replica was running to expire.
import type { JetStreamManager } from "@nats-io/jetstream";

/** How often a held subscription's namespace is looked at: a quarter of the age, between 1 s and a minute. */
export function checkEveryMs(maxAgeMs: number): number {
  return Math.min(60_000, Math.max(1_000, Math.floor(maxAgeMs / 4)));
}

/** Whether a message stored at `storedAt` (epoch ms) is past the age at `now`. */
export function isExpired(storedAt: number, now: number, maxAgeMs: number): boolean {
  return now - storedAt >= maxAgeMs;
}

/** The dead letter's message: how long it waited and the limit, readable (kubectl describe). */
export function expiredMessage(storedAt: number, now: number, maxAgeMs: number): string {
  return `the event waited ${duration(now - storedAt)} in the stream without being delivered (stored ${new Date(storedAt).toISOString()}); the limit is ${duration(maxAgeMs)} (HOOKLINE_STREAM_MAX_AGE_MS)`;
}

function duration(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 120) return `${m}m`;
  const h = Math.floor(m / 60);
  return h < 48 ? `${h}h${m % 60 ? `${m % 60}m` : ""}` : `${Math.floor(h / 24)}d${h % 24 ? `${h % 24}h` : ""}`;
}

const STREAM_NOT_FOUND = 10059;

/** When the oldest message of each namespace's stream was stored, read at most once per period and stream. */
export class OldestMessages {
  private readonly cache = new Map<string, { at: number; value: Promise<number | undefined> }>();

  constructor(
    private readonly jsm: () => Promise<JetStreamManager>,
    private readonly periodMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Epoch ms of the stream's oldest message; undefined when it holds none (or cannot be read now). */
  oldest(stream: string): Promise<number | undefined> {
    const now = this.now();
    const hit = this.cache.get(stream);
    if (hit && now - hit.at < this.periodMs) return hit.value;
    const value = this.read(stream);
    this.cache.set(stream, { at: now, value });
    return value;
  }

  private async read(stream: string): Promise<number | undefined> {
    try {
      const si = await (await this.jsm()).streams.info(stream);
      if (si.state.messages === 0) return undefined;
      const at = Date.parse(si.state.first_ts);
      return Number.isFinite(at) ? at : undefined;
    } catch (err) {
      if ((err as { code?: number }).code !== STREAM_NOT_FOUND) this.cache.delete(stream);
      return undefined;
    }
  }
}
