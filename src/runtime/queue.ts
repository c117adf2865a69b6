// A client-go style work queue of keys: a key is queued at most once (dirty set), never handed
// to two workers at once (processing set), and re-queued when it was added while being
// processed. Delayed adds go through one TimerHeap; failures back off per key.
//
// With `tenantOf`, the keys ready to process are served fairly between tenants (namespaces):
// one FIFO per tenant, and the tenants take turns, one key each. A tenant that queues 10,000
// keys then delays another tenant's next key by at most one key per other tenant, not by
// 10,000 (the queue is a pool the tenants share, like the request slots). With `workers` too,
// the workers are shared the same way: a free worker goes first to a tenant below its share
// (workers / tenants with work) of the keys being processed, then to anyone (no worker idles
// beside ready work). Workers are not taken back, so a tenant whose reconciles are slow may
// hold them all while alone; another tenant's key then takes the next worker that frees.

import { TimerHeap } from "./timer-heap.js";
import { doubling } from "../lib/backoff.js";

export interface QueueOptions<K = string> {
  /** Per-key failure backoff: base * 2^failures, capped. */
  failureBackoff?: { baseMs: number; maxMs: number };
  now?: () => number;
  /** Whose key it is (e.g. its namespace): ready keys are handed out round-robin by tenant. */
  tenantOf?: (key: K) => string;
  /** The workers taking keys (with tenantOf): each tenant with work gets a fair share of them. */
  workers?: number;
}

/** A FIFO that drops its consumed head now and then (no shift() per item). */
class Fifo<T> {
  private items: T[] = [];
  private head = 0;

  push(item: T): void {
    this.items.push(item);
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head++]!;
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }

  get length(): number {
    return this.items.length - this.head;
  }
}

/** Ready keys: one FIFO per tenant, the tenants with keys in a FIFO of turns. */
class ReadyKeys<K> {
  private readonly lanes = new Map<string, Fifo<K>>();
  private readonly turns = new Fifo<string>();
  private size = 0;

  constructor(private readonly tenantOf: (key: K) => string) {}

  push(key: K): void {
    const tenant = this.tenantOf(key);
    let lane = this.lanes.get(tenant);
    if (!lane) {
      lane = new Fifo<K>();
      this.lanes.set(tenant, lane);
      this.turns.push(tenant);
    }
    lane.push(key);
    this.size++;
  }

  /**
   * The oldest key of the next tenant in turn that `may` take one (a tenant that may not keeps
   * its place at the back); the tenant goes to the back of the turns if it has more.
   */
  shift(may: (tenant: string) => boolean = () => true): { key: K; tenant: string } | undefined {
    for (let tries = this.turns.length; tries > 0; tries--) {
      const tenant = this.turns.shift()!;
      if (!may(tenant)) {
        this.turns.push(tenant);
        continue;
      }
      const lane = this.lanes.get(tenant)!;
      const key = lane.shift()!;
      if (lane.length > 0) this.turns.push(tenant);
      else this.lanes.delete(tenant);
      this.size--;
      return { key, tenant };
    }
    return undefined;
  }

  has(tenant: string): boolean {
    return this.lanes.has(tenant);
  }

  get length(): number {
    return this.size;
  }
}

const ONE_TENANT = (): string => "";

export class WorkQueue<K = string> {
  private ready: ReadyKeys<K>;
  private readonly tenantOf: (key: K) => string;
  /** Keys being processed, per tenant. */
  private readonly busy = new Map<string, number>();
  /** Tenants with keys ready or being processed (the workers' share is split between them). */
  private active = 0;
  private dirty = new Set<K>();
  private processing = new Set<K>();
  private waiters: Array<(key: K | undefined) => void> = [];
  private failures = new Map<K, number>();
  private readonly timers: TimerHeap<K>;
  private shuttingDown = false;
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly opts: QueueOptions<K> = {}) {
    this.timers = new TimerHeap<K>((key) => this.add(key), opts.now ?? Date.now);
    this.tenantOf = opts.tenantOf ?? ONE_TENANT;
    this.ready = new ReadyKeys<K>(this.tenantOf);
  }

  /** Queues `key` now. A no-op when it is already queued. */
  add(key: K): void {
    if (this.shuttingDown) return;
    this.timers.cancel(key);
    if (this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return;
    const tenant = this.tenantOf(key);
    const wasActive = this.isActive(tenant);
    this.ready.push(key);
    if (!wasActive) this.active++;
    this.dispatch();
  }

  private isActive(tenant: string): boolean {
    return this.ready.has(tenant) || (this.busy.get(tenant) ?? 0) > 0;
  }

  /** A tenant may take one more worker: below its share, or the workers are not shared. */
  private readonly mayTake = (tenant: string): boolean => {
    const workers = this.opts.workers;
    if (workers === undefined || this.opts.tenantOf === undefined) return true;
    return (this.busy.get(tenant) ?? 0) < Math.max(1, Math.ceil(workers / Math.max(1, this.active)));
  };

  /** The next key a free worker takes (a tenant below its share first), marked processing. */
  private take(): K | undefined {
    const next = this.ready.shift(this.mayTake) ?? this.ready.shift();
    if (!next) return undefined;
    this.dirty.delete(next.key);
    this.processing.add(next.key);
    this.busy.set(next.tenant, (this.busy.get(next.tenant) ?? 0) + 1);
    return next.key;
  }

  /** Hands ready keys to waiting workers while some may be taken. */
  private dispatch(): void {
    while (this.waiters.length > 0) {
      const key = this.take();
      if (key === undefined) return;
      this.waiters.shift()!(key);
    }
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
    const delay = doubling(n - 1, baseMs, maxMs);
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
    if (this.waiters.length === 0) {
      const key = this.take();
      if (key !== undefined) return Promise.resolve(key);
    }
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Marks `key` processed; re-queues it if it was added meanwhile. */
  done(key: K): void {
    if (!this.processing.delete(key)) return;
    const tenant = this.tenantOf(key);
    const left = (this.busy.get(tenant) ?? 1) - 1;
    if (left > 0) this.busy.set(tenant, left);
    else this.busy.delete(tenant);
    if (!this.isActive(tenant)) this.active--;
    if (this.dirty.has(key)) {
      this.dirty.delete(key);
      this.add(key);
    }
    // A worker freed: a tenant held back at its share may be served now.
    this.dispatch();
    if (this.processing.size === 0) for (const w of this.idleWaiters.splice(0)) w();
  }

  isProcessing(key: K): boolean {
    return this.processing.has(key);
  }

  /** Keys ready to process now. */
  get length(): number {
    return this.ready.length;
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
    this.ready = new ReadyKeys<K>(this.tenantOf);
    this.active = this.busy.size;
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
