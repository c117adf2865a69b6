// What runs while this replica leads: the delivery and subscription controllers (new work
// queues each term), every known key queued once at the start, the replays resumed, the
// finished deliveries swept, and the queue-depth gauge. A standby keeps its caches warm and
// runs none of it. Stopping a term drains: in-flight attempts get the grace to finish, then
// are interrupted (recorded so the next leader resumes them at once).
import type { Logger } from "pino";
import type { Metrics } from "../observability/metrics.js";
import { Controller, type Reconciler } from "../runtime/controller.js";
import type { Expectations } from "../runtime/expectations.js";
import type { LeaderRunnable } from "../runtime/manager.js";
import { WorkQueue } from "../runtime/queue.js";
import type { Caches } from "./caches.js";
import type { Queues } from "./handlers.js";
import { namespaceOfKey, objectKey } from "../kube/types.js";

export interface LeaderTermDeps {
  caches: Caches;
  deliveryKeys: Reconciler;
  subscriptions: Reconciler;
  /** WebhookReplay keys (replay-objects.ts). */
  replays?: Reconciler;
  /** Finished deliveries with a replay annotation (the new leader handles them). */
  replayRequests: () => Iterable<string>;
  /** Called as a term starts (replays may run again; retention and sweeps resume). */
  onStart: () => void;
  /** Stops what the term's replays run, within the grace. */
  stopReplays: (graceMs: number) => Promise<void>;
  /** Requests in flight now (to count what a drain interrupted). */
  inFlight: () => number;
  deliveryExpectations: Expectations;
  metrics: Metrics;
  log: Logger;
  /** Delivery workers: one per request slot, plus headroom for reconciles that only write status. */
  deliveryWorkers: number;
}

/** How the last term's stop went: the drain report. */
export interface DrainReport {
  finishedInGrace: boolean;
  /** Requests in flight when the stop began. */
  inFlight: number;
  /** Requests still in flight when the grace ended (interrupted). */
  interrupted: number;
}

export class LeaderTerm implements LeaderRunnable, Queues {
  readonly name = "delivery controllers";
  private deliveries: Controller<string> | undefined;
  private subscriptions: Controller<string> | undefined;
  private replays: Controller<string> | undefined;
  private depthTimer: NodeJS.Timeout | undefined;
  /** The last stop's report. */
  lastDrain: DrainReport = { finishedInGrace: true, inFlight: 0, interrupted: 0 };

  constructor(private readonly d: LeaderTermDeps) {}

  get leading(): boolean {
    return this.deliveries !== undefined;
  }

  addDelivery(key: string): void {
    this.deliveries?.queue.add(key);
  }

  addReplay(key: string): void {
    this.replays?.queue.add(key);
  }

  addSubscription(key: string, afterMs?: number): void {
    if (afterMs === undefined) this.subscriptions?.queue.add(key);
    else this.subscriptions?.queue.addAfter(key, afterMs);
  }

  start(): void {
    if (this.deliveries) return;
    const { log, metrics } = this.d;
    // The queues serve namespaces in turns, and share their workers between them: one
    // namespace's flood of keys, or its slow reconciles, do not hold up another's.
    const queue = (workers: number) => new WorkQueue<string>({ tenantOf: namespaceOfKey, workers });
    const deliveries = new Controller<string>({ name: "delivery", queue: queue(this.d.deliveryWorkers), reconciler: this.d.deliveryKeys, workers: this.d.deliveryWorkers, log, metrics });
    const subscriptions = new Controller<string>({ name: "subscription", queue: queue(4), reconciler: this.d.subscriptions, workers: 4, log, metrics });
    const replays = this.d.replays ? new Controller<string>({ name: "replay", queue: queue(2), reconciler: this.d.replays, workers: 2, log, metrics }) : undefined;
    this.deliveries = deliveries;
    this.subscriptions = subscriptions;
    this.replays = replays;
    metrics.setLeading(true);
    this.d.onStart();
    for (const d of this.d.caches.deliveries.values()) deliveries.queue.add(objectKey(d.metadata));
    for (const key of this.d.replayRequests()) deliveries.queue.add(key);
    for (const s of this.d.caches.subscriptions.values()) subscriptions.queue.add(objectKey(s.metadata));
    for (const r of this.d.caches.replays.values()) replays?.queue.add(objectKey(r.metadata));
    deliveries.start();
    subscriptions.start();
    replays?.start();
    this.depthTimer = setInterval(() => {
      metrics.queueDepth.set({ controller: "delivery" }, deliveries.queue.length);
      metrics.queueDepth.set({ controller: "subscription" }, subscriptions.queue.length);
    }, 1_000);
    this.depthTimer.unref();
  }

  async stop(graceMs: number): Promise<void> {
    const deliveries = this.deliveries;
    const subscriptions = this.subscriptions;
    if (!deliveries || !subscriptions) return;
    const replays = this.replays;
    this.deliveries = undefined;
    this.subscriptions = undefined;
    this.replays = undefined;
    // The per-subscription gauges go at once (a standby's would double `sum by` and keep alerts
    // firing); what finishes while draining no longer sets them. The new leader exports them.
    this.d.metrics.setLeading(false);
    clearInterval(this.depthTimer);
    const inFlight = this.d.inFlight();
    let interrupted = 0;
    const [stopped] = await Promise.all([
      deliveries.stop(graceMs, () => (interrupted = this.d.inFlight())),
      subscriptions.stop(graceMs),
      replays?.stop(graceMs),
      this.d.stopReplays(graceMs),
    ]);
    this.d.deliveryExpectations.clear();
    this.lastDrain = { finishedInGrace: stopped.finishedInGrace, inFlight, interrupted };
  }
}
