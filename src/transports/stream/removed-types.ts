// Whether a message of an event type its subscription no longer lists was published before the
// type was removed (it becomes a dead letter, as plan() decides) or after (never the
// subscription's: acknowledged and nothing else), from the bounds the leader records on the
// consumer (stream/type-removal.ts), or, once the leader is through with a removal, from the
// consumer's narrowed filter. The consumer's cached info is used; it is read again, at most once
// a second, when it cannot tell.
import type { Consumer } from "@nats-io/jetstream";
import type { ConsumerInfo } from "@nats-io/jetstream";
import { publishedAfterRemovalOrNarrowing, readDraining } from "../../jetstream/type-removal.js";

/** The consumer's info is read again at most this often for a message no recorded removal matches. */
const REFRESH_MS = 1_000;

export type Removal = "before" | "after" | "unknown";

export class RemovedTypes {
  private readAt = 0;

  constructor(private readonly now: () => number) {}

  /** "unknown": the consumer's info could not be read (decide later). */
  async when(consumer: Consumer, msg: { subject: string; seq: number }): Promise<Removal> {
    try {
      let after = decide(await consumer.info(true), msg);
      if (after === undefined && this.now() - this.readAt >= REFRESH_MS) {
        this.readAt = this.now();
        after = decide(await consumer.info(false), msg);
      }
      // No removal recorded for it: the leader has not seen the change yet, so it was published before.
      return after ? "after" : "before";
    } catch {
      return "unknown";
    }
  }
}

/** From the consumer's info: its draining bounds, and its filter (narrowed once a drain is through). */
function decide(info: ConsumerInfo, msg: { subject: string; seq: number }): boolean | undefined {
  const filters = info.config.filter_subjects ?? (info.config.filter_subject ? [info.config.filter_subject] : []);
  return publishedAfterRemovalOrNarrowing(readDraining(info.config.metadata), filters, msg.subject, msg.seq);
}
