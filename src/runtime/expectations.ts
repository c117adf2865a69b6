// "Expectations", as controller-runtime and client-go controllers keep them: after writing an
// object we remember the resourceVersion the write returned, and do not act on that object from
// the cache until the watch has delivered that version (or removed the object). A stale cache
// can then never cause a second attempt. resourceVersions are compared for equality only.

/** Versions remembered per key: enough for a write's answer overtaken by a few watch events. */
const SEEN_PER_KEY = 4;

export class Expectations {
  private readonly pending = new Map<string, { rv: string; at: number; uid?: string; deferred?: boolean }>();
  /**
   * The last versions the cache delivered per key: a write's answer can arrive after the watch
   * already delivered that version (and a newer one): expecting it then would make the key wait
   * for an event that never comes again.
   */
  private readonly seen = new Map<string, string[]>();

  constructor(
    private readonly ttlMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** We wrote `key` (the object `uid`) and the API server answered with `rv`. */
  expect(key: string, rv: string | undefined, uid?: string): void {
    if (!rv || this.seen.get(key)?.includes(rv)) return;
    this.pending.set(key, { rv, at: this.now(), ...(uid ? { uid } : {}) });
  }

  /** The expectation of `key`, unless it was for another object of that name (then it is dropped). */
  private pendingFor(key: string, uid: string | undefined) {
    const p = this.pending.get(key);
    if (p?.uid && uid && p.uid !== uid) {
      this.pending.delete(key);
      return undefined;
    }
    return p;
  }

  /**
   * The cache delivered `rv` for `key` (add/update), or the object left the cache (rv undefined).
   * True when `rv` is exactly our own last write and no reconcile is waiting for it (nothing new
   * to reconcile); false means the key should be queued.
   */
  observe(key: string, rv: string | undefined, uid?: string): boolean {
    if (rv === undefined) this.seen.delete(key);
    else this.seen.set(key, [...(this.seen.get(key) ?? []).slice(-(SEEN_PER_KEY - 1)), rv]);
    const p = this.pendingFor(key, uid);
    if (!p) return false;
    if (rv === undefined || rv === p.rv) {
      this.pending.delete(key);
      // A reconcile that waited for this version must run now.
      return rv !== undefined && !p.deferred;
    }
    return false;
  }

  /**
   * ok: the cached copy (at `cachedRv`) is at least as new as our last write. wait: it is older;
   * the watch will bring the newer one. expired: the watch has not shown our write for too long
   * (a relist skipped past it, or it is stuck): read the object from the API server instead.
   */
  check(key: string, cachedRv: string | undefined, uid?: string): "ok" | "wait" | "expired" {
    const p = this.pendingFor(key, uid);
    if (!p) return "ok";
    if (p.rv === cachedRv) {
      this.pending.delete(key);
      return "ok";
    }
    if (this.now() - p.at > this.ttlMs) {
      this.pending.delete(key);
      return "expired";
    }
    p.deferred = true;
    return "wait";
  }

  /**
   * How long until `key`'s expectation expires (0 when it has none): a reconcile that waits for
   * the cache looks again then at the latest, whether or not the watch brings the version.
   */
  untilExpiry(key: string): number {
    const p = this.pending.get(key);
    return p ? Math.max(0, p.at + this.ttlMs - this.now()) : 0;
  }

  /**
   * A list that started at `startedAt` replaced the cache: it shows every write answered before
   * it started, or something newer (a relist after a watch gap skips versions, so the version a
   * write returned may never be delivered). Those expectations are met; returns the keys whose
   * reconcile waited for one (queue them again).
   */
  relisted(startedAt: number): string[] {
    const waited: string[] = [];
    for (const [key, p] of this.pending) {
      if (p.at >= startedAt) continue;
      this.pending.delete(key);
      if (p.deferred) waited.push(key);
    }
    return waited;
  }

  forget(key: string): void {
    this.pending.delete(key);
    this.seen.delete(key);
  }

  clear(): void {
    this.pending.clear();
    this.seen.clear();
  }

  get size(): number {
    return this.pending.size;
  }
}
