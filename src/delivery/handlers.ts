// Watch events -> work-queue keys, with their predicates (controller-runtime's EventHandlers):
// which changes of a subscription or delivery need a reconcile, and what else they wake. Only
// the leader has queues; a standby's caches stay warm and queue nothing.
import type { ReflectorHandler } from "../kube/reflector.js";
import { objectKey } from "../kube/types.js";
import type { Expectations } from "../runtime/expectations.js";
import type { DeliveryObject, ReplayObject, SubscriptionObject } from "./objects.js";
import { subscriptionKeyOf } from "./objects.js";

/** The leader's work queues; `undefined` while this replica does not lead. */
export interface Queues {
  addDelivery(key: string): void;
  addSubscription(key: string, afterMs?: number): void;
  addReplay(key: string): void;
}

export interface HandlersDeps {
  queues: () => Queues | undefined;
  deliveriesOf: (subKey: string) => Iterable<string>;
  /** Deliveries parked on the subscription's endpoint look again (its spec changed). */
  wakeEndpoint: (subKey: string) => void;
  /** A delivery left the active set (finished or deleted): its place in the backlog frees. */
  deliveryLeft?: (subKey: string, key: string) => void;
  deliveryExpectations: Expectations;
  subscriptionExpectations: Expectations;
  replayExpectations?: Expectations;
  /** WebhookReplays of a namespace that have not ended (a subscription change may unblock them). */
  unfinishedReplays?: (namespace: string) => Iterable<string>;
  /** Subscription status is rolled up at most this often (transitions: at once). */
  statusIntervalMs: number;
}

export class Handlers {
  constructor(private readonly d: HandlersDeps) {}

  readonly subscription: ReflectorHandler<SubscriptionObject> = {
    add: (s) => this.onSubscription(undefined, s),
    update: (old, s) => this.onSubscription(old, s),
    delete: (s) => this.onSubscription(s, undefined),
    listed: (startedAt) => {
      for (const key of this.d.subscriptionExpectations.relisted(startedAt)) this.d.queues()?.addSubscription(key);
    },
  };

  readonly delivery: ReflectorHandler<DeliveryObject> = {
    add: (d) => this.onDelivery(d, false),
    update: (_old, d) => this.onDelivery(d, false),
    delete: (d) => this.onDelivery(d, true),
    listed: (startedAt) => {
      for (const key of this.d.deliveryExpectations.relisted(startedAt)) this.d.queues()?.addDelivery(key);
    },
  };

  /** A WebhookReplay is reconciled on every change that is not our own status write. */
  readonly replay: ReflectorHandler<ReplayObject> = {
    add: (r) => this.onReplay(r, false),
    update: (_old, r) => this.onReplay(r, false),
    delete: (r) => this.onReplay(r, true),
    listed: (startedAt) => {
      for (const key of this.d.replayExpectations?.relisted(startedAt) ?? []) this.d.queues()?.addReplay(key);
    },
  };

  private onReplay(r: ReplayObject, gone: boolean): void {
    const key = objectKey(r.metadata);
    const ours = this.d.replayExpectations?.observe(key, gone ? undefined : r.metadata.resourceVersion, r.metadata.uid) ?? false;
    const q = this.d.queues();
    if (!gone && !ours) q?.addReplay(key);
    // One that ended (or went) may have held others of its namespace back.
    if (gone || r.status?.phase === "Completed" || r.status?.phase === "Failed") {
      for (const other of this.d.unfinishedReplays?.(r.metadata.namespace ?? "") ?? []) if (other !== key) q?.addReplay(other);
    }
  }

  /** Subscription status is written at a bounded rate; at once for breaker and health transitions. */
  rollUp(subKey: string, urgent: boolean): void {
    this.d.queues()?.addSubscription(subKey, urgent ? 0 : this.d.statusIntervalMs);
  }

  /**
   * A subscription is reconciled when its spec, generation or annotations changed, or on any
   * write that is not our own status write. A spec change also wakes its deliveries: they wait
   * for this subscription (or for its old spec).
   */
  private onSubscription(old: SubscriptionObject | undefined, sub: SubscriptionObject | undefined): void {
    const key = objectKey((sub ?? old)!.metadata);
    const ownWrite = sub ? this.d.subscriptionExpectations.observe(key, sub.metadata.resourceVersion, sub.metadata.uid) : (this.d.subscriptionExpectations.observe(key, undefined), false);
    const q = this.d.queues();
    if (!q) return;
    const specChanged = !old || !sub || old.metadata.generation !== sub.metadata.generation || !!sub.metadata.deletionTimestamp;
    const annotationsChanged = JSON.stringify(old?.metadata.annotations ?? {}) !== JSON.stringify(sub?.metadata.annotations ?? {});
    if (specChanged || annotationsChanged || !ownWrite) q.addSubscription(key);
    if (specChanged) {
      for (const d of this.d.deliveriesOf(key)) q.addDelivery(d);
      this.d.wakeEndpoint(key);
      // A replay waiting for this subscription (its target) looks again.
      for (const r of this.d.unfinishedReplays?.((sub ?? old)!.metadata.namespace ?? "") ?? []) q.addReplay(r);
    }
  }

  /**
   * A delivery is reconciled on every change that is not our own status write; a new or deleted
   * one also changes its subscription's counts (rolled up at the bounded rate).
   */
  private onDelivery(d: DeliveryObject, gone: boolean): void {
    const key = objectKey(d.metadata);
    const ours = this.d.deliveryExpectations.observe(key, gone ? undefined : d.metadata.resourceVersion, d.metadata.uid);
    const subKey = subscriptionKeyOf(d);
    if (subKey && gone) this.d.deliveryLeft?.(subKey, key);
    if (subKey && (gone || d.metadata.generation === 1)) this.rollUp(subKey, false);
    if (!gone && !ours) this.d.queues()?.addDelivery(key);
  }
}
