// Delayed work for many keys on one timer: a binary min-heap of (due time, key), one entry per
// key (the earliest wins), and a single setTimeout armed for the head. Thousands of deliveries
// waiting for their backoff cost one timer, not thousands.

interface Entry<K> {
  at: number;
  key: K;
}

export class TimerHeap<K> {
  private heap: Entry<K>[] = [];
  private due = new Map<K, number>();
  private timer: NodeJS.Timeout | undefined;
  private armedFor = Infinity;
  private stopped = false;

  constructor(
    private readonly fire: (key: K) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /** Schedules `key` at `at` (epoch ms) unless it is already scheduled earlier. */
  schedule(key: K, at: number): void {
    if (this.stopped) return;
    const existing = this.due.get(key);
    if (existing !== undefined && existing <= at) return;
    this.due.set(key, at);
    this.push({ at, key });
    this.arm();
  }

  cancel(key: K): void {
    // Lazy deletion: the heap entry is skipped when it surfaces.
    this.due.delete(key);
  }

  has(key: K): boolean {
    return this.due.has(key);
  }

  get size(): number {
    return this.due.size;
  }

  /** When `key` is due, if scheduled. */
  dueAt(key: K): number | undefined {
    return this.due.get(key);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.heap = [];
    this.due.clear();
  }

  private arm(): void {
    const head = this.peekLive();
    if (!head) {
      if (this.timer) clearTimeout(this.timer);
      this.timer = undefined;
      this.armedFor = Infinity;
      return;
    }
    if (this.timer && this.armedFor <= head.at) return;
    if (this.timer) clearTimeout(this.timer);
    this.armedFor = head.at;
    // setTimeout's limit is 2^31-1 ms; a far-future entry re-arms when that fires.
    const delay = Math.min(Math.max(0, head.at - this.now()), 2_147_483_647);
    this.timer = setTimeout(() => this.onTimer(), delay);
    this.timer.unref?.();
  }

  private onTimer(): void {
    this.timer = undefined;
    this.armedFor = Infinity;
    const now = this.now();
    for (;;) {
      const head = this.peekLive();
      if (!head || head.at > now) break;
      this.pop();
      this.due.delete(head.key);
      this.fire(head.key);
    }
    this.arm();
  }

  /** The head entry, after discarding cancelled or superseded ones. */
  private peekLive(): Entry<K> | undefined {
    while (this.heap.length) {
      const head = this.heap[0]!;
      if (this.due.get(head.key) === head.at) return head;
      this.pop();
    }
    return undefined;
  }

  private push(e: Entry<K>): void {
    const h = this.heap;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (h[p]!.at <= e.at) break;
      h[i] = h[p]!;
      i = p;
    }
    h[i] = e;
  }

  private pop(): Entry<K> | undefined {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (h.length && last) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        const mAt = () => (m === i ? last.at : h[m]!.at);
        if (l < h.length && h[l]!.at < mAt()) m = l;
        if (r < h.length && h[r]!.at < mAt()) m = r;
        if (m === i) break;
        h[i] = h[m]!;
        i = m;
      }
      h[i] = last;
    }
    return top;
  }
}
