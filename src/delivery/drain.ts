// How a drain (SIGTERM) is reported, as the DLQ and drain specification names it: the line
// `webhook_deliveries_drained` when every in-flight delivery finished in time; otherwise
// `webhook_drain_timeout` and then, once the interrupted attempts are recorded,
// `webhook_drain_flushed_to_dlq` with how many were requeued and dead-lettered
// (WEBHOOK_DRAIN_TIMEOUT_ACTION). Plus webhook_drain_total{result}.
import type { Logger } from "pino";
import type { Metrics } from "../observability/metrics.js";
import type { Part } from "../runtime/manager.js";
import type { DrainReport } from "./leader-term.js";

export interface DrainLogDeps {
  log: Logger;
  metrics: Metrics;
  timeoutMs: number;
  action: "requeue" | "dead-letter";
  now?: () => number;
}

export class DrainLog {
  private startedAt = 0;
  private readonly now: () => number;

  constructor(private readonly d: DrainLogDeps) {
    this.now = d.now ?? Date.now;
  }

  /** The shutdown began: readiness is off, no new attempt starts. */
  started(inFlight: number): void {
    this.startedAt = this.now();
    this.d.log.info({ inFlight, drainTimeoutMs: this.d.timeoutMs }, "shutdown: not ready, no new attempts, draining in-flight deliveries");
  }

  /** The leader's work stopped: either everything finished, or the timeout interrupted the rest. */
  drained(r: DrainReport): void {
    if (r.finishedInGrace) {
      this.d.metrics.drain.inc({ result: "drained" });
      this.d.log.info({ msg: "webhook_deliveries_drained", drained: r.inFlight, durationMs: this.now() - this.startedAt });
    } else {
      this.d.metrics.drain.inc({ result: "timeout" });
      this.d.log.warn({ msg: "webhook_drain_timeout", inFlightAtStart: r.inFlight, interrupted: r.interrupted, drainTimeoutMs: this.d.timeoutMs, action: this.d.action });
    }
  }

  /** After the timeout path: the interrupted attempts are recorded (and rollups written). */
  flushed(r: DrainReport): void {
    if (r.finishedInGrace) return;
    const deadLettered = this.d.action === "dead-letter" ? r.interrupted : 0;
    this.d.log.warn({ msg: "webhook_drain_flushed_to_dlq", requeued: r.interrupted - deadLettered, deadLettered, durationMs: this.now() - this.startedAt });
  }

  stopped(): void {
    this.d.log.info({ durationMs: this.now() - this.startedAt }, "stopped");
  }
}

/** The drains of one shutdown (the leader's controllers, stream mode's consumers) as one report. */
export function combineDrains(reports: readonly DrainReport[]): DrainReport {
  return {
    finishedInGrace: reports.every((r) => r.finishedInGrace),
    inFlight: reports.reduce((n, r) => n + r.inFlight, 0),
    interrupted: reports.reduce((n, r) => n + r.interrupted, 0),
  };
}

/**
 * The after-drain part: reports how the drain went, lets the last writes out (`flushes`, in
 * order: the final rollups, then Events), then reports what the timeout path recorded.
 */
export function drainReportPart(drainLog: DrainLog, reports: () => DrainReport[], flushes: ReadonlyArray<() => Promise<unknown>>): Part {
  return {
    name: "drain report",
    stop: async () => {
      const report = combineDrains(reports());
      drainLog.drained(report);
      for (const flush of flushes) await flush();
      drainLog.flushed(report);
    },
  };
}
