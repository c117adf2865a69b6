// A client-go style work queue of keys: a key is queued at most once (dirty set), never handed
// to two workers at once (processing set), and re-queued when it was added while being
// processed. Delayed adds go through one TimerHeap; failures back off per key.

import { TimerHeap } from "./timer-heap.js";

export interface QueueOptions {
  /** Per-key failure backoff: base * 2^failures, capped. */
  failureBackoff?: { baseMs: number; maxMs: number };
  now?: () => number;
}

export class WorkQueue<K = string> {
  private queue: K[] = [];
  private head = 0;
  private dirty = new Set<K>();
  private processing = new Set<K>();
  private waiters: Array<(key: K | undefined) => void> = [];
  private failures = new Map<K, number>();
  private readonly timers: TimerHeap<K>;
  private shuttingDown = false;
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly opts: QueueOptions = {}) {
    this.timers = new TimerHeap<K>((key) => this.add(key), opts.now ?? Date.now);
  }

  /** Queues `key` now. A no-op when it is already queued. */
  add(key: K): void {
    if (this.shuttingDown) return;
    this.timers.cancel(key);
    if (this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return;
    const waiter = this.waiters.shift();
    if (waiter) {
      this.dirty.delete(key);
      this.processing.add(key);
      waiter(key);
    } else this.queue.push(key);
  }

  /** Queues `key` after `delayMs` (an earlier schedule of the same key wins). */
  addAfter(key: K, delayMs: number): void {
    if (this.shuttingDown) return;
    if (delayMs <= 0) return this.add(key);
    if (this.dirty.has(key)) return;
    this.timers.schedule(key, (this.opts.now ?? Date.now)() + delayMs);
  }

  /** Queues `key` after its failure backoff, and counts the failure. */
  addRateLimited(key: K): number {
    const n = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, n);
    const { baseMs, maxMs } = this.opts.failureBackoff ?? { baseMs: 200, maxMs: 60_000 };
    const delay = Math.min(maxMs, baseMs * 2 ** Math.min(n - 1, 20));
    this.addAfter(key, delay);
    return delay;
  }

  /** Clears the failure count of `key` (after a successful reconcile). */
  forget(key: K): void {
    this.failures.delete(key);
  }

  failuresOf(key: K): number {
    return this.failures.get(key) ?? 0;
  }

  /** The next key to process; undefined once the queue shuts down. */
  get(): Promise<K | undefined> {
    if (this.head < this.queue.length) {
      const key = this.queue[this.head++]!;
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue = this.queue.slice(this.head);
        this.head = 0;
      }
      this.dirty.delete(key);
      this.processing.add(key);
      return Promise.resolve(key);
    }
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Marks `key` processed; re-queues it if it was added meanwhile. */
  done(key: K): void {
    this.processing.delete(key);
    if (this.dirty.has(key)) {
      this.dirty.delete(key);
      this.add(key);
    }
    if (this.processing.size === 0) for (const w of this.idleWaiters.splice(0)) w();
  }

  isProcessing(key: K): boolean {
    return this.processing.has(key);
  }

  /** Keys ready to process now. */
  get length(): number {
    return this.queue.length - this.head;
  }

  /** Keys waiting for their delay. */
  get delayed(): number {
    return this.timers.size;
  }

  get inProgress(): number {
    return this.processing.size;
  }

  /** Stops handing out keys; workers waiting in get() receive undefined. */
  shutdown(): void {
    this.shuttingDown = true;
    this.timers.stop();
    for (const w of this.waiters.splice(0)) w(undefined);
    this.queue = [];
    this.head = 0;
    this.dirty.clear();
  }

  get isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  /** Resolves when no key is being processed. */
  whenIdle(): Promise<void> {
    if (this.processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}
