// List-then-watch of one collection into an in-memory store, as client-go's Reflector does:
// paginated list, watch from its resourceVersion with bookmarks, relist on 410 Gone, restart
// with jittered backoff after any other error, and a watchdog that restarts a silent watch.
// Items can be projected (metadata-only or Table rows) so a store holds only what it needs.
import type { Logger } from "pino";
import { ACCEPT, ApiError, type KubeClient } from "./client.js";
import { cutMember, memberPath } from "./json-member.js";
import { LineSplitter } from "./lines.js";
import { objectKey, type ObjectMeta } from "./types.js";
import { doubling } from "../lib/backoff.js";
import { sleep } from "../lib/sleep.js";

export type Representation = "json" | "metadata" | "table";

/** Where a watched object's deferred member (`ReflectorOptions.deferred`) is, as JSON bytes. */
export const DEFERRED: unique symbol = Symbol("deferred");

/** What `transform` receives: the object, or for Table watches the row's metadata and cells by column name. */
export interface RawItem {
  metadata: ObjectMeta;
  [field: string]: unknown;
  /** Table representation only: printer-column values by column name. */
  cells?: Record<string, unknown>;
  /** The deferred member's JSON text, cut out of the object unparsed (see `ReflectorOptions.deferred`). */
  [DEFERRED]?: Buffer;
}

export interface ReflectorHandler<T> {
  add(obj: T): void;
  update(old: T, obj: T): void;
  delete(obj: T): void;
  /**
   * After every successful list (the first one means the store is synced). `startedAt` (epoch
   * ms) is when its first page was asked for: the store now shows every write answered before.
   */
  listed?(startedAt: number): void;
}

export interface ReflectorOptions<T> {
  client: KubeClient;
  /** For logs. */
  name: string;
  /** Collection path, e.g. /apis/hookline.dev/v1alpha1/namespaces/shop/webhookdeliveries. */
  path: string;
  fieldSelector?: string;
  labelSelector?: string;
  representation?: Representation;
  /** Projects an item into what the store keeps; returning undefined skips it. */
  transform: (item: RawItem) => T | undefined;
  handler: ReflectorHandler<T>;
  log: Logger;
  /** Items per list page (the most, with `pageBytes`); default 500. */
  pageSize?: number;
  /**
   * Sizes list pages by the bytes of their items instead: pages start at `initial` items and
   * grow or shrink so one page holds about `target` bytes (as `of` counts them), between 1 and
   * `pageSize` items. A (re)list then holds one bounded page at a time, whatever an item weighs,
   * without paying one request per few items when items are small.
   */
  pageBytes?: { target: number; initial: number; of(obj: T): number };
  /** Watches are closed by the server after a random time in [min, 2*min) seconds. */
  minWatchTimeoutSeconds?: number;
  backoff?: { initialMs: number; maxMs: number };
  random?: () => number;
  /** Called when the reflector starts failing and when it recovers. */
  onHealth?: (healthy: boolean) => void;
  /**
   * false: keep nothing, for collections that may be huge and need no lookups. The list only
   * fetches a resourceVersion to watch from (what exists already is the caller's business:
   * e.g. a periodic paginated sweep); every watched object goes to `handler.add` (ADDED),
   * `handler.update` (MODIFIED, the new object as both arguments) or `delete` as it passes.
   */
  keep?: boolean;
  /**
   * A member of watched objects (by its path of keys, e.g. spec.payload) that is cut out of a
   * watch event of at least `minBytes` unparsed: `transform` gets it as JSON bytes under
   * `DEFERRED`, and parses it only if it needs it (a large payload it already summarised need not
   * be parsed again at every status write). Nothing of it is kept after `transform`. List pages
   * are parsed whole.
   */
  deferred?: { path: readonly string[]; minBytes: number };
}

interface WatchEvent {
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  object: Record<string, unknown>;
}

export class GoneError extends Error {}



export class Reflector<T extends { metadata: Pick<ObjectMeta, "name" | "namespace" | "resourceVersion"> }> {
  readonly store = new Map<string, T>();
  private resourceVersion: string | undefined;
  private running: Promise<void> | undefined;
  private abort = new AbortController();
  private synced = false;
  private syncWaiters: Array<() => void> = [];
  private columns: string[] = [];
  /** Consecutive failures: the exponent of the retry backoff. */
  private failures = 0;
  private healthy = true;

  /** `opts.deferred`, its path within a watch event as bytes. */
  private readonly deferred: { path: Buffer[]; minBytes: number } | undefined;

  constructor(private readonly opts: ReflectorOptions<T>) {
    this.deferred = opts.deferred && { path: memberPath("object", ...opts.deferred.path), minBytes: opts.deferred.minBytes };
  }

  get hasSynced(): boolean {
    return this.synced;
  }

  start(): void {
    if (this.running) return;
    this.abort = new AbortController();
    this.running = this.loop(this.abort.signal);
  }

  async stop(): Promise<void> {
    this.abort.abort(new Error("reflector stopped"));
    await this.running;
    this.running = undefined;
  }

  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.synced) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.syncWaiters.push(resolve);
      signal?.addEventListener("abort", () => reject(signal.reason as Error), { once: true });
    });
  }

  private async loop(signal: AbortSignal): Promise<void> {
    const { initialMs, maxMs } = this.opts.backoff ?? { initialMs: 500, maxMs: 30_000 };
    const random = this.opts.random ?? Math.random;
    while (!signal.aborted) {
      try {
        if (this.resourceVersion === undefined) await this.list(signal);
        await this.watch(signal);
        this.recovered();
      } catch (err) {
        if (signal.aborted) break;
        if (err instanceof GoneError || (err instanceof ApiError && err.isGone)) {
          this.opts.log.info({ reflector: this.opts.name }, "watch expired (410 Gone), relisting");
          this.resourceVersion = undefined;
          continue;
        }
        this.failures++;
        this.setHealthy(false);
        const delay = doubling(this.failures - 1, initialMs, maxMs);
        const jittered = Math.round(delay * (0.5 + random() / 2));
        this.opts.log.warn({ reflector: this.opts.name, err: describe(err), retryInMs: jittered, failures: this.failures }, "list/watch failed, retrying");
        await sleep(jittered, signal);
      }
    }
  }

  /** A list succeeded or a watch ended normally: the backoff starts over. */
  private recovered() {
    this.failures = 0;
    this.setHealthy(true);
  }

  private setHealthy(healthy: boolean) {
    if (this.healthy === healthy) return;
    this.healthy = healthy;
    this.opts.onHealth?.(healthy);
  }

  private async list(signal: AbortSignal): Promise<void> {
    const startedAt = Date.now();
    const seen = new Map<string, T>();
    let continueToken: string | undefined;
    let rv: string | undefined;
    const maxItems = this.opts.pageSize ?? 500;
    let limit = this.opts.pageBytes ? Math.min(maxItems, this.opts.pageBytes.initial) : maxItems;
    do {
      const page = await this.opts.client.request<{
        metadata?: { resourceVersion?: string; continue?: string };
        items?: RawItem[];
        rows?: TableRow[];
        columnDefinitions?: Array<{ name: string }>;
      }>({
        method: "GET",
        path: this.opts.path,
        accept: ACCEPT[this.opts.representation ?? "json"],
        query: {
          limit: this.opts.keep === false ? 1 : limit,
          continue: continueToken,
          fieldSelector: this.opts.fieldSelector,
          labelSelector: this.opts.labelSelector,
          ...(this.opts.representation === "table" ? { includeObject: "Metadata" } : {}),
        },
        signal,
        timeoutMs: 60_000,
      });
      if (page.columnDefinitions?.length) this.columns = page.columnDefinitions.map((c) => c.name);
      const items = this.opts.representation === "table" ? (page.rows ?? []).map((r) => this.fromRow(r)) : (page.items ?? []);
      rv = page.metadata?.resourceVersion;
      if (this.opts.keep === false) break;
      let bytes = 0;
      for (const item of items) {
        const obj = this.opts.transform(item);
        if (!obj) continue;
        seen.set(objectKey(obj.metadata), obj);
        if (this.opts.pageBytes) bytes += this.opts.pageBytes.of(obj);
      }
      if (this.opts.pageBytes && items.length > 0) limit = nextPageLimit(limit, items.length, bytes, this.opts.pageBytes.target, maxItems);
      continueToken = page.metadata?.continue || undefined;
    } while (continueToken);

    this.replaceStore(seen);
    this.resourceVersion = rv;
    this.opts.handler.listed?.(startedAt);
    if (!this.synced) {
      this.synced = true;
      for (const w of this.syncWaiters.splice(0)) w();
    }
    this.recovered();
  }

  /** Replaces the store with a list's objects, telling the handler what changed since the last list. */
  private replaceStore(seen: Map<string, T>): void {
    for (const [key, old] of this.store) {
      if (!seen.has(key)) {
        this.store.delete(key);
        this.opts.handler.delete(old);
      }
    }
    for (const [key, obj] of seen) {
      const old = this.store.get(key);
      this.store.set(key, obj);
      if (!old) this.opts.handler.add(obj);
      else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) this.opts.handler.update(old, obj);
    }
  }

  /** The object of a watch event, or for Table watches its one row (undefined if it has none). */
  private itemOf(event: WatchEvent): RawItem | undefined {
    if (this.opts.representation !== "table") return event.object as unknown as RawItem;
    const table = event.object as { rows?: TableRow[]; columnDefinitions?: Array<{ name: string }> };
    if (table.columnDefinitions?.length) this.columns = table.columnDefinitions.map((c) => c.name);
    const row = table.rows?.[0];
    return row ? this.fromRow(row) : undefined;
  }

  private fromRow(row: TableRow): RawItem {
    return rowItem(this.columns, row);
  }

  private async watch(outer: AbortSignal): Promise<void> {
    const min = this.opts.minWatchTimeoutSeconds ?? 300;
    const timeoutSeconds = Math.floor(min + (this.opts.random ?? Math.random)() * min);
    const abort = new AbortController();
    const signal = AbortSignal.any([outer, abort.signal]);
    // The server ends the watch after timeoutSeconds; silence well past that means a dead connection.
    const watchdogMs = (timeoutSeconds + 30) * 1000;
    let watchdog = setTimeout(() => abort.abort(new Error("watch silent, restarting")), watchdogMs);
    const feed = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => abort.abort(new Error("watch silent, restarting")), watchdogMs);
    };
    try {
      const representation = this.opts.representation ?? "json";
      const res = await this.opts.client.stream({
        method: "GET",
        path: this.opts.path,
        accept: representation === "metadata" ? ACCEPT.metadataWatch : ACCEPT[representation],
        query: {
          watch: 1,
          resourceVersion: this.resourceVersion,
          allowWatchBookmarks: true,
          timeoutSeconds,
          fieldSelector: this.opts.fieldSelector,
          labelSelector: this.opts.labelSelector,
          ...(this.opts.representation === "table" ? { includeObject: "Metadata" } : {}),
        },
        signal,
      });
      // Connected again: readiness must not wait for this watch to end (5-10 minutes). The
      // backoff starts over only when it ends normally or a list succeeds, so a watch that the
      // server accepts and then fails at once still backs off.
      const openedAt = performance.now();
      this.setHealthy(true);
      // Events are newline-delimited JSON; a chunk can hold many events or part of one, and can
      // end inside a multi-byte character: bytes are decoded a whole line at a time.
      const lines = new LineSplitter();
      let events = 0;
      for await (const chunk of res.body) {
        feed();
        for (const line of lines.push(chunk)) {
          events++;
          this.onEvent(this.decode(line));
        }
      }
      // As client-go does: a watch that ends at once with nothing in it is an error (backed off),
      // not a normal end (which would reconnect at once, in a loop).
      if (events === 0 && performance.now() - openedAt < 1_000) throw new Error("the API server closed the watch at once, with no events");
    } catch (err) {
      if (abort.signal.aborted && !outer.aborted) {
        this.opts.log.warn({ reflector: this.opts.name }, "watch silent past its timeout, restarting");
        return;
      }
      throw err;
    } finally {
      clearTimeout(watchdog);
    }
  }

  /** A watch event from its line; the deferred member, when there is one to cut, unparsed. */
  private decode(line: Buffer): WatchEvent {
    const d = this.deferred;
    const cut = d && line.length >= d.minBytes ? cutMember(line, d.path) : undefined;
    if (!d || !cut || cut.value.length < d.minBytes) return JSON.parse(line.toString("utf8")) as WatchEvent;
    const event = JSON.parse(cut.rest.toString("utf8")) as WatchEvent;
    (event.object as RawItem)[DEFERRED] = cut.value;
    return event;
  }

  private onEvent(event: WatchEvent): void {
    if (event.type === "ERROR") {
      const status = event.object as { code?: number; message?: string; reason?: string };
      if (status.code === 410) throw new GoneError(status.message ?? "resource version too old");
      throw new ApiError(status.code ?? 500, status.reason ?? "", status.message ?? "watch error");
    }
    const meta = (event.object.metadata ?? {}) as ObjectMeta;
    if (event.type === "BOOKMARK") {
      if (meta.resourceVersion) this.resourceVersion = meta.resourceVersion;
      return;
    }
    const item = this.itemOf(event);
    if (!item) return;
    const rv = item.metadata.resourceVersion;
    const obj = this.opts.transform(item);
    delete item[DEFERRED];
    const key = objectKey(item.metadata);
    if (this.opts.keep === false) {
      // Nothing kept, so no old object: an update carries the new one twice.
      if (obj && event.type === "DELETED") this.opts.handler.delete(obj);
      else if (obj && event.type === "MODIFIED") this.opts.handler.update(obj, obj);
      else if (obj) this.opts.handler.add(obj);
      if (rv) this.resourceVersion = rv;
      return;
    }
    const old = this.store.get(key);
    if (event.type === "DELETED" || !obj) {
      if (old) {
        this.store.delete(key);
        this.opts.handler.delete(obj ?? old);
      }
    } else {
      this.store.set(key, obj);
      if (old) this.opts.handler.update(old, obj);
      else this.opts.handler.add(obj);
    }
    if (rv) this.resourceVersion = rv;
  }
}

/** One row of a Table answer (`as=Table`, `includeObject=Metadata`). */
export interface TableRow {
  cells?: unknown[];
  object?: { metadata?: ObjectMeta };
}

/** A Table row as `transform` receives it: the row's metadata and its cells by column name. */
export function rowItem(columns: readonly string[], row: TableRow): RawItem {
  const cells: Record<string, unknown> = {};
  columns.forEach((name, i) => (cells[name] = row.cells?.[i]));
  return { metadata: row.object?.metadata ?? ({} as ObjectMeta), cells };
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * The next page's item limit from the last page's weight: the item count that would have made
 * it weigh `target` bytes, at most twice the last limit (so a mistaken estimate costs little),
 * between 1 and `max`.
 */
export function nextPageLimit(limit: number, items: number, bytes: number, target: number, max: number): number {
  const perItem = bytes / items;
  const fit = perItem > 0 ? Math.floor(target / perItem) : max;
  return Math.max(1, Math.min(max, 2 * limit, fit));
}
