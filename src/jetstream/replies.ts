// Acknowledgements (ack, nak, working) of one connection, sent together. The NATS client writes
// to its socket once per microtask turn; an ack sent as each webhook answer arrives therefore
// costs a socket write of its own, and at a few thousand deliveries a second those writes were
// the operator's largest single cost (a sixth of its CPU in a profile). Replies queued here go out
// together at the end of the event loop's turn (setImmediate): every answer read in one turn is
// acknowledged in one write. A reply waits at most that turn (well under a millisecond), far
// inside any ack wait; `flush()` sends what is queued at once (before the connection closes).
export interface Reply {
  send: () => void;
  /** The reply could not be sent (the connection closed): said by its owner, never thrown. */
  failed: (err: Error) => void;
}

export class ReplyBatch {
  private queued: Reply[] = [];
  private scheduled: NodeJS.Immediate | undefined;
  /** Replies sent so far, and the batches they went in (for tests and the debug log). */
  readonly counts = { replies: 0, batches: 0 };

  add(reply: Reply): void {
    this.queued.push(reply);
    this.scheduled ??= setImmediate(() => this.flush());
  }

  get pending(): number {
    return this.queued.length;
  }

  flush(): void {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    const batch = this.queued;
    if (!batch.length) return;
    this.queued = [];
    this.counts.batches++;
    for (const r of batch) {
      this.counts.replies++;
      try {
        r.send();
      } catch (err) {
        r.failed(err as Error);
      }
    }
  }
}
