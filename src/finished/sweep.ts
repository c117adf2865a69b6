// The leader's periodic sweep of Succeeded and Discarded deliveries: a paginated list of Table
// rows with metadata-only objects (no payload), each row handed on (retention, storage budget).
// It runs once per sweep window, soon after a leader takes over, and at once when asked (the
// storage budget needs the next oldest).
import type { Logger } from "pino";
import { ACCEPT, type KubeClient } from "../kube/client.js";
import { rowItem, type RawItem, type TableRow } from "../kube/reflector.js";
import { collectionPath } from "../kube/types.js";
import { DELIVERIES } from "../delivery/objects.js";

const SWEEP_PAGE_SIZE = 200;

interface TablePage {
  metadata?: { continue?: string };
  rows?: TableRow[];
  columnDefinitions?: Array<{ name: string }>;
}

export interface SweepDeps {
  client: KubeClient;
  /** Watched namespaces ("" = all). */
  namespaces: string[];
  fieldSelector: string;
  isLeader: () => boolean;
  log: Logger;
  /** How long until the next sweep (the retention's sweep window). */
  windowMs: () => number;
  /** One sweep's visitor: `row` per delivery listed; `done(complete)` when it ends. */
  visit: () => { row(item: RawItem): boolean; done(complete: boolean): Record<string, unknown> };
  now: () => number;
}

export class Sweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /** A sweep was asked for while one ran: the next starts at once. */
  private again = false;

  constructor(private readonly d: SweepDeps) {}

  /** A sweep as soon as possible. */
  soon(): void {
    if (this.running) this.again = true;
    else this.schedule(0);
  }

  /** Arms the next sweep (leader only): in `inMs`, or after the window unless one is armed. */
  schedule(inMs?: number): void {
    if (!this.d.isLeader()) return;
    if (this.timer && inMs === undefined) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.running = this.sweep().finally(() => {
        this.running = undefined;
        const again = this.again;
        this.again = false;
        this.schedule(again ? 0 : this.d.windowMs());
      });
    }, inMs ?? this.d.windowMs());
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private async sweep(): Promise<void> {
    if (!this.d.isLeader()) return;
    const started = this.d.now();
    const visitor = this.d.visit();
    let seen = 0;
    let complete = true;
    for (const ns of this.d.namespaces.length ? this.d.namespaces : [""]) {
      try {
        const finished = await this.sweepNamespace(ns, (item) => visitor.row(item) && ++seen > 0);
        complete &&= finished;
      } catch (err) {
        complete = false;
        this.d.log.warn({ err: (err as Error).message }, "sweep of finished deliveries failed; the next one retries");
      }
    }
    const detail = visitor.done(complete);
    this.d.log.info({ seen, ...detail, durationMs: this.d.now() - started, nextInMs: this.d.windowMs() }, "swept finished deliveries");
  }

  /** True when every page was listed (false: leadership ended in between). */
  private async sweepNamespace(ns: string, row: (item: RawItem) => unknown): Promise<boolean> {
    let continueToken: string | undefined;
    do {
      const page = await this.d.client.request<TablePage>({
        method: "GET",
        path: collectionPath(DELIVERIES, ns || undefined),
        accept: ACCEPT.table,
        query: { limit: SWEEP_PAGE_SIZE, continue: continueToken, fieldSelector: this.d.fieldSelector, includeObject: "Metadata" },
        timeoutMs: 60_000,
      });
      const columns = (page.columnDefinitions ?? []).map((c) => c.name);
      for (const r of page.rows ?? []) row(rowItem(columns, r));
      continueToken = page.metadata?.continue || undefined;
    } while (continueToken && this.d.isLeader());
    return !continueToken;
  }
}
