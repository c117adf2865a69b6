// The reconcile loop: workers take keys from the queue and call one method. The Result decides
// what happens next, in one switch (controller-runtime's reconcileHandler):
//   return {}                    done; forget failures
//   return { requeueAfter: ms }  run again later (waiting costs no API write)
//   throw TerminalError          give up on this key; log it
//   throw anything else          retry with per-key exponential backoff
// Each reconcile has an id (controller-runtime's reconcileID) and a child logger that carries it
// with the controller and the key, so every line one reconcile writes can be found together.
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { WorkQueue } from "./queue.js";
import { sharedAbortController } from "./shared-abort.js";

export interface Result {
  requeueAfter?: number;
}

/** What a reconcile is given besides its key and signal. */
export interface ReconcileContext {
  /** This reconcile's id: the same on every line it logs. */
  id: string;
  /** The controller's logger with {controller, key, reconcileID} bound. */
  log: Logger;
}

export interface Reconciler<K = string> {
  reconcile(key: K, signal: AbortSignal, ctx: ReconcileContext): Promise<Result | void>;
}

export class TerminalError extends Error {
  override name = "TerminalError";
}

export interface ControllerMetrics {
  reconciled(controller: string, result: "success" | "requeue" | "error" | "terminal", seconds: number): void;
}

export interface ControllerOptions<K> {
  name: string;
  queue: WorkQueue<K>;
  reconciler: Reconciler<K>;
  workers: number;
  log: Logger;
  metrics?: ControllerMetrics;
}

export class Controller<K = string> {
  private workers: Promise<void>[] = [];
  private abort = sharedAbortController();
  private active = 0;

  constructor(private readonly opts: ControllerOptions<K>) {}

  get queue(): WorkQueue<K> {
    return this.opts.queue;
  }

  /** Reconciles running right now. */
  get busy(): number {
    return this.active;
  }

  start(): void {
    if (this.workers.length) return;
    this.abort = sharedAbortController();
    for (let i = 0; i < this.opts.workers; i++) this.workers.push(this.work());
  }

  /**
   * Stops taking keys and waits for running reconciles. After `graceMs` their signal is aborted
   * (an attempt in flight records itself as interrupted), and we wait for them to finish that.
   */
  async stop(graceMs = 0, beforeAbort?: () => void): Promise<{ finishedInGrace: boolean }> {
    this.opts.queue.shutdown();
    const all = Promise.all(this.workers);
    let finishedInGrace = true;
    if (graceMs > 0) {
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        all.then(() => false),
        new Promise<boolean>((r) => (timer = setTimeout(() => r(true), graceMs))),
      ]);
      clearTimeout(timer);
      finishedInGrace = !timedOut;
    } else finishedInGrace = this.active === 0;
    if (!finishedInGrace) beforeAbort?.();
    this.abort.abort(new Error("controller stopping"));
    await all;
    this.workers = [];
    return { finishedInGrace };
  }

  private async work(): Promise<void> {
    const { queue, reconciler, log, name } = this.opts;
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      this.active++;
      const started = performance.now();
      let outcome: "success" | "requeue" | "error" | "terminal" = "success";
      const id = randomUUID();
      const rlog = log.child({ controller: name, key: String(key), reconcileID: id });
      try {
        const result = await reconciler.reconcile(key, this.abort.signal, { id, log: rlog });
        queue.forget(key);
        if (result?.requeueAfter !== undefined) {
          outcome = "requeue";
          queue.addAfter(key, Math.max(0, result.requeueAfter));
        }
      } catch (err) {
        if (err instanceof TerminalError) {
          outcome = "terminal";
          queue.forget(key);
          rlog.error({ err: err.message }, "reconcile failed for good");
        } else {
          outcome = "error";
          const retryInMs = queue.addRateLimited(key);
          rlog.warn({ err: err instanceof Error ? err.message : String(err), retryInMs }, "reconcile failed, retrying");
        }
      } finally {
        this.active--;
        queue.done(key);
        this.opts.metrics?.reconciled(name, outcome, (performance.now() - started) / 1000);
      }
    }
  }
}
