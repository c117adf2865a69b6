// Which finished deliveries a replay takes (a WebhookReplay's selector and window, or a bulk
// replay annotation's subscription), decided from what a Table row of a finished delivery carries
// (subscription, event type, phase, dead-letter reason, finish time), so no payload is read
// to match. A replay takes only deliveries that finished before it started: it ends, and a
// replay that failed again (finished anew) is not taken twice. Pure.
import { matchesEventType } from "./attempt/policy.js";

export type ReplayPhase = "DeadLettered" | "Succeeded";

/** What a replay matches a finished delivery by. */
export interface ReplayCandidate {
  subscription: string;
  eventType: string | undefined;
  phase: string;
  /** The dead-letter reason (DeadLettered only). */
  reason: string | undefined;
  /** Epoch ms. */
  finishedAt: number;
}

export interface ReplaySelection {
  /** Undefined: every subscription of the namespace. */
  subscriptions: ReadonlySet<string> | undefined;
  /** Undefined or empty: every type. Patterns as in a subscription's eventTypes. */
  eventTypes: readonly string[] | undefined;
  /** Undefined or empty: every dead-letter reason. */
  reasons: ReadonlySet<string> | undefined;
  phases: ReadonlySet<ReplayPhase>;
  /** Inclusive lower bound on finishedAt (epoch ms). */
  finishedAfter: number | undefined;
  /** Exclusive upper bound on finishedAt: the replay's spec, or its start if earlier. */
  finishedBefore: number;
}

export function selects(s: ReplaySelection, c: ReplayCandidate): boolean {
  if (c.phase !== "DeadLettered" && c.phase !== "Succeeded") return false;
  if (!s.phases.has(c.phase)) return false;
  if (s.subscriptions && !s.subscriptions.has(c.subscription)) return false;
  if (s.finishedAfter !== undefined && c.finishedAt < s.finishedAfter) return false;
  if (c.finishedAt >= s.finishedBefore) return false;
  if (s.eventTypes && s.eventTypes.length > 0 && (c.eventType === undefined || !matchesEventType(s.eventTypes, c.eventType))) return false;
  if (c.phase === "DeadLettered" && s.reasons && s.reasons.size > 0 && (c.reason === undefined || !s.reasons.has(c.reason))) return false;
  return true;
}

/** Where a replay is in its walk: candidates are taken in this order, and resume after it. */
export interface ReplayCursor {
  phase: ReplayPhase;
  /** DeadLettered: the finish time of the last taken; Succeeded: unused (lists come in name order). */
  finishedAt: number;
  name: string;
}

const PHASE_ORDER: Record<ReplayPhase, number> = { DeadLettered: 0, Succeeded: 1 };

/** Dead letters oldest first (then by name), then Succeeded deliveries by name. */
export function afterCursor(cursor: ReplayCursor | undefined, c: { phase: ReplayPhase; finishedAt: number; name: string }): boolean {
  if (!cursor) return true;
  if (PHASE_ORDER[c.phase] !== PHASE_ORDER[cursor.phase]) return PHASE_ORDER[c.phase] > PHASE_ORDER[cursor.phase];
  if (c.phase === "DeadLettered" && c.finishedAt !== cursor.finishedAt) return c.finishedAt > cursor.finishedAt;
  return c.name > cursor.name;
}

export function formatCursor(c: ReplayCursor): string {
  return `${c.phase}/${c.finishedAt}/${c.name}`;
}

export function parseCursor(text: string | undefined): ReplayCursor | undefined {
  const m = text === undefined ? null : /^(DeadLettered|Succeeded)\/(\d+)\/(.+)$/.exec(text);
  return m ? { phase: m[1] as ReplayPhase, finishedAt: Number(m[2]), name: m[3]! } : undefined;
}
