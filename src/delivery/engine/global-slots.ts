// The operator-wide request slots (WEBHOOK_MAX_IN_FLIGHT), shared fairly between namespaces:
// each namespace with work gets globalMax / (namespaces with work), idle shares are lent, and a
// freed slot is held for a delivery of the namespace furthest below its share, woken for it.
// Slots in use are never taken back, so lending keeps an eighth of them (with 8 or more) for
// the others while another namespace has WebhookSubscriptions or had work in the last minute: a
// namespace whose requests all hang cannot make the next one wait for the first of them to time
// out, even one whose first event comes after a quiet hour.

/**
 * One namespace's use of the global slots: requests in flight, deliveries parked for a slot,
 * and deliveries woken for a freed slot that have not yet taken it (each holds a claim on one).
 */
interface Tenant {
  inFlight: number;
  /** Parked deliveries, each with the function that wakes it (its transport's). */
  readonly parked: Map<string, () => void>;
  readonly woken: Set<string>;
}

export const namespaceOf = (key: string): string => key.slice(0, key.indexOf("/"));

/** How long after its last work a namespace still has slots kept for it. */
export const KEPT_FOR_RECENT_MS = 60_000;

/** The slots one namespace may not borrow while another had work lately: an eighth, 0 under 8. */
export const slotsKeptBack = (globalMax: number): number => Math.floor(globalMax / 8);

export class GlobalSlots {
  private inFlightNow = 0;
  /** Namespaces with work (in flight, parked or woken), in the order they got it. */
  private readonly tenants = new Map<string, Tenant>();
  /** Woken deliveries across namespaces: free slots held for them until they decide. */
  private claims = 0;
  /** The namespace woken last, for round-robin among namespaces equally far below their share. */
  private lastWoken: string | undefined;
  /** Called once at the next release (onFree): stream consumers with nothing in flight, waiting for a slot to pull again. */
  private readonly freeListeners = new Set<() => void>();
  /** The namespace that had work last, and when; then the last before it of any other namespace. */
  private latest: { namespace: string; at: number } | undefined;
  private latestOther: { namespace: string; at: number } | undefined;
  /** Slots a namespace may not borrow while another had work lately: an eighth (0 under 8 slots). */
  private readonly kept: number;

  constructor(
    private readonly globalMax: number,
    private readonly onInFlight?: (n: number) => void,
    private readonly now: () => number = Date.now,
    /**
     * How many namespaces have WebhookSubscriptions now (the operator's cache; cheap to ask: it
     * is asked at every take). With two or more, the eighth is kept back whether or not the
     * others had work lately; with one (a single-tenant install) nothing is.
     */
    private readonly namespacesKnown: (now: number) => number = () => 0,
  ) {
    this.kept = slotsKeptBack(globalMax);
  }

  get inFlight(): number {
    return this.inFlightNow;
  }

  /**
   * The fair-share rule: a delivery woken for a freed slot takes the slot held for it. Otherwise
   * a slot must be free and not held for a woken delivery; a namespace below its share may take
   * it; one at or above its share only when no namespace below its share has deliveries parked
   * (idle shares are lent).
   */
  mayTake(namespace: string, deliveryKey: string | undefined): boolean {
    const t = this.tenants.get(namespace);
    if (t && deliveryKey !== undefined && t.woken.has(deliveryKey)) return true;
    if (this.inFlightNow + this.claims >= this.globalMax) return false;
    if (t && t.inFlight + t.woken.size >= this.limitFor(namespace)) return false;
    const share = this.share(t ? 0 : 1);
    if ((t?.inFlight ?? 0) < share) return true;
    for (const [name, o] of this.tenants) if (name !== namespace && o.parked.size > 0 && o.inFlight < share) return false;
    return true;
  }

  /** Parks a delivery until a global slot is free for its namespace; `wake` is called then. */
  park(namespace: string, deliveryKey: string, wake: () => void): void {
    this.worked(namespace);
    const t = this.tenant(namespace);
    this.unclaim(t, deliveryKey);
    t.parked.set(deliveryKey, wake);
    // Parked beside a free slot held back for a namespace below its share: wake that namespace.
    this.wakeNext();
  }

  take(namespace: string, deliveryKey?: string): void {
    this.worked(namespace);
    const t = this.tenant(namespace);
    if (deliveryKey !== undefined) this.unclaim(t, deliveryKey);
    t.inFlight++;
    this.inFlightNow++;
    this.onInFlight?.(this.inFlightNow);
  }

  release(namespace: string): void {
    this.worked(namespace);
    const t = this.tenants.get(namespace);
    if (t) {
      t.inFlight = Math.max(0, t.inFlight - 1);
      this.tidy(namespace, t);
    }
    this.inFlightNow = Math.max(0, this.inFlightNow - 1);
    this.onInFlight?.(this.inFlightNow);
    if (this.freeListeners.size > 0) {
      const listeners = [...this.freeListeners];
      this.freeListeners.clear();
      for (const l of listeners) l();
    }
  }

  /**
   * Calls `listener` once, at the next release of a slot. For what waits for a slot without a
   * delivery to park: a stream consumer with nothing in flight, held or on its way, whose pull
   * was refused for want of a global slot (nothing else would wake it). Adding the same
   * function twice registers it once.
   */
  onFree(listener: () => void): void {
    this.freeListeners.add(listener);
  }

  /** Forgets a listener added with onFree (its consumer stopped). */
  offFree(listener: () => void): void {
    this.freeListeners.delete(listener);
  }

  /** A delivery's reconcile ended: a slot held for it and not taken goes to the next waiter. */
  settle(deliveryKey: string): void {
    const namespace = namespaceOf(deliveryKey);
    const t = this.tenants.get(namespace);
    if (!t || !this.unclaim(t, deliveryKey)) return;
    this.tidy(namespace, t);
    this.wakeNext();
  }

  /** One delivery per free (unheld) global slot, each from the namespace furthest below its share. */
  wakeNext(): void {
    while (this.inFlightNow + this.claims < this.globalMax) {
      const name = this.furthestBelowShare();
      if (name === undefined) return;
      const t = this.tenants.get(name)!;
      const [key, wake] = t.parked.entries().next().value!;
      t.parked.delete(key);
      t.woken.add(key);
      this.claims++;
      this.lastWoken = name;
      wake();
    }
  }

  /** Slots a namespace may hold at most: all, less those kept while another namespace has subscriptions or had work lately. */
  private limitFor(namespace: string, now = this.now()): number {
    if (this.kept === 0) return this.globalMax;
    if (this.namespacesKnown(now) >= 2) return this.globalMax - this.kept;
    const other = this.latest?.namespace !== namespace ? this.latest : this.latestOther;
    return other && now - other.at < KEPT_FOR_RECENT_MS ? this.globalMax - this.kept : this.globalMax;
  }

  /** Notes that `namespace` had work now (in O(1): the latest namespace, and the latest other one). */
  private worked(namespace: string): void {
    const at = this.now();
    if (this.latest?.namespace === namespace) this.latest.at = at;
    else {
      this.latestOther = this.latest;
      this.latest = { namespace, at };
    }
  }

  /** Each namespace with work gets globalMax / (namespaces with work), at least 1. */
  private share(extraTenants: number): number {
    return Math.max(1, Math.floor(this.globalMax / (this.tenants.size + extraTenants)));
  }

  private tenant(namespace: string): Tenant {
    let t = this.tenants.get(namespace);
    if (!t) {
      t = { inFlight: 0, parked: new Map(), woken: new Set() };
      this.tenants.set(namespace, t);
    }
    return t;
  }

  /** A namespace with nothing in flight, parked or woken no longer counts for the shares. */
  private tidy(namespace: string, t: Tenant): void {
    if (t.inFlight === 0 && t.parked.size === 0 && t.woken.size === 0) this.tenants.delete(namespace);
  }

  /** Drops the claim of a woken delivery (it took its slot, parked again or decided otherwise). */
  private unclaim(t: Tenant | undefined, deliveryKey: string): boolean {
    if (!t?.woken.delete(deliveryKey)) return false;
    this.claims--;
    return true;
  }

  /**
   * The namespace with parked deliveries whose in-flight and woken deliveries fall furthest
   * below its share; among equals, the first after the one woken last (round-robin).
   */
  private furthestBelowShare(): string | undefined {
    const share = this.share(0);
    let best: string | undefined;
    let bestDeficit = -Infinity;
    let bestAfterLast = false;
    let afterLast = this.lastWoken === undefined || !this.tenants.has(this.lastWoken);
    const now = this.now();
    for (const [name, t] of this.tenants) {
      if (t.parked.size > 0 && t.inFlight + t.woken.size < this.limitFor(name, now)) {
        const deficit = share - t.inFlight - t.woken.size;
        if (deficit > bestDeficit || (deficit === bestDeficit && afterLast && !bestAfterLast)) {
          best = name;
          bestDeficit = deficit;
          bestAfterLast = afterLast;
        }
      }
      if (name === this.lastWoken) afterLast = true;
    }
    return best;
  }
}
