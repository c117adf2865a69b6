// The manager (controller-runtime's): runs an operator's parts in ordered groups and stops them
// in the reverse order, within one shutdown deadline, and answers readiness from them. Generic:
// knows nothing of webhooks.
//
// Start: servers (probes answer at once) -> caches (started, then synced) -> after-sync parts ->
// workers (every replica) -> leader election -> the leader's parts while this replica leads.
// Stop: stopping (readiness off) -> the leader's parts and the workers drain side by side, for
// up to drainMs -> after-drain parts (while the Lease is still held: nobody else sends
// meanwhile) -> the Lease released -> caches -> closers (clients) -> servers. Everything after
// the drain shares one budget (afterDrainMs): the pod's grace period is the drain plus that
// margin, and a step that hangs is left behind so the process still exits in time.
import type { Logger } from "pino";

/** The groups a part can be in, in start order. */
export type Group = "server" | "cache" | "after-sync" | "worker" | "leader" | "after-drain" | "closer";

/** One part of the operator. Only what its group uses is called. */
export interface Part {
  readonly name: string;
  /** server, cache, after-sync: once at start; worker, leader: when it begins (leader: each term). */
  start?(): void | Promise<void>;
  /**
   * worker, leader: may take `graceMs` to finish work in flight. after-drain: runs after the
   * drain. Everything else: called when its group stops.
   */
  stop?(graceMs: number): void | Promise<void>;
  /** cache: resolves once synced; nothing is led before every cache is. */
  waitForSync?(signal?: AbortSignal): Promise<unknown>;
  /** Why this part keeps the replica from being ready; undefined when it does not. */
  notReady?(): string | undefined;
}

/** A part that runs while this replica leads (or, as a worker, on every replica), drained on stop. */
export interface LeaderRunnable extends Part {
  start(): void;
  stop(graceMs: number): Promise<void>;
}

/** A part with a start and a stop (a server). */
export interface Runnable extends Part {
  start(): void | Promise<void>;
  stop(): void | Promise<void>;
}

export interface Elector {
  start(): void;
  /** Stops renewing; `release` hands the Lease over at once. */
  stop(release: boolean): Promise<void>;
}

export interface LeaderCallbacks {
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
}

export interface ManagerOptions {
  log: Logger;
  /** How long the leader's parts and the workers may take to finish in-flight work when stopping. */
  drainMs: number;
  /**
   * What every step after the drain shares (after-drain parts, the Lease, caches, closers,
   * servers). The chart's grace period is drainMs plus a margin just above this.
   */
  afterDrainMs?: number;
  /** Creates the leader elector; undefined: this replica leads from the start (no election). */
  elector?: (callbacks: LeaderCallbacks) => Elector;
  /** The caches are synced (before leader election starts). */
  onSynced?: () => void;
  /** The shutdown begins (before the leader's parts stop). */
  onStopping?: () => void;
  now?: () => number;
}

/** The default budget of everything after the drain: under the chart's 5 s margin. */
export const AFTER_DRAIN_MS = 4_000;

export class Manager {
  private readonly parts = new Map<Group, Part[]>();
  private workersStarted = false;
  private synced = false;
  private elector: Elector | undefined;
  private leadingNow = false;
  private stoppingNow = false;
  private stopped: Promise<void> | undefined;
  private readonly now: () => number;

  constructor(private readonly o: ManagerOptions) {
    this.now = o.now ?? Date.now;
  }

  /** Adds a part to its group; parts of a group start in the order they were added. */
  add(part: Part, opts: { group: Group }): void {
    const list = this.parts.get(opts.group) ?? [];
    list.push(part);
    this.parts.set(opts.group, list);
  }

  private group(g: Group): Part[] {
    return this.parts.get(g) ?? [];
  }

  get leading(): boolean {
    return this.leadingNow;
  }

  /** Set from the first moment of a shutdown (readiness is off from then). */
  get stopping(): boolean {
    return this.stoppingNow;
  }

  /** Ready: not stopping, every cache synced, and no part saying why not. */
  ready(): { ready: boolean; reason?: string } {
    if (this.stoppingNow) return { ready: false, reason: "shutting down" };
    if (!this.synced) return { ready: false, reason: "caches not synced" };
    for (const parts of this.parts.values()) {
      for (const p of parts) {
        const reason = p.notReady?.();
        if (reason) return { ready: false, reason };
      }
    }
    return { ready: true };
  }

  /** Starts the servers, then the caches (waiting until synced), then leader election. */
  async start(): Promise<void> {
    for (const s of this.group("server")) await s.start?.();
    for (const c of this.group("cache")) await c.start?.();
    await Promise.all(this.group("cache").map(async (c) => c.waitForSync?.()));
    this.synced = true;
    this.o.onSynced?.();
    for (const r of this.group("after-sync")) await r.start?.();
    if (this.stoppingNow) return;
    this.workersStarted = true;
    for (const w of this.group("worker")) await w.start?.();
    if (this.o.elector) {
      this.elector = this.o.elector({ onStartedLeading: () => this.startLeading(), onStoppedLeading: () => void this.stopLeading(0) });
      this.elector.start();
    } else this.startLeading();
  }

  private startLeading(): void {
    if (this.leadingNow || this.stoppingNow) return;
    this.leadingNow = true;
    for (const r of this.group("leader")) void r.start?.();
  }

  /** Ends this leadership term: `graceMs` lets in-flight work finish before it is interrupted. */
  private async stopLeading(graceMs: number): Promise<void> {
    if (!this.leadingNow) return;
    this.leadingNow = false;
    await Promise.all(this.group("leader").map(async (r) => r.stop?.(graceMs)));
  }

  /** Graceful shutdown, once; resolves when everything is closed or the deadline passed. */
  stop(): Promise<void> {
    this.stopped ??= this.doStop();
    return this.stopped;
  }

  private async doStop(): Promise<void> {
    this.stoppingNow = true;
    this.o.onStopping?.();
    // The Lease is kept (and renewed) while draining, so no one else does this work meanwhile.
    const workers = this.workersStarted ? this.group("worker") : [];
    await Promise.all([this.stopLeading(this.o.drainMs), ...workers.map(async (w) => w.stop?.(this.o.drainMs))]);
    const drained = this.now();
    const deadline = drained + (this.o.afterDrainMs ?? AFTER_DRAIN_MS);
    const took: Record<string, number> = {};
    const step = async (name: string, run: () => Promise<unknown>) => {
      const t0 = this.now();
      await this.step(name, run, deadline);
      took[name] = this.now() - t0;
    };
    for (const p of this.group("after-drain")) await step(p.name, async () => p.stop?.(0));
    // Now that nothing is in flight, hand the Lease over.
    if (this.elector) await step("leader election", () => this.elector!.stop(true));
    await step("caches", () => Promise.all(this.group("cache").map(async (c) => c.stop?.(0))));
    for (const p of this.group("closer")) await step(p.name, async () => p.stop?.(0));
    await step("servers", () => Promise.all([...this.group("server"), ...this.group("after-sync")].map(async (s) => s.stop?.(0))));
    this.o.log.info({ afterDrainMs: this.now() - drained, budgetMs: deadline - drained, steps: took }, "shutdown steps after the drain");
  }

  /** One shutdown step, bounded by what is left of the deadline: a step that hangs is logged and left behind. */
  private async step(name: string, run: () => Promise<unknown>, deadline: number): Promise<void> {
    const ms = Math.max(0, deadline - this.now());
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), ms)));
    try {
      const r = await Promise.race([run().then(() => "done" as const), timedOut]);
      if (r === "timeout") this.o.log.warn({ step: name, leftMs: ms }, "shutdown step did not finish before the shutdown deadline; going on");
    } catch (err) {
      this.o.log.warn({ step: name, err: (err as Error).message }, "shutdown step failed; going on");
    } finally {
      clearTimeout(timer);
    }
  }
}
