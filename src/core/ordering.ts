// Ordered delivery per key (spec.ordering): the deliveries of one subscription that share a key
// value form a lane. Only the lane's head (its oldest unfinished delivery) may be attempted, and
// only while no other delivery of the lane is in flight, so at most one delivery per key is in
// flight and the next one waits until the previous is final. A dead letter of the key blocks the
// lane until it is replayed successfully, discarded or deleted: the receiver never sees an
// event of the key after one it did not get. Pure.

/** A delivery in a lane: its key (namespace/name), name and creation time (epoch ms). */
export interface LaneMember {
  key: string;
  name: string;
  createdAt: number;
  /**
   * Stream mode: the sequence of the JetStream message it was made from (annotation
   * hookline.dev/stream-ordered). Made one at a time in that order, so it never contradicts
   * the creation time; it settles what the second-granular creation time cannot.
   */
  seq?: number;
}

/**
 * Oldest first: creation time, then the stream sequence when both have one, then (Kubernetes
 * keeps creation times to the second) the name, its digit runs compared as numbers, so evt-9
 * goes before evt-10; then the plain name.
 */
export function laneOrder(a: LaneMember, b: LaneMember): number {
  const bySeq = a.seq !== undefined && b.seq !== undefined ? a.seq - b.seq : 0;
  return a.createdAt - b.createdAt || bySeq || compareNatural(a.name, b.name) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
}

/** The sequence in a hookline.dev/stream-ordered value (`<stream>/<sequence>`), if it is one. */
export function streamSequenceOf(origin: string | undefined): number | undefined {
  const m = origin === undefined ? null : /\/(\d{1,15})$/.exec(origin);
  return m ? Number(m[1]) : undefined;
}

/** Names compared with runs of ASCII digits as numbers ("evt-9" < "evt-10"). */
export function compareNatural(a: string, b: string): number {
  const re = /(\d+)|(\D+)/g;
  const pa = a.match(re) ?? [];
  const pb = b.match(re) ?? [];
  for (let i = 0; i < Math.min(pa.length, pb.length); i++) {
    const x = pa[i]!;
    const y = pb[i]!;
    if (x === y) continue;
    const dx = /^\d/.test(x);
    const dy = /^\d/.test(y);
    if (dx && dy) {
      // Without leading zeros, a longer run is a larger number; equal lengths compare as text.
      const nx = x.replace(/^0+(?=\d)/, "");
      const ny = y.replace(/^0+(?=\d)/, "");
      if (nx.length !== ny.length) return nx.length - ny.length;
      if (nx !== ny) return nx < ny ? -1 : 1;
      continue;
    }
    return x < y ? -1 : 1;
  }
  return pa.length - pb.length;
}

/** What plan() knows of a delivery's lane. */
export interface OrderView {
  /** spec.ordering.key, e.g. `$.customer.id` or `eventType`. */
  key: string;
  /** The delivery's value at the key (serialized JSON). */
  value: string;
  /** Whether this delivery is its lane's oldest unfinished delivery. */
  head: boolean;
  /** Another delivery of the lane has an attempt in flight (its name). */
  inFlight: string | undefined;
  /** Dead letters of the lane, oldest first (names). */
  deadLetters: readonly string[];
}

export type OrderHold = { reason: "OrderingBlocked" | "OrderingWait"; message: string };

/** Why a delivery may not be attempted now because of its lane; undefined when it may. */
export function orderGate(v: OrderView | undefined): OrderHold | undefined {
  if (!v) return undefined;
  const lane = `ordering key ${v.key} = ${v.value}`;
  if (v.deadLetters.length > 0) {
    const first = v.deadLetters[0]!;
    const more = v.deadLetters.length > 1 ? ` (and ${v.deadLetters.length - 1} more)` : "";
    return {
      reason: "OrderingBlocked",
      message: `blocked by dead letter ${first}${more} of ${lane}: deliveries of this key wait until it is replayed successfully, discarded or deleted (kubectl annotate whdel ${first} hookline.dev/replay="<reason>")`,
    };
  }
  if (!v.head || v.inFlight !== undefined) {
    return { reason: "OrderingWait", message: `waiting for the earlier deliveries of ${lane} to finish: one at a time, oldest first` };
  }
  return undefined;
}
