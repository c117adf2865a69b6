// Whether a message of an event type its subscription no longer lists was published before the
// type was removed (it becomes a dead letter, as plan() decides) or after (never the
// subscription's: acknowledged and nothing else), from the bounds the leader records on the
// consumer (stream/type-removal.ts), or, once the leader is through with a removal, from the
// consumer's narrowed filter.
//
// The consumer's cached info decides when it can. When it cannot (no removal recorded there and
// the filter still covers the subject), only a read of the info made after the message was asked
// about may say "before": a cached read older than the message may predate the removal, and a
// message published after the removal would then be dead-lettered instead of acknowledged. The
// messages of one fetch are asked about together, so reads are shared: at most one is in flight,
// and a message asked about while it is out waits for the next one, which starts when it ends.
import type { Consumer, ConsumerInfo } from "@nats-io/jetstream";
import { publishedAfterRemovalOrNarrowing, readDraining } from "../../jetstream/type-removal.js";

export type Removal = "before" | "after" | "unknown";

/** What RemovedTypes reads of a consumer. */
export type ConsumerInfoSource = Pick<Consumer, "info">;

export class RemovedTypes {
  /** The read in flight, and the one queued to start after it (shared by whoever asked meanwhile). */
  private inFlight: Promise<ConsumerInfo> | undefined;
  private queued: Promise<ConsumerInfo> | undefined;

  /** "unknown": the consumer's info could not be read (decide later). */
  async when(consumer: ConsumerInfoSource, msg: { subject: string; seq: number }): Promise<Removal> {
    try {
      let after = decide(await consumer.info(true), msg);
      if (after === undefined) after = decide(await this.readAfterNow(consumer), msg);
      // No removal recorded for it in a read made after it arrived: the leader has not seen the
      // change yet, so it was published before (its sequence is within the bound to come).
      return after ? "after" : "before";
    } catch {
      return "unknown";
    }
  }

  /** A read of the consumer's info that starts no earlier than this call. */
  private readAfterNow(consumer: ConsumerInfoSource): Promise<ConsumerInfo> {
    if (!this.inFlight) return this.start(consumer);
    this.queued ??= this.inFlight
      .catch(() => undefined)
      .then(() => {
        this.queued = undefined;
        return this.start(consumer);
      });
    return this.queued;
  }

  private start(consumer: ConsumerInfoSource): Promise<ConsumerInfo> {
    const read = consumer.info(false);
    this.inFlight = read;
    const clear = () => {
      if (this.inFlight === read) this.inFlight = undefined;
    };
    read.then(clear, clear);
    return read;
  }
}

/** From the consumer's info: its draining bounds, and its filter (narrowed once a drain is through). */
function decide(info: ConsumerInfo, msg: { subject: string; seq: number }): boolean | undefined {
  const filters = info.config.filter_subjects ?? (info.config.filter_subject ? [info.config.filter_subject] : []);
  return publishedAfterRemovalOrNarrowing(readDraining(info.config.metadata), filters, msg.subject, msg.seq);
}
