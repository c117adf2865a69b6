// Whether a message of an event type its subscription no longer lists was published before the
// type was removed (it becomes a dead letter, as plan() decides) or after (never the
// subscription's: acknowledged and nothing else), from the bounds the leader records on the
// consumer (stream/type-removal.ts). The consumer's cached info is used; it is read again, at
// most once a second, when it knows of no removal matching the message.
import type { Consumer } from "@nats-io/jetstream";
import { publishedAfterRemoval, readDraining } from "../../jetstream/type-removal.js";

/** The consumer's info is read again at most this often for a message no recorded removal matches. */
const REFRESH_MS = 1_000;

export type Removal = "before" | "after" | "unknown";

export class RemovedTypes {
  private readAt = 0;

  constructor(private readonly now: () => number) {}

  /** "unknown": the consumer's info could not be read (decide later). */
  async when(consumer: Consumer, msg: { subject: string; seq: number }): Promise<Removal> {
    try {
      let after = publishedAfterRemoval(readDraining((await consumer.info(true)).config.metadata), msg.subject, msg.seq);
      if (after === undefined && this.now() - this.readAt >= REFRESH_MS) {
        this.readAt = this.now();
        after = publishedAfterRemoval(readDraining((await consumer.info(false)).config.metadata), msg.subject, msg.seq);
      }
      // No removal recorded for it: the leader has not seen the change yet, so it was published before.
      return after ? "after" : "before";
    } catch {
      return "unknown";
    }
  }
}
