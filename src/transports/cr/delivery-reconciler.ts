// Reconciles one WebhookDelivery key (CR mode): read the cached delivery and its subscription;
// the delivery step (delivery/engine/step.ts) gathers its Secrets and plans it; then act on the
// plan: wait (no write), park until a slot frees, record what it waits for, dead-letter,
// discard, or attempt it through the step and write the outcome in one status patch. CR mode's
// side of the step: the payload is read from the API server, outcomes are status patches, the
// next try is a requeue.
import type { Logger } from "pino";
import { ANNOTATIONS } from "../../api/names.js";
import type { DeliverySpec } from "../../api/delivery.js";
import { deadLetter, discard, type AttemptResult, type OutcomeResult } from "../../core/attempt/outcome.js";
import type { OrderView } from "../../core/ordering.js";
import type { Action } from "../../core/attempt/plan.js";
import type { Policy } from "../../core/attempt/policy.js";
import { fromRfc3339 } from "../../core/rfc3339.js";
import type { EventSink } from "../../kube/events.js";
import type { KubeClient } from "../../kube/client.js";
import { splitKey } from "../../kube/types.js";
import type { ReconcileContext, Result } from "../../runtime/controller.js";
import type { Expectations } from "../../runtime/expectations.js";
import type { AttemptExecutor } from "../../delivery/engine/attempt.js";
import type { Caches } from "../../delivery/caches.js";
import type { ResolvedCredentials } from "../../delivery/engine/credentials.js"; // [receiver-credentials]
import type { Endpoint, EndpointRegistry } from "../../delivery/engine/endpoints.js";
import type { DeliveryStep } from "../../delivery/engine/step.js";
import type { Finals, OutcomeMeta } from "../../delivery/finals.js";
import { subscriptionKey, type DeliveryObject } from "../../delivery/objects.js";
import { stampLane, type LaneRef, type OrderingLanes } from "../../delivery/ordering-lanes.js";
import type { ComputeStatus, OutcomeWriter, Written } from "../../delivery/outcome-writer.js";
import { loadRequestBody, payloadView } from "../../delivery/payload.js";
import { traceOf } from "../../delivery/trace.js"; // [tracing]
import type { WaitReports } from "./waits.js";
import type { Backlog } from "./backlog.js";

/** What the reconciler needs of the ordering lanes (ordering-lanes.ts). */
export type Lanes = Pick<OrderingLanes, "ready" | "view" | "laneOf" | "started" | "finished" | "deadLetterSeen" | "deadLetterGone">;

export interface DeliveryReconcilerDeps {
  client: KubeClient;
  /** Ordered subscriptions' lanes (spec.ordering). */
  lanes?: Lanes;
  /** Makes room for one more dead letter (WEBHOOK_DLQ_MAX_ENTRIES, deadLetter.maxEntries) before it is stored. */
  deadLetterRoom?: (deliveryKey: string, subKey: string) => Promise<void>;
  caches: Caches;
  endpoints: EndpointRegistry;
  /** The delivery step: Secrets, plan, attempt and outcome, as stream mode and replay have them. */
  step: DeliveryStep;
  executor: AttemptExecutor;
  waits: WaitReports;
  /** spec.maxPending for deliveries created directly. */
  backlog: Backlog;
  outcomes: OutcomeWriter<OutcomeMeta>;
  finals: Finals;
  events: EventSink;
  expectations: Expectations;
  log: Logger;
  /** Queues a delivery again: how a delivery parked for a slot or a probe is woken. */
  requeue: (deliveryKey: string) => void;
  /** This replica leads with a fresh Lease (a paused leader's term ends soon after it runs again; nothing starts meanwhile). */
  leading?: () => boolean;
}

/** One delivery's reconcile, with everything plan() was given. */
interface Context {
  key: string;
  obj: DeliveryObject;
  subKey: string;
  policy: Policy | undefined;
  endpoint: Endpoint | undefined;
  keys: Buffer[];
  /** [receiver-credentials] what the executor sends with (resolved before plan()). */
  creds: ResolvedCredentials | undefined;
  /** The delivery's ordering lane, recorded in its status (status.ordering). */
  lane: LaneRef | undefined;
  signal: AbortSignal;
  now: number;
}

export class DeliveryReconciler {
  /** The step's clock. */
  private readonly now: () => number;

  constructor(private readonly d: DeliveryReconcilerDeps) {
    this.now = d.step.now;
  }

  async reconcile(key: string, signal: AbortSignal, ctx?: ReconcileContext): Promise<Result | void> {
    if (this.d.outcomes.hasUnwritten(key)) return this.writeUnwritten(key);
    // Not sure of the Lease (paused past its renew deadline): no attempt starts; the term that
    // leads next (this replica's or another's) queues every delivery again.
    if (this.d.leading && !this.d.leading()) return;
    let obj = this.d.caches.delivery(key);
    if (!obj) {
      this.d.waits.forget(key);
      return;
    }
    switch (this.d.expectations.check(key, obj.metadata.resourceVersion, obj.metadata.uid)) {
      case "wait":
        // The watch (or a relist) brings our own write and queues the key; at the latest, it expires.
        return { requeueAfter: this.d.expectations.untilExpiry(key) };
      case "expired":
        obj = await this.d.outcomes.fetch(key);
        if (!obj) return;
        break;
      case "ok":
        break;
    }
    if (obj.metadata.deletionTimestamp) return;
    if (this.d.outcomes.holdingBack) return { requeueAfter: 2_000 };

    const parsed = this.d.caches.deliverySpec(obj);
    if (!parsed.ok) {
      // The CRD refuses such specs; an object from an older CRD is discarded with the reason.
      await this.finish(key, obj, discard(obj.status, obj.metadata.generation, this.now(), "InvalidSpec", parsed.message), undefined);
      return;
    }
    return this.planAndAct(key, obj, parsed.spec, signal, ctx?.log ?? this.d.log);
  }

  /** plan() from the delivery, its subscription's policy, its signing keys and credentials and its endpoint; then act. */
  private async planAndAct(key: string, obj: DeliveryObject, spec: DeliverySpec, signal: AbortSignal, log: Logger): Promise<Result | void> {
    const { namespace } = splitKey(key);
    const subKey = subscriptionKey(namespace, spec.subscriptionRef.name);
    const subObj = this.d.caches.subscription(subKey);
    const subscription = this.d.caches.subscriptionView(subObj);
    const policy = subscription.kind === "ok" ? subscription.policy : undefined;
    const status = obj.status ?? {};
    const nextAttemptAt = fromRfc3339(status.nextAttemptAt);
    const due = nextAttemptAt === undefined || nextAttemptAt <= this.now();
    const { secret, keys, creds } = await this.d.step.gather(namespace, policy, due);
    // Every delivery of an ordered subscription in its lane before one of them is planned.
    if (policy?.ordering) await this.d.lanes?.ready(subKey, signal);

    // From here to the step's attempt taking the endpoint's slots there is no await: the
    // endpoint state plan() reads (a probe granted, a token taken, a free slot) is committed in
    // the same turn, so two deliveries never both take the one probe or the last token.
    const order = this.laneView(policy, key);
    const sub = { key: subKey, object: subObj ? { uid: subObj.metadata.uid, status: subObj.status } : undefined, view: subscription };
    const { action, endpoint, now } = this.d.step.plan(
      key,
      sub,
      secret,
      (p) => ({
        phase: status.phase,
        attempts: status.attempts ?? 0,
        nextAttemptAt,
        eventType: spec.eventType,
        ...payloadView(obj),
        backlogFull: p !== undefined && !p.paused && !this.d.backlog.admit(subKey, key, p.maxPending),
        fromStream: obj.metadata.annotations?.[ANNOTATIONS.streamMessage] !== undefined,
      }),
      order,
    );
    if (log.isLevelEnabled("debug")) log.debug({ delivery: key, action: action.type, ...("why" in action ? { why: action.why } : {}), ...("at" in action ? { inMs: action.at - now } : {}) }, "planned");
    if (action.type !== "Attempt" && action.type !== "Park") this.d.endpoints.kick(endpoint, policy?.maxInFlight ?? 0);
    const lane = order ? { key: order.key, value: order.value } : undefined;
    return this.act(action, { key, obj, subKey, policy, endpoint, keys, creds, lane, signal, now });
  }

  /** The delivery's ordering lane (ordered subscriptions only). */
  private laneView(policy: Policy | undefined, key: string): OrderView | undefined {
    return policy?.ordering ? this.d.lanes?.view(key) : undefined;
  }

  private async act(action: Action, c: Context): Promise<Result | void> {
    switch (action.type) {
      case "Nothing":
        return;
      case "WaitUntil": {
        this.countHeld(action, c);
        const report = await this.d.waits.endpointHold(action, c.key, c.obj, c.policy, c.now, c.subKey);
        return { requeueAfter: Math.min(Math.max(0, action.at - c.now), report ?? Infinity) };
      }
      case "Park": {
        // Parked before the report is written: a slot freed meanwhile wakes it (no idle slot).
        this.d.step.park(c.endpoint!, c.key, action.why, () => this.d.requeue(c.key));
        this.countHeld(action, c);
        const report = await this.d.waits.endpointHold(action, c.key, c.obj, c.policy, c.now, c.subKey);
        return report === undefined ? undefined : { requeueAfter: report };
      }
      case "Hold": {
        const report = await this.d.waits.orderingHold(action, c.key, c.obj, c.subKey, c.lane);
        return report === undefined ? undefined : { requeueAfter: report };
      }
      case "Wait":
        return this.d.waits.userFix(action, c.key, c.obj, c.subKey);
      case "DeadLetter":
        if (action.reason === "BreakerOpen") this.d.executor.countBreakerOpen(c.subKey);
        await this.finish(c.key, c.obj, deadLetter(c.obj.status, c.obj.metadata.generation, this.now(), action.reason, action.message), c.subKey, c.lane);
        return;
      case "Discard":
        await this.finish(c.key, c.obj, discard(c.obj.status, c.obj.metadata.generation, this.now(), action.reason, action.message), c.subKey, c.lane);
        return;
      case "Attempt":
        this.d.waits.forget(c.key);
        return this.attempt(action, c);
    }
  }

  /** A due delivery held by its endpoint is one held attempt (webhook_delivery_held_total), once per hold. */
  private countHeld(action: Action, c: Context): void {
    const reason = c.endpoint ? this.d.waits.held(action, c.key, c.endpoint) : undefined;
    if (reason) this.d.executor.countHeld(c.subKey, reason);
  }

  /**
   * A computation that records the lane and, when it dead-letters the delivery, blocks the lane
   * at once: before the write is answered, so the lane's next delivery never goes in between.
   */
  private laneAware(compute: ComputeStatus, key: string, subKey: string | undefined, lane: LaneRef | undefined): ComputeStatus {
    if (!lane || !subKey) return compute;
    return (s) => {
      const r = stampLane(compute(s), lane);
      if (r.final?.phase === "DeadLettered") this.d.lanes?.deadLetterSeen(subKey, key.slice(key.indexOf("/") + 1), lane);
      return r;
    };
  }

  /** After a write: a lane blocked for a dead letter that was not written is unblocked. */
  private afterLaneWrite(written: Written | undefined, key: string, subKey: string | undefined, lane: LaneRef | undefined): void {
    if (lane && subKey && written?.final?.phase !== "DeadLettered") this.d.lanes?.deadLetterGone(subKey, key.slice(key.indexOf("/") + 1));
  }

  /** One attempt through the executor; its outcome is written before the endpoint slot frees. */
  private async attempt(action: Extract<Action, { type: "Attempt" }>, c: Context): Promise<Result | void> {
    const { key, obj, subKey } = c;
    const policy = c.policy!;
    // The lane's one attempt in flight, taken in the same turn as plan() (no await since).
    if (c.lane) this.d.lanes?.started(key);
    try {
      const written = await this.d.step.run(
        {
          key,
          endpoint: c.endpoint!,
          policy,
          action,
          secrets: { keys: c.keys, creds: c.creds }, // [receiver-credentials] credentials
          message: (signal) => loadRequestBody(this.d.client, obj, signal, this.d.caches.payloads),
          signal: c.signal,
          status: obj.status,
          trace: traceOf(obj), // [tracing]
        },
        (result) => this.recordAttempt(key, obj, policy, result, subKey, c.lane),
      );
      return written ? this.afterOutcome(written) : undefined;
    } finally {
      if (c.lane) this.d.lanes?.finished(key);
    }
  }

  private async recordAttempt(key: string, obj: DeliveryObject, policy: Policy, attempt: AttemptResult, subKey: string, lane: LaneRef | undefined): Promise<Written | undefined> {
    const compute = this.laneAware(
      (status: DeliveryObject["status"]) => this.d.step.outcome(status, obj.metadata.generation, attempt, policy),
      key,
      subKey,
      lane,
    );
    const preview = compute(obj.status);
    const deleted = await this.deleteIfNobodyReads(key, obj, policy, preview, subKey);
    if (deleted) return deleted;
    if (preview.final?.phase === "DeadLettered") await this.d.deadLetterRoom?.(key, subKey);
    const written = await this.d.outcomes.writeOrKeep(key, obj, compute, { subKey, replay: false });
    this.afterLaneWrite(written, key, subKey, lane);
    if (written?.final) this.d.finals.record(written.obj, written.final, subKey, false);
    return written;
  }

  /**
   * retention.succeeded 0s: a delivered event's Succeeded status would be deleted as soon as it
   * is written, so the delivery is deleted at once instead (one API write instead of two). The
   * metrics and counts are the same (finals.record); only the short-lived Succeeded object is
   * never stored. A delivery changed since it was read (annotated, say) takes the usual path.
   */
  private async deleteIfNobodyReads(key: string, obj: DeliveryObject, policy: Policy, result: OutcomeResult, subKey: string): Promise<Written | undefined> {
    if (result.final?.phase !== "Succeeded" || policy.retention.succeededMs !== 0) return undefined;
    // Any failure (an outage) takes the usual path, which keeps the outcome until it is written.
    const deleted = await this.d.outcomes.deleteAt(key, obj).catch(() => "failed" as const);
    if (deleted !== "deleted") return undefined;
    const gone: Written = { obj: { ...obj, status: result.status }, final: result.final };
    this.d.finals.record(gone.obj, result.final, subKey, false);
    return gone;
  }

  /** Writes a final status without an attempt (dead letter before sending, discard). */
  private async finish(key: string, obj: DeliveryObject, result: OutcomeResult, subKey: string | undefined, lane?: LaneRef): Promise<void> {
    if (result.final?.phase === "DeadLettered" && subKey) await this.d.deadLetterRoom?.(key, subKey);
    const written = await this.d.outcomes.write(key, obj, this.laneAware(() => result, key, subKey, lane));
    this.afterLaneWrite(written, key, subKey, lane);
    if (written?.final) this.d.finals.record(written.obj, written.final, subKey, false);
  }

  /** Records an outcome kept from an earlier write that failed, on a fresh read of the delivery. */
  private async writeUnwritten(key: string): Promise<Result | void> {
    const done = await this.d.outcomes.writeUnwritten(key);
    // A lane blocked before a write that, in the end, did not dead-letter the delivery goes on.
    if (done && !done.meta.replay && done.written?.final?.phase !== "DeadLettered") this.d.lanes?.deadLetterGone(done.meta.subKey, key.slice(key.indexOf("/") + 1));
    if (!done?.written) return;
    if (done.written.final) this.d.finals.record(done.written.obj, done.written.final, done.meta.subKey, done.meta.replay);
    return this.afterOutcome(done.written);
  }

  private afterOutcome(written: Written): Result | void {
    const next = fromRfc3339(written.obj.status?.nextAttemptAt);
    if (written.final || next === undefined) return;
    return { requeueAfter: Math.max(0, next - this.now()) };
  }
}
