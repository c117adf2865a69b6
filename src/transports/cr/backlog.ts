// spec.maxPending for deliveries created directly (kubectl, any client, past the publish doors'
// 429): the first maxPending active deliveries of a subscription, in the order the leader
// reconciles them, are admitted to the delivery path; the others wait (condition BacklogFull)
// in FIFO order, and one is woken each time an admitted delivery leaves the active set
// (finished or deleted). A subscription without maxPending admits everything. Leader state:
// a new term starts empty and admits in the order it reconciles its keys.

interface SubscriptionBacklog {
  readonly admitted: Set<string>;
  /** Insertion-ordered: the first is the next admitted. */
  readonly waiting: Set<string>;
}

export class Backlog {
  private readonly subs = new Map<string, SubscriptionBacklog>();

  constructor(
    /** Queues a delivery key again (it may go on now). */
    private readonly wake: (deliveryKey: string) => void,
  ) {}

  /**
   * Whether `deliveryKey` may go on under `cap` (undefined: no cap). When it may not, it is
   * remembered as waiting and woken (in its turn) when a place frees.
   */
  admit(subKey: string, deliveryKey: string, cap: number | undefined): boolean {
    let b = this.subs.get(subKey);
    if (cap === undefined) {
      // No cap (any more): whoever waited goes on.
      if (b) {
        this.subs.delete(subKey);
        for (const k of b.waiting) this.wake(k);
      }
      return true;
    }
    if (!b) this.subs.set(subKey, (b = { admitted: new Set(), waiting: new Set() }));
    if (b.admitted.has(deliveryKey)) return true;
    b.waiting.add(deliveryKey); // keeps its place in line when it waited already
    const free = cap - b.admitted.size;
    if (free > 0 && isAmongFirst(b.waiting, deliveryKey, free)) {
      b.waiting.delete(deliveryKey);
      b.admitted.add(deliveryKey);
      return true;
    }
    return false;
  }

  /** The delivery left the active set: its place goes to the first waiting one. */
  left(subKey: string, deliveryKey: string, cap: number | undefined): void {
    const b = this.subs.get(subKey);
    if (!b) return;
    b.waiting.delete(deliveryKey);
    if (!b.admitted.delete(deliveryKey)) return;
    if (cap === undefined) return void this.admit(subKey, deliveryKey, undefined);
    this.wakeNext(b, cap);
    if (b.admitted.size === 0 && b.waiting.size === 0) this.subs.delete(subKey);
  }

  /** Deliveries of a subscription waiting for a place. */
  waitingOf(subKey: string): number {
    return this.subs.get(subKey)?.waiting.size ?? 0;
  }

  /** A new leadership term: nothing is admitted yet. */
  reset(): void {
    this.subs.clear();
  }

  /** Wakes as many waiting deliveries (oldest first) as there are free places; they admit themselves. */
  private wakeNext(b: SubscriptionBacklog, cap: number): void {
    let free = cap - b.admitted.size;
    for (const k of b.waiting) {
      if (free-- <= 0) return;
      this.wake(k);
    }
  }
}

/** Whether `key` is among the first `n` of `set` (insertion order). */
function isAmongFirst(set: Set<string>, key: string, n: number): boolean {
  for (const k of set) {
    if (k === key) return true;
    if (--n <= 0) return false;
  }
  return false;
}
