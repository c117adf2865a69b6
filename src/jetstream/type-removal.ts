// Removing an event type from a stream-mode subscription without losing the events of that type
// already waiting in its consumer. Narrowing the consumer's filter at once would drop them
// silently: they no longer match it, and with interest retention nobody else may want them.
// So the leader keeps the removed filter subjects on the consumer for a while, each with the
// stream's last sequence at the removal, recorded in the consumer's own metadata (durable, seen by
// every replica and by the next leader):
//
//   a message of a type the subscription no longer lists, at sequence <= that bound
//     -> published while it was listed: plan() dead-letters it (EventTypeNotSubscribed, the
//        same as a CR-mode delivery whose type was removed), so it can be replayed once the
//        type is listed again
//   at sequence > the bound
//     -> published after the removal, never the subscription's: acknowledged, not sent, no
//        dead letter (as if the filter had already been narrowed)
//
// Once the consumer's acknowledgement floor reaches the bound (or it holds nothing at all),
// every message of the removed subjects up to it is answered and the filter is narrowed.
// See docs/stream-mode.md and docs/adr/0011-event-type-removal-drains-to-dead-letters.md. Pure.
import { subjectMatches, withoutCovered, covers } from "./subjects.js";

/** Consumer metadata key: JSON of { filter subject: last stream sequence before its removal }. */
export const REMOVED_SUBJECTS_METADATA = "hookline.dev/removed-subjects";

/** Removed filter subjects still on the consumer, each with the stream's last sequence when it was removed. */
export type Draining = Readonly<Record<string, number>>;

/** The removed subjects recorded in a consumer's metadata; anything unreadable counts as none. */
export function readDraining(metadata: Readonly<Record<string, string>> | undefined): Draining {
  const raw = metadata?.[REMOVED_SUBJECTS_METADATA];
  if (!raw) return {};
  try {
    const parsed = JSON.parse(raw) as unknown;
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) return {};
    const out: Record<string, number> = {};
    for (const [k, v] of Object.entries(parsed)) if (typeof v === "number" && Number.isSafeInteger(v) && v >= 0) out[k] = v;
    return out;
  } catch {
    return {};
  }
}

/** The metadata value for `draining`; undefined when nothing drains (the key is left out). */
export function writeDraining(draining: Draining): string | undefined {
  const keys = Object.keys(draining).sort();
  return keys.length ? JSON.stringify(Object.fromEntries(keys.map((k) => [k, draining[k]]))) : undefined;
}

export interface DrainInput {
  /** The consumer's filter subjects now. */
  have: readonly string[];
  /** The filter subjects of the subscription's eventTypes now. */
  wanted: readonly string[];
  /** What the consumer's metadata says still drains. */
  draining: Draining;
  /** The stream's last sequence now (the bound of a subject removed by this change). */
  lastSeq: number;
  /** The consumer's acknowledgement floor (stream sequence), messages not yet delivered, delivered and not acknowledged. */
  ackFloor: number;
  pending: number;
  ackPending: number;
}

/** The subjects of the consumer's filter that no wanted subject covers and that are not draining yet. */
export function newlyRemoved(have: readonly string[], wanted: readonly string[], draining: Draining): string[] {
  return have.filter((s) => !(s in draining) && !wanted.some((w) => covers(w, s)));
}

/**
 * What drains after this change: what drained and is not wanted again, plus what this change
 * removed (bound: `lastSeq`), less what is through (every message up to its bound answered).
 */
export function nextDraining(i: DrainInput): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [s, bound] of Object.entries(i.draining)) if (!i.wanted.some((w) => covers(w, s))) out[s] = bound;
  for (const s of newlyRemoved(i.have, i.wanted, i.draining)) out[s] = i.lastSeq;
  const empty = i.pending === 0 && i.ackPending === 0;
  for (const [s, bound] of Object.entries(out)) if (empty || i.ackFloor >= bound) delete out[s];
  return out;
}

/** The consumer's filter while `draining`: the wanted subjects and the draining ones, none covered by another. */
export function drainFilters(wanted: readonly string[], draining: Draining): string[] {
  return withoutCovered([...wanted, ...Object.keys(draining)]);
}

/**
 * For a message on `subject` at `seq` of a type the subscription no longer lists: true when it
 * was published after its type was removed (acknowledge it, nothing else), false when before
 * (dead-letter it), undefined when no draining subject matches it (the leader has not recorded
 * the removal yet, or is through with it: dead-letter it, the safe side).
 */
export function publishedAfterRemoval(draining: Draining, subject: string, seq: number): boolean | undefined {
  let bound: number | undefined;
  for (const [s, b] of Object.entries(draining)) if (subjectMatches(s, subject)) bound = Math.max(bound ?? 0, b);
  return bound === undefined ? undefined : seq > bound;
}

/**
 * publishedAfterRemoval, and when no draining subject matches: true when the consumer's filter no
 * longer covers the subject. The leader narrows the filter only once every message up to the
 * removal's bound was answered, and forgets the bound then; a message of that subject still out
 * (delivered before the narrowing) is past the bound, so it was published after the removal.
 * While the filter still covers it, the leader has not recorded the removal yet: undefined.
 */
export function publishedAfterRemovalOrNarrowing(draining: Draining, filters: readonly string[], subject: string, seq: number): boolean | undefined {
  const after = publishedAfterRemoval(draining, subject, seq);
  if (after !== undefined) return after;
  // No filter at all takes every subject.
  return filters.length === 0 || filters.some((f) => subjectMatches(f, subject)) ? undefined : true;
}
