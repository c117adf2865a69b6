// The manager (controller-runtime's): runs an operator's parts in ordered groups and stops them
// in the reverse order, each step bounded. Start: servers (probes answer at once) -> caches
// (started, then synced) -> what runs on every replica -> leader election -> the leader's
// runnables when this replica leads. Stop: stopping (readiness off) -> the leader's runnables
// and every replica's workers drain, side by side -> after-drain hooks (while the Lease is still
// held: nobody else sends meanwhile) -> release the Lease -> caches -> closers (clients) ->
// servers. Generic: knows nothing of webhooks.
import type { Logger } from "pino";

/** A part that runs from start to stop. */
export interface Runnable {
  readonly name: string;
  start(): void | Promise<void>;
  stop(): void | Promise<void>;
}

/** A cache: started, then waited for until synced, before anything leads. */
export interface CacheRunnable extends Runnable {
  waitForSync(signal?: AbortSignal): Promise<unknown>;
}

/** What runs only while this replica leads; `stop` may take `graceMs` to finish work in flight. */
export interface LeaderRunnable {
  readonly name: string;
  start(): void;
  stop(graceMs: number): Promise<void>;
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
  /** How long the leader's runnables may take to finish in-flight work when stopping. */
  drainMs: number;
  /** The bound of each later shutdown step (after-drain hooks, caches, closers, servers). */
  stepTimeoutMs?: number;
  /** Creates the leader elector; undefined: this replica leads from the start (no election). */
  elector?: (callbacks: LeaderCallbacks) => Elector;
  /** The caches are synced (before leader election starts). */
  onSynced?: () => void;
  /** The shutdown begins (before the leader's runnables stop). */
  onStopping?: () => void;
}

export class Manager {
  private readonly servers: Runnable[] = [];
  private readonly caches: CacheRunnable[] = [];
  private readonly afterSync: Runnable[] = [];
  private readonly leaderRunnables: LeaderRunnable[] = [];
  private readonly workers: LeaderRunnable[] = [];
  private workersStarted = false;
  private readonly afterDrainHooks: Array<() => Promise<void>> = [];
  private readonly closers: Array<() => Promise<void>> = [];
  private elector: Elector | undefined;
  private leadingNow = false;
  private stoppingNow = false;
  private stopped: Promise<void> | undefined;

  constructor(private readonly o: ManagerOptions) {}

  addServer(r: Runnable): void {
    this.servers.push(r);
  }

  addCache(r: CacheRunnable): void {
    this.caches.push(r);
  }

  /** Starts once the caches are synced (a server that answers from them); stopped with the servers. */
  addAfterSync(r: Runnable): void {
    this.afterSync.push(r);
  }

  addLeaderRunnable(r: LeaderRunnable): void {
    this.leaderRunnables.push(r);
  }

  /**
   * Work every replica does, leader or not (stream mode's consumers): started once the caches
   * are synced, and drained with the leader's runnables, with the same grace.
   */
  addWorker(r: LeaderRunnable): void {
    this.workers.push(r);
  }

  /** Runs after the leader's runnables drained, before the Lease is released. */
  afterDrain(hook: () => Promise<void>): void {
    this.afterDrainHooks.push(hook);
  }

  /** Runs after the caches stopped (close clients and agents). */
  addCloser(close: () => Promise<void>): void {
    this.closers.push(close);
  }

  get leading(): boolean {
    return this.leadingNow;
  }

  /** Set from the first moment of a shutdown (readiness is off from then). */
  get stopping(): boolean {
    return this.stoppingNow;
  }

  /** Starts the servers, then the caches (waiting until synced), then leader election. */
  async start(): Promise<void> {
    for (const s of this.servers) await s.start();
    for (const c of this.caches) await c.start();
    await Promise.all(this.caches.map((c) => c.waitForSync()));
    this.o.onSynced?.();
    for (const r of this.afterSync) await r.start();
    if (this.stoppingNow) return;
    this.workersStarted = true;
    for (const w of this.workers) w.start();
    if (this.o.elector) {
      this.elector = this.o.elector({ onStartedLeading: () => this.startLeading(), onStoppedLeading: () => void this.stopLeading(0) });
      this.elector.start();
    } else this.startLeading();
  }

  private startLeading(): void {
    if (this.leadingNow || this.stoppingNow) return;
    this.leadingNow = true;
    for (const r of this.leaderRunnables) r.start();
  }

  /** Ends this leadership term: `graceMs` lets in-flight work finish before it is interrupted. */
  private async stopLeading(graceMs: number): Promise<void> {
    if (!this.leadingNow) return;
    this.leadingNow = false;
    await Promise.all(this.leaderRunnables.map((r) => r.stop(graceMs)));
  }

  /** Graceful shutdown, once; resolves when everything is closed. */
  stop(): Promise<void> {
    this.stopped ??= this.doStop();
    return this.stopped;
  }

  private async doStop(): Promise<void> {
    this.stoppingNow = true;
    this.o.onStopping?.();
    // The Lease is kept (and renewed) while draining, so no one else does this work meanwhile.
    const workers = this.workersStarted ? this.workers : [];
    await Promise.all([this.stopLeading(this.o.drainMs), ...workers.map((w) => w.stop(this.o.drainMs))]);
    for (const hook of this.afterDrainHooks) await this.step("after drain", hook);
    // Now that nothing is in flight, hand the Lease over.
    if (this.elector) await this.step("leader election", () => this.elector!.stop(true));
    await this.step("caches", () => Promise.all(this.caches.map(async (c) => c.stop())));
    for (const close of this.closers) await this.step("closer", close);
    await this.step("servers", () => Promise.all([...this.servers, ...this.afterSync].map(async (s) => s.stop())));
  }

  /** One shutdown step, bounded: a step that hangs is logged and left behind, the rest still run. */
  private async step(name: string, run: () => Promise<unknown>): Promise<void> {
    const ms = this.o.stepTimeoutMs ?? 10_000;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), ms)));
    try {
      const r = await Promise.race([run().then(() => "done" as const), timedOut]);
      if (r === "timeout") this.o.log.warn({ step: name, timeoutMs: ms }, "shutdown step did not finish in time; going on");
    } catch (err) {
      this.o.log.warn({ step: name, err: (err as Error).message }, "shutdown step failed; going on");
    } finally {
      clearTimeout(timer);
    }
  }
}
