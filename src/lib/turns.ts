// Heavy synchronous work, one piece per event-loop turn. Work queued at once (a pull that brings
// ten 200 KiB messages in one socket read) would otherwise run back to back, holding every
// other tenant's I/O (their messages, their webhooks' answers, timers) until all of it is done.
// Each piece runs in its own setImmediate, and the next is scheduled from inside it, so the
// event loop polls for I/O between two pieces. In order (first queued, first run).

export class TurnQueue {
  private readonly queue: Array<() => void> = [];
  private scheduled = false;

  /** `onError` is told of a piece that threw; the pieces after it still run. */
  constructor(private readonly onError: (err: unknown) => void) {}

  /** How many pieces wait for their turn. */
  get waiting(): number {
    return this.queue.length;
  }

  /** Runs `fn` in a later turn of its own, after everything queued before it. */
  run(fn: () => void): void {
    this.queue.push(fn);
    this.schedule();
  }

  private schedule(): void {
    if (this.scheduled || this.queue.length === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      const fn = this.queue.shift();
      try {
        fn?.();
      } catch (err) {
        this.onError(err);
      }
      this.schedule();
    });
  }
}
