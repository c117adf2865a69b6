// The per-key state of ordered subscriptions (spec.ordering), next to the request slots: for
// each subscription with an ordering key, its lanes (the active deliveries sharing a value,
// oldest first), which delivery of each lane has an attempt in flight, and the dead letters that
// block a lane. core/ordering.ts decides from this whether a delivery may go; this module keeps
// it current from the caches and wakes a lane's next delivery when its turn comes. Values are
// read when the cache strips a payload (payload.ts): no payload is kept.
import type { Logger } from "pino";
import { ANNOTATIONS } from "../api/names.js";
import { laneOrder, streamSequenceOf, type LaneMember, type OrderView } from "../core/ordering.js";
import type { OutcomeResult } from "../core/attempt/outcome.js";
import type { Policy } from "../core/attempt/policy.js";
import type { EventSink } from "../kube/events.js";
import type { ReflectorHandler } from "../kube/reflector.js";
import { objectKey } from "../kube/types.js";
import { subscriptionKeyOf, subscriptionRef, type DeliveryObject, type SubscriptionObject } from "./objects.js";
import { orderingValueOf, type OrderingToExtract } from "./payload.js";

/** A delivery's ordering lane as recorded in its status (status.ordering). */
export interface LaneRef {
  key: string;
  value: string;
}

/** An outcome with the delivery's lane recorded in its status (the terminal index reads it from dead letters). */
export function stampLane<R extends OutcomeResult>(r: R, lane: LaneRef | undefined): R {
  return lane ? { ...r, status: { ...r.status, ordering: lane } } : r;
}

/** A lane's id within a subscription: the key text and the value (a key change starts anew). */
const laneId = (key: string, value: string) => `${key}\u0000${value}`;

interface Lane {
  key: string;
  value: string;
  /** Active deliveries of the lane, oldest first (core/ordering.ts laneOrder). */
  members: LaneMember[];
  /** The delivery with an attempt in flight, if any. */
  inFlight: string | undefined;
}

interface Placed {
  subKey: string;
  /** The lane's id; undefined while `unknown` (the value needs a payload read). */
  lane: string | undefined;
  unknown: boolean;
  member: LaneMember;
}

/** A value read from a payload, or the delivery is gone. */
export type ReadValue = { gone: true } | { gone: false; value: string | undefined };

export interface OrderingLanesDeps {
  /** The ordering of a subscription's current spec (undefined: not ordered, or no such subscription). */
  orderingOf: (subKey: string) => Policy["ordering"] | undefined;
  /** Active deliveries of a subscription, and one by key (cached, without payload). */
  deliveriesOf: (subKey: string) => Iterable<string>;
  delivery: (key: string) => DeliveryObject | undefined;
  /** Reads a delivery's value at a payload key the cache did not extract ("gone": no such delivery). */
  readValue: (obj: DeliveryObject, o: OrderingToExtract, signal?: AbortSignal) => Promise<ReadValue>;
  /** Queues a delivery key (its turn came). */
  wake: (deliveryKey: string) => void;
  /** A lane that becomes blocked by a dead letter is said as an Event on the subscription. */
  events?: EventSink;
  subscription?: (subKey: string) => SubscriptionObject | undefined;
  log: Logger;
}

export class OrderingLanes {
  /** subKey -> lane id -> lane. */
  private readonly lanes = new Map<string, Map<string, Lane>>();
  /** The key text each subscription's lanes were built for. */
  private readonly keys = new Map<string, string>();
  private readonly placed = new Map<string, Placed>();
  /** Deliveries whose value needs a payload read, by subscription. */
  private readonly unknown = new Map<string, Set<string>>();
  /** subKey -> lane id -> names of dead letters that block it. */
  private readonly blockers = new Map<string, Map<string, Set<string>>>();
  /** subKey -> dead letter name -> its lane id (to remove it). */
  private readonly blockerOf = new Map<string, Map<string, string>>();

  constructor(private readonly d: OrderingLanesDeps) {}

  /** A delivery entered or changed in the active cache. */
  deliveryChanged(obj: DeliveryObject): void {
    const subKey = subscriptionKeyOf(obj);
    if (!subKey) return;
    const key = objectKey(obj.metadata);
    const before = this.placed.get(key);
    if (before && before.subKey === subKey && !before.unknown) return; // a status change: the lane stays
    this.place(key, subKey, obj);
  }

  /** A delivery left the active cache (finished or deleted): the next of its lane may go. */
  deliveryGone(obj: DeliveryObject): void {
    this.unplace(objectKey(obj.metadata));
  }

  /** A subscription appeared, changed or went: when its ordering key changed, its lanes are rebuilt. */
  subscriptionChanged(subKey: string): void {
    const key = this.d.orderingOf(subKey)?.key;
    if (key === this.keys.get(subKey)) return;
    const keys = [...this.d.deliveriesOf(subKey)];
    for (const k of keys) this.unplace(k, false);
    this.lanes.delete(subKey);
    this.unknown.delete(subKey);
    if (key === undefined) this.keys.delete(subKey);
    else this.keys.set(subKey, key);
    for (const k of keys) {
      const obj = this.d.delivery(k);
      if (obj) this.place(k, subKey, obj);
    }
  }

  /**
   * Resolves the values the cache could not extract, so every lane of the subscription is
   * complete before one of its deliveries is planned (an older delivery missing from its lane
   * would let a newer one go first).
   */
  async ready(subKey: string, signal?: AbortSignal): Promise<void> {
    const ordering = this.d.orderingOf(subKey);
    for (let pending = this.unknown.get(subKey); ordering && pending && pending.size > 0; pending = this.unknown.get(subKey)) {
      const batch = [...pending].slice(0, 8);
      await Promise.all(
        batch.map(async (k) => {
          const obj = this.d.delivery(k);
          const read: ReadValue = obj
            ? await this.d.readValue(obj, ordering, signal).catch((err: Error) => {
                this.d.log.warn({ delivery: k, err: err.message }, "could not read the ordering key's value; trying again");
                throw err;
              })
            : { gone: true };
          // Re-placed from the cache, which now knows the value (or dropped it meanwhile).
          const current = this.d.delivery(k);
          if (read.gone || !current) this.unplace(k);
          else this.place(k, subKey, current);
        }),
      );
    }
  }

  /** The delivery's lane as plan() sees it; undefined when it is not ordered. */
  view(deliveryKey: string): OrderView | undefined {
    const p = this.placed.get(deliveryKey);
    if (!p || p.lane === undefined) return undefined;
    const lane = this.lanes.get(p.subKey)?.get(p.lane);
    if (!lane) return undefined;
    const dls = this.blockers.get(p.subKey)?.get(p.lane);
    return {
      key: lane.key,
      value: lane.value,
      head: lane.members[0]?.key === deliveryKey,
      inFlight: lane.inFlight !== undefined && lane.inFlight !== deliveryKey ? lane.inFlight.slice(lane.inFlight.indexOf("/") + 1) : undefined,
      deadLetters: dls ? [...dls].sort() : [],
    };
  }

  /** The lane a delivery belongs to now, for its status (status.ordering). */
  laneOf(deliveryKey: string): { key: string; value: string } | undefined {
    const v = this.view(deliveryKey);
    return v ? { key: v.key, value: v.value } : undefined;
  }

  /** An attempt of the delivery starts (in the same turn as plan()). */
  started(deliveryKey: string): void {
    const lane = this.laneFor(deliveryKey);
    if (lane) lane.inFlight = deliveryKey;
  }

  /** Its attempt ended: if another delivery became the head meanwhile, it may go now. */
  finished(deliveryKey: string): void {
    const lane = this.laneFor(deliveryKey);
    if (!lane || lane.inFlight !== deliveryKey) return;
    lane.inFlight = undefined;
    const head = lane.members[0];
    if (head && head.key !== deliveryKey) this.d.wake(head.key);
  }

  /** A dead letter of the subscription, with the lane it was recorded in (status.ordering). */
  deadLetterSeen(subKey: string, name: string, ordering: { key: string; value: string } | undefined): void {
    if (!ordering) return;
    const id = laneId(ordering.key, ordering.value);
    const of = this.mapOf(this.blockerOf, subKey);
    if (of.get(name) === id) return;
    if (of.has(name)) this.deadLetterGone(subKey, name);
    of.set(name, id);
    const byLane = this.mapOf(this.blockers, subKey);
    let set = byLane.get(id);
    if (!set) byLane.set(id, (set = new Set()));
    set.add(name);
    if (set.size === 1) this.blocked(subKey, ordering, name, this.lanes.get(subKey)?.get(id)?.members.length ?? 0);
  }

  private blocked(subKey: string, lane: { key: string; value: string }, deadLetter: string, waiting: number): void {
    const sub = this.d.subscription?.(subKey);
    if (!sub || !this.d.events) return;
    this.d.events.record(
      { ...subscriptionRef(sub), resourceVersion: undefined },
      "Warning",
      "OrderingBlocked",
      `ordering key ${lane.key} = ${lane.value} is blocked by dead letter ${deadLetter} (${waiting} deliveries of the key wait): replay it successfully, or delete it, to go on`,
    );
  }

  /** `inner` with this module told of every change first (`changed` on add and update, `gone` on delete). */
  watching<T>(inner: ReflectorHandler<T>, changed: (o: T) => void, gone: (o: T) => void = changed): ReflectorHandler<T> {
    return {
      add: (o) => {
        changed(o);
        inner.add(o);
      },
      update: (old, o) => {
        changed(o);
        inner.update(old, o);
      },
      delete: (o) => {
        gone(o);
        inner.delete(o);
      },
      listed: (t) => inner.listed?.(t),
    };
  }

  /** A dead letter is no more (replayed successfully, discarded, deleted): its lane may go on. */
  deadLetterGone(subKey: string, name: string): void {
    const of = this.blockerOf.get(subKey);
    const id = of?.get(name);
    if (id === undefined) return;
    of!.delete(name);
    const set = this.blockers.get(subKey)?.get(id);
    set?.delete(name);
    if (set && set.size > 0) return;
    this.blockers.get(subKey)?.delete(id);
    const head = this.lanes.get(subKey)?.get(id)?.members[0];
    if (head) this.d.wake(head.key);
  }

  private laneFor(deliveryKey: string): Lane | undefined {
    const p = this.placed.get(deliveryKey);
    return p?.lane === undefined ? undefined : this.lanes.get(p.subKey)?.get(p.lane);
  }

  private place(key: string, subKey: string, obj: DeliveryObject): void {
    this.unplace(key, false);
    const ordering = this.d.orderingOf(subKey);
    if (ordering && this.keys.get(subKey) !== ordering.key) this.keys.set(subKey, ordering.key);
    // Deliveries of subscriptions without ordering cost nothing here.
    if (!ordering) return;
    const seq = streamSequenceOf(obj.metadata.annotations?.[ANNOTATIONS.streamOrdered]);
    const member: LaneMember = { key, name: obj.metadata.name, createdAt: Date.parse(obj.metadata.creationTimestamp ?? "") || 0, ...(seq === undefined ? {} : { seq }) };
    const known = orderingValueOf(obj, ordering);
    if (!known.known) {
      this.placed.set(key, { subKey, lane: undefined, unknown: true, member });
      this.mapOf(this.unknown, subKey, () => new Set<string>()).add(key);
      return;
    }
    if (known.value === undefined) {
      this.placed.set(key, { subKey, lane: undefined, unknown: false, member });
      return;
    }
    const id = laneId(ordering.key, known.value);
    const lanes = this.mapOf(this.lanes, subKey);
    let lane = lanes.get(id);
    if (!lane) lanes.set(id, (lane = { key: ordering.key, value: known.value, members: [], inFlight: undefined }));
    insertSorted(lane.members, member);
    this.placed.set(key, { subKey, lane: id, unknown: false, member });
  }

  private unplace(key: string, wakeNext = true): void {
    const p = this.placed.get(key);
    if (!p) return;
    this.placed.delete(key);
    if (p.unknown) {
      this.unknown.get(p.subKey)?.delete(key);
      return;
    }
    if (p.lane === undefined) return;
    const lanes = this.lanes.get(p.subKey);
    const lane = lanes?.get(p.lane);
    if (!lane) return;
    const i = lane.members.findIndex((m) => m.key === key);
    if (i >= 0) lane.members.splice(i, 1);
    if (lane.inFlight === key) lane.inFlight = undefined;
    if (lane.members.length === 0) {
      lanes!.delete(p.lane);
      return;
    }
    if (i === 0 && wakeNext) this.d.wake(lane.members[0]!.key);
  }

  private mapOf<V>(m: Map<string, Map<string, V>>, k: string): Map<string, V>;
  private mapOf<V>(m: Map<string, V>, k: string, make: () => V): V;
  private mapOf<V>(m: Map<string, unknown>, k: string, make?: () => V): unknown {
    let v = m.get(k);
    if (v === undefined) m.set(k, (v = make ? make() : new Map()));
    return v;
  }
}

/** Inserts `m` into `list` (sorted by laneOrder): oldest first, so the head is list[0]. */
function insertSorted(list: LaneMember[], m: LaneMember): void {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (laneOrder(list[mid]!, m) < 0) lo = mid + 1;
    else hi = mid;
  }
  list.splice(lo, 0, m);
}
