// What a delivery that waits tells the user, in its Succeeded condition (status Unknown): for
// something the user must fix (subscription missing or invalid, Secret missing, paused, backlog
// full), with an Event, once per reason; when it is due but held by its endpoint (breaker,
// health, a Retry-After hold, slots, rate limit), once per reason as core/attempt/waiting.ts decides; or
// when it is not its turn in its ordering lane (OrderingWait, OrderingBlocked), once per reason.
// A missing Secret is not watched, so that wait is looked at again with a backoff. It also says
// when a held delivery counts as one held attempt (webhook_delivery_held_total).
//
// These writes are informational (the delivery waits the same without them), and they come in
// bursts exactly when the API server is busiest: pausing, or releasing, a subscription with
// thousands of deliveries would otherwise cost a status write (and an Event) for each, competing
// with the outcomes. So each subscription gets a budget of them (WAIT_REPORT_BUDGET); one that
// is over it gets a later slot and is reconciled again then (if it still waits, it reports:
// every waiting delivery shows why, eventually, at a bounded write rate).
import type { Logger } from "pino";
import { conditionDiffers, getCondition } from "../../core/conditions.js";
import { SUCCEEDED, waiting } from "../../core/attempt/outcome.js";
import type { Action } from "../../core/attempt/plan.js";
import type { Policy } from "../../core/attempt/policy.js";
import { fromRfc3339 } from "../../core/rfc3339.js";
import { reserve } from "../../core/report-budget.js";
import type { RateLimit } from "../../core/endpoint/token-bucket.js";
import { endpointWait } from "../../core/attempt/waiting.js";
import type { EventSink } from "../../kube/events.js";
import type { Result } from "../../runtime/controller.js";
import type { Endpoint } from "../../delivery/engine/endpoints.js";
import { deliveryRef, type DeliveryObject } from "../../delivery/objects.js";
import { stampLane, type LaneRef } from "../../delivery/ordering-lanes.js";
import type { OutcomeWriter } from "../../delivery/outcome-writer.js";
import { doubling } from "../../lib/backoff.js";

/** A missing Secret is not watched: look again after 1 s, 2 s, 4 s ... up to 30 s. */
const SECRET_RECHECK = { initialMs: 1_000, maxMs: 30_000 };

/** Wait-condition writes per subscription: 20 at once, then 5 a second. */
export const WAIT_REPORT_BUDGET: RateLimit = { perSecond: 5, burst: 20 };

export interface WaitReportsDeps {
  outcomes: Pick<OutcomeWriter, "write">;
  events: EventSink;
  log: Logger;
  now?: () => number;
}

export class WaitReports {
  /** Consecutive Secret rechecks per delivery key, for the recheck backoff. */
  private readonly secretWaits = new Map<string, number>();
  /** The wait-report budget of each subscription (its next slot: core/report-budget.ts). */
  private readonly budgets = new Map<string, number>();
  /** Deliveries whose report was put off, and the slot each holds. */
  private readonly reserved = new Map<string, number>();
  /** The endpoint hold each delivery was last counted as held by (once per hold). */
  private readonly heldBy = new Map<string, string>();
  private readonly now: () => number;

  constructor(private readonly d: WaitReportsDeps) {
    this.now = d.now ?? Date.now;
  }

  /** The delivery was attempted, or left: its recheck backoff starts over. */
  forget(key: string): void {
    this.secretWaits.delete(key);
    this.reserved.delete(key);
    this.heldBy.delete(key);
  }

  /**
   * A due delivery held by its endpoint is one held attempt: an Open breaker under whenOpen
   * Defer (circuit_open), a Retry-After hold (retry_after). The reason to count, once per
   * delivery per hold however often it is looked at meanwhile; undefined otherwise.
   */
  held(action: Action, key: string, ep: Endpoint): "circuit_open" | "retry_after" | undefined {
    let reason: "circuit_open" | "retry_after";
    let hold: string;
    if ((action.type === "WaitUntil" && action.why === "breaker") || (action.type === "Park" && action.why === "probe")) {
      reason = "circuit_open";
      hold = `${reason}:${ep.breaker.openedAt ?? 0}`;
    } else if (action.type === "WaitUntil" && action.why === "throttled") {
      reason = "retry_after";
      hold = `${reason}:${ep.throttle?.since ?? 0}`;
    } else return undefined;
    if (this.heldBy.get(key) === hold) return undefined;
    this.heldBy.set(key, hold);
    return reason;
  }

  /**
   * 0: the delivery may write its wait report now; otherwise how long until its reserved slot in
   * its subscription's budget (it keeps that slot: coming back then, it goes).
   */
  private slot(subKey: string, key: string): number {
    const now = this.now();
    const reserved = this.reserved.get(key);
    if (reserved !== undefined) {
      if (reserved > now) return reserved - now;
      this.reserved.delete(key);
      return 0;
    }
    const r = reserve(this.budgets.get(subKey), now, WAIT_REPORT_BUDGET);
    this.budgets.set(subKey, r.tat);
    if (this.budgets.size > 10_000) for (const [k, tat] of this.budgets) if (tat < now) this.budgets.delete(k);
    if (r.delayMs > 0) this.reserved.set(key, now + r.delayMs);
    return r.delayMs;
  }

  /** Waiting for something the user must fix: the condition and an Event say what. */
  async userFix(action: Extract<Action, { type: "Wait" }>, key: string, obj: DeliveryObject, subKey: string): Promise<Result | void> {
    const generation = obj.metadata.generation;
    if (conditionDiffers(obj.status?.conditions, { type: SUCCEEDED, status: "Unknown", reason: action.reason, message: action.message }, generation)) {
      const later = this.slot(subKey, key);
      if (later > 0) return { requeueAfter: later };
      const written = await this.d.outcomes.write(key, obj, (s) => ({ status: waiting(s, generation, this.now(), action.reason, action.message) }));
      if (written) this.d.events.record(deliveryRef(obj), action.reason === "Paused" ? "Normal" : "Warning", action.reason, `${action.message}; the delivery waits and nothing is lost`);
    }
    // Subscriptions are watched (their changes wake the delivery); the backlog wakes its own.
    if (action.reason !== "SecretNotFound") return;
    const n = this.secretWaits.get(key) ?? 0;
    this.secretWaits.set(key, n + 1);
    return { requeueAfter: doubling(n, SECRET_RECHECK.initialMs, SECRET_RECHECK.maxMs) };
  }

  /**
   * Due but held by its endpoint: written once per reason (core/attempt/waiting.ts says when). Returns
   * when to plan the delivery again for its report, when the budget put it off.
   */
  async endpointHold(action: Action, key: string, obj: DeliveryObject, policy: Policy | undefined, now: number, subKey: string): Promise<number | undefined> {
    const due = fromRfc3339(obj.status?.nextAttemptAt) ?? fromRfc3339(obj.metadata.creationTimestamp) ?? now;
    const w = endpointWait(action, { now, overdueMs: now - due, maxInFlight: policy?.maxInFlight ?? 0, ...(policy?.rateLimit ? { ratePerSecond: policy.rateLimit.perSecond } : {}) });
    if (!w || getCondition(obj.status?.conditions, SUCCEEDED)?.reason === w.reason) return undefined;
    const later = this.slot(subKey, key);
    if (later > 0) return later;
    const generation = obj.metadata.generation;
    try {
      await this.d.outcomes.write(key, obj, (s) => ({ status: waiting(s, generation, this.now(), w.reason, w.message) }));
    } catch (err) {
      // Informational: the delivery waits the same without it, and its next plan reports again.
      this.d.log.warn({ delivery: key, reason: w.reason, err: (err as Error).message }, "could not record why the delivery waits");
    }
    return undefined;
  }

  /**
   * Not its turn in its ordering lane: the Succeeded condition names the key and what it waits
   * for (written once per reason; a blocking dead letter named anew when it changes), with the
   * lane in status.ordering. No Event per delivery (the subscription gets one when a key is
   * blocked). Woken by the lane; returns when to plan it again when the budget put it off.
   */
  async orderingHold(action: Extract<Action, { type: "Hold" }>, key: string, obj: DeliveryObject, subKey: string, lane: LaneRef | undefined): Promise<number | undefined> {
    const cond = getCondition(obj.status?.conditions, SUCCEEDED);
    if (cond?.reason === action.reason && (action.reason === "OrderingWait" || cond.message === action.message) && obj.status?.ordering) return undefined;
    const later = this.slot(subKey, key);
    if (later > 0) return later;
    const generation = obj.metadata.generation;
    try {
      await this.d.outcomes.write(key, obj, (s) => stampLane({ status: waiting(s, generation, this.now(), action.reason, action.message) }, lane));
    } catch (err) {
      // Informational: the delivery waits the same without it.
      this.d.log.warn({ delivery: key, reason: action.reason, err: (err as Error).message }, "could not record why the delivery waits");
    }
    return undefined;
  }
}
