// Heavy synchronous work, one piece per event-loop turn. Work queued at once (a pull that brings
// ten 200 KiB messages in one socket read) would otherwise run back to back, holding every
// other tenant's I/O (their messages, their webhooks' answers, timers) until all of it is done.
// Each piece runs in its own setImmediate, and the next is scheduled from inside it, so the
// event loop polls for I/O between two pieces.
//
// Pieces are queued by tenant (a key: the namespace), and the tenants take turns: one piece of
// each tenant with work waiting, round and round. A tenant's flood of large messages queued
// ahead of another's one therefore delays it by one piece, not by the whole flood. A tenant's
// own pieces run in the order they were queued.

export class TurnQueue {
  /** Waiting pieces by tenant; Map order is whose turn comes next. */
  private readonly queues = new Map<string, Array<() => void>>();
  private count = 0;
  private scheduled = false;

  /** `onError` is told of a piece that threw; the pieces after it still run. */
  constructor(private readonly onError: (err: unknown) => void) {}

  /** How many pieces wait for their turn. */
  get waiting(): number {
    return this.count;
  }

  /** Runs `fn` in a later turn of its own, after everything `tenant` queued before it. */
  run(fn: () => void, tenant = ""): void {
    const q = this.queues.get(tenant);
    if (q) q.push(fn);
    else this.queues.set(tenant, [fn]);
    this.count++;
    this.schedule();
  }

  private schedule(): void {
    if (this.scheduled || this.count === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      try {
        this.next()?.();
      } catch (err) {
        this.onError(err);
      }
      this.schedule();
    });
  }

  /** The first waiting tenant's next piece; that tenant goes to the back of the line. */
  private next(): (() => void) | undefined {
    const first = this.queues.entries().next();
    if (first.done) return undefined;
    const [tenant, q] = first.value;
    const fn = q.shift();
    this.queues.delete(tenant);
    if (q.length > 0) this.queues.set(tenant, q);
    this.count--;
    return fn;
  }
}
