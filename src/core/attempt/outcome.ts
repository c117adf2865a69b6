// What an attempt (or a decision without one) does to a delivery's status. Pure: the executor
// writes the result in one status patch. Every function returns the whole next status.
import type { Attempt, AttemptOutcome, DeliveryStatus } from "../../api/delivery.js";
import { clipText } from "../../api/fit.js";
import { HISTORY_ERROR_MAX_LENGTH, HISTORY_MAX, HISTORY_MAX_BYTES, HISTORY_MIN, isTerminalPhase, type DeadLetterReason, type DiscardReason } from "../../api/names.js";
import type { Classification } from "./classify.js";
import { setCondition } from "../conditions.js";
import type { OrderHold } from "../ordering.js";
import type { WaitReason } from "./plan.js";
import type { EndpointWaitReason } from "./waiting.js";
import type { Policy } from "./policy.js";
import { retryDecision } from "./retry.js";
import { toRfc3339 } from "../rfc3339.js";

export const SUCCEEDED = "Succeeded";

export interface AttemptResult {
  startedAt: number;
  durationMs: number;
  responseStatus?: number;
  retryAfter?: string;
  error?: string;
  /** Absent when the attempt was interrupted by the operator's shutdown. */
  classification: Classification | "interrupted";
}

export interface OutcomeInput {
  status: DeliveryStatus | undefined;
  generation: number | undefined;
  now: number;
  attempt: AttemptResult;
  policy: Policy;
  random: () => number;
  /** Set for a replay: one attempt outside the retry schedule. */
  replay?: ReplayInput;
  /** What an interrupted attempt becomes (WEBHOOK_DRAIN_TIMEOUT_ACTION). */
  interruptedAction?: "requeue" | "dead-letter";
}

export interface ReplayInput {
  reason: string;
  /** The bulk replay's id or the WebhookReplay's uid. */
  requestId?: string;
  /** The WebhookReplay's name. */
  name?: string;
  /** Sent to this subscription instead of the delivery's own: recorded only, the phase stays. */
  target?: string;
}

export interface Final {
  phase: "Succeeded" | "DeadLettered" | "Discarded";
  reason: string;
  message: string;
}

export interface OutcomeResult {
  status: DeliveryStatus;
  final?: Final;
}

/** What an attempt's classification means for the delivery (status.history[].outcome, the attempt log line). */
export function attemptOutcome(c: Classification | "interrupted"): AttemptOutcome {
  if (c === "interrupted") return "Interrupted";
  switch (c.verdict) {
    case "delivered":
      return "Succeeded";
    case "retry":
      return "Failed";
    case "gone":
      return "Gone";
    case "permanent":
      return c.reason === "blocked" ? "Blocked" : "PermanentFailure";
  }
}

function describeAttempt(a: AttemptResult): string {
  if (a.responseStatus !== undefined) return `HTTP ${a.responseStatus}`;
  return a.error ?? "no response";
}

/**
 * The next status after one attempt, one rule per verdict: a replay that is only recorded (to
 * another subscription, or a delivered event sent again), interrupted by a shutdown, delivered,
 * a failed replay, failed for good (410, permanent, blocked), or retryable (retry policy).
 */
export function applyAttempt(input: OutcomeInput): OutcomeResult {
  const { attempt } = input;
  const base = recordAttempt(input);
  const c = attempt.classification;
  if (recordedOnly(input)) return { status: c === "interrupted" ? { ...base, phase: input.status?.phase } : base };
  if (c === "interrupted") return onInterrupted(input, base);
  if (c.verdict === "delivered") return onDelivered(input, base);
  if (input.replay) return onReplayFailed(input, base);
  if (c.verdict === "retry") return onRetryable(input, base);
  return onFailedForGood(input, base, c);
}

/**
 * A replay to another subscription, or of a delivered event: the attempt is recorded (history,
 * lastAttempt, lastReplay) and nothing else changes: not the phase, the attempts counted against
 * maxAttempts, the replays or the finish time (retention).
 */
function recordedOnly(input: OutcomeInput): boolean {
  return input.replay !== undefined && (input.replay.target !== undefined || input.status?.phase === "Succeeded");
}

/** How many attempts status.history keeps for this policy (HISTORY_MIN..HISTORY_MAX). */
export function historyLimit(policy: Pick<Policy, "retry" | "deadLetter">): number {
  return Math.min(HISTORY_MAX, Math.max(HISTORY_MIN, policy.retry.maxAttempts + policy.deadLetter.maxReplays));
}

/** The history with `record` appended: at most `limit` entries and HISTORY_MAX_BYTES serialized, the oldest dropped first. */
export function appendHistory(history: readonly Attempt[] | undefined, record: Attempt, limit: number): Attempt[] {
  const entry: Attempt = record.error !== undefined ? { ...record, error: clipText(record.error, HISTORY_ERROR_MAX_LENGTH) } : record;
  const out = [...(history ?? []), entry].slice(-limit);
  let bytes = Buffer.byteLength(JSON.stringify(out));
  while (out.length > 1 && bytes > HISTORY_MAX_BYTES) bytes -= Buffer.byteLength(JSON.stringify(out.shift())) + 1;
  return out;
}

/** The status with this attempt recorded (counts, last attempt, history, replay result). */
function recordAttempt(input: OutcomeInput): DeliveryStatus {
  const { now, attempt, generation } = input;
  const prev = input.status ?? {};
  const c = attempt.classification;
  const counted = c !== "interrupted" && !recordedOnly(input);
  const record: Attempt = {
    number: (prev.lastAttempt?.number ?? 0) + 1,
    startedAt: toRfc3339(attempt.startedAt),
    durationMs: Math.max(0, Math.round(attempt.durationMs)),
    ...(attempt.responseStatus !== undefined ? { responseStatus: attempt.responseStatus } : {}),
    ...(attempt.error !== undefined ? { error: attempt.error } : {}),
    outcome: attemptOutcome(c),
    reason: c === "interrupted" ? "interrupted" : c.reason,
    ...(input.replay ? { replay: true } : {}),
    ...(input.replay?.target ? { target: input.replay.target } : {}),
  };
  return {
    ...prev,
    observedGeneration: generation,
    attempts: (prev.attempts ?? 0) + (counted ? 1 : 0),
    lastAttempt: record,
    history: appendHistory(prev.history, record, historyLimit(input.policy)),
    ...(c === "interrupted" ? { interruptions: (prev.interruptions ?? 0) + 1 } : {}),
    ...(input.replay && c !== "interrupted" ?
      {
        lastReplay: {
          reason: input.replay.reason,
          at: toRfc3339(now),
          ...(input.replay.requestId ? { requestId: input.replay.requestId } : {}),
          result: c.verdict === "delivered" ? ("Succeeded" as const) : ("Failed" as const),
          ...(input.replay.target ? { target: input.replay.target } : {}),
          ...(input.replay.name ? { replay: input.replay.name } : {}),
        },
      }
    : {}),
  };
}

function onInterrupted(input: OutcomeInput, base: DeliveryStatus): OutcomeResult {
  const { now, generation } = input;
  const number = base.lastAttempt!.number;
  if (input.interruptedAction === "dead-letter" && !input.replay) {
    return deadLetter(base, generation, now, "Drain", `attempt ${number} was interrupted by an operator shutdown (WEBHOOK_DRAIN_TIMEOUT_ACTION=dead-letter)`);
  }
  if (input.replay) {
    // The replay did not happen: back to where it was, no replay counted, lastReplay untouched
    // (a resumed bulk replay sees it was not done and does it).
    return { status: { ...base, phase: "DeadLettered", nextAttemptAt: undefined } };
  }
  return {
    status: withWaiting(
      { ...base, phase: base.phase === "Retrying" || (base.attempts ?? 0) > 0 ? "Retrying" : "Pending", nextAttemptAt: toRfc3339(now) },
      now,
      generation,
      "Interrupted",
      `attempt ${number} was interrupted by an operator shutdown; it resumes at once and does not count against maxAttempts`,
    ),
  };
}

/**
 * The final outcome of an attempt that delivered, not as a replay: what applyAttempt records as
 * `final` for it (onDelivered), without building the status. Stream mode acknowledges such a
 * message and keeps no status, so it asks only this; undefined for any other attempt.
 */
export function deliveredFinal(attempt: AttemptResult): Final | undefined {
  const c = attempt.classification;
  if (c === "interrupted" || c.verdict !== "delivered") return undefined;
  return { phase: "Succeeded", reason: "Delivered", message: `delivered (${describeAttempt(attempt)})` };
}

function onDelivered(input: OutcomeInput, base: DeliveryStatus): OutcomeResult {
  const { now, generation } = input;
  const desc = describeAttempt(input.attempt);
  const status: DeliveryStatus = {
    ...base,
    phase: "Succeeded",
    nextAttemptAt: undefined,
    // A replayed dead letter keeps its deadLetter record (why it was one): with it, retention
    // keeps the delivery as long as a dead letter (retention.deadLettered), replays and all.
    finishedAt: toRfc3339(now),
    conditions: setCondition(base.conditions, { type: SUCCEEDED, status: "True", reason: "Delivered", message: `delivered on attempt ${base.lastAttempt!.number} (${desc})${input.replay ? " by a replay" : ""}` }, now, generation),
  };
  return { status, final: deliveredFinal(input.attempt)! };
}

/** A replay that did not deliver: back to DeadLettered with one replay more, or Poison at maxReplays. */
function onReplayFailed(input: OutcomeInput, base: DeliveryStatus): OutcomeResult {
  const { now, generation, policy } = input;
  const desc = describeAttempt(input.attempt);
  const replays = (input.status?.replays ?? 0) + 1;
  // finishedAt stays when it first became a dead letter: a failed replay does not make it look
  // newer than it is to retention and to oldest-first eviction (the replay is in lastReplay).
  const failed: DeliveryStatus = { ...base, replays };
  if (replays >= policy.deadLetter.maxReplays) {
    return discard(failed, generation, now, "Poison", `replay ${replays} of ${policy.deadLetter.maxReplays} failed (${desc}): it will not be replayed again`);
  }
  const reason = input.status?.deadLetter?.reason ?? "Exhausted";
  const status: DeliveryStatus = {
    ...failed,
    phase: "DeadLettered",
    nextAttemptAt: undefined,
    conditions: setCondition(base.conditions, { type: SUCCEEDED, status: "False", reason, message: `replay ${replays} failed (${desc}); ${policy.deadLetter.maxReplays - replays} replays left` }, now, generation),
  };
  return { status, final: { phase: "DeadLettered", reason: "ReplayFailed", message: `replay failed (${desc})` } };
}

function onFailedForGood(input: OutcomeInput, base: DeliveryStatus, c: Classification): OutcomeResult {
  const { now, generation } = input;
  const number = base.lastAttempt!.number;
  const desc = describeAttempt(input.attempt);
  if (c.verdict === "gone") return deadLetter(base, generation, now, "Gone", `the endpoint answered 410 Gone on attempt ${number}`);
  return c.reason === "blocked" ?
      deadLetter(base, generation, now, "Blocked", `attempt ${number} was refused by the network guard: ${desc}`)
    : deadLetter(base, generation, now, "PermanentFailure", `attempt ${number} got ${desc}, which is not retried`);
}

function onRetryable(input: OutcomeInput, base: DeliveryStatus): OutcomeResult {
  const { now, generation, policy, attempt } = input;
  const number = base.lastAttempt!.number;
  const desc = describeAttempt(attempt);
  const next = retryDecision(policy.retry, base.attempts ?? 1, attempt, now, input.random);
  if (next.kind === "exhausted") return deadLetter(base, generation, now, "Exhausted", `all ${policy.retry.maxAttempts} attempts failed; the last got ${desc}`);
  return {
    status: withWaiting(
      { ...base, phase: "Retrying", nextAttemptAt: toRfc3339(next.at) },
      now,
      generation,
      "RetryScheduled",
      `attempt ${number} of ${policy.retry.maxAttempts} failed (${desc}); next attempt at ${toRfc3339(next.at)}`,
    ),
  };
}

function withWaiting(status: DeliveryStatus, now: number, generation: number | undefined, reason: string, message: string): DeliveryStatus {
  return { ...status, conditions: setCondition(status.conditions, { type: SUCCEEDED, status: "Unknown", reason, message }, now, generation) };
}

export function deadLetter(prev: DeliveryStatus | undefined, generation: number | undefined, now: number, reason: DeadLetterReason, message: string): OutcomeResult {
  return failed(prev, generation, now, "DeadLettered", reason, message);
}

export function discard(prev: DeliveryStatus | undefined, generation: number | undefined, now: number, reason: DiscardReason, message: string): OutcomeResult {
  return failed(prev, generation, now, "Discarded", reason, message);
}

/** A final phase other than Succeeded: the record (deadLetter or discard) and Succeeded=False. */
function failed(prev: DeliveryStatus | undefined, generation: number | undefined, now: number, phase: "DeadLettered" | "Discarded", reason: DeadLetterReason | DiscardReason, message: string): OutcomeResult {
  const base = prev ?? {};
  const record = { at: toRfc3339(now), reason, message };
  const status: DeliveryStatus = {
    ...base,
    observedGeneration: generation,
    phase,
    attempts: base.attempts ?? 0,
    nextAttemptAt: undefined,
    ...(phase === "DeadLettered" ? { deadLetter: record as NonNullable<DeliveryStatus["deadLetter"]> } : { discard: record as NonNullable<DeliveryStatus["discard"]> }),
    finishedAt: toRfc3339(now),
    conditions: setCondition(base.conditions, { type: SUCCEEDED, status: "False", reason, message }, now, generation),
  };
  return { status, final: { phase, reason, message } };
}

/** A delivery that waits for something the user must fix. */
export function waiting(prev: DeliveryStatus | undefined, generation: number | undefined, now: number, reason: WaitReason | EndpointWaitReason | OrderHold["reason"], message: string): DeliveryStatus {
  const base = prev ?? {};
  return withWaiting({ ...base, observedGeneration: generation, phase: base.phase ?? "Pending", attempts: base.attempts ?? 0 }, now, generation, reason, message);
}

/**
 * Whether `current` (read again after a write conflict) moved past `basis`, the status an
 * outcome was computed from: a newer attempt was recorded (by a replay, another worker, an old
 * leader) or the delivery became final. Such an outcome is dropped, never re-applied (but see
 * dropLateOutcome): a delivered event must not become a dead letter because a slower attempt
 * wrote second.
 */
export function movedPast(basis: DeliveryStatus | undefined, current: DeliveryStatus | undefined): boolean {
  if ((current?.lastAttempt?.number ?? 0) !== (basis?.lastAttempt?.number ?? 0)) return true;
  return isTerminalPhase(current?.phase) && current?.phase !== basis?.phase;
}

/**
 * Whether an outcome is dropped when `current` (read again after a write conflict) moved past
 * `basis`, the status it was computed from; `result` is the outcome computed again on `current`.
 * A delivered attempt on a delivery that is not final yet is the exception: the endpoint has the
 * event, so its success is recorded as the delivery's next attempt. Dropped, it would be sent
 * again (a new leader whose cache was behind an old leader's last failed attempt sent an event
 * twice that way). On a final delivery the outcome is dropped, success or not.
 */
export function dropLateOutcome(basis: DeliveryStatus | undefined, current: DeliveryStatus | undefined, result: OutcomeResult): boolean {
  if (!movedPast(basis, current)) return false;
  return result.final?.phase !== SUCCEEDED || isTerminalPhase(current?.phase);
}

/**
 * The outcome with only what the delivery's state needs (phase, counts, times, reasons) and no
 * free text: written when the API server refused the whole status, so the outcome is recorded
 * and the request is not sent again.
 */
export function essentials(r: OutcomeResult): OutcomeResult {
  const s = r.status;
  const attempt = (a: Attempt): Attempt => ({ number: a.number, startedAt: a.startedAt, durationMs: a.durationMs, outcome: a.outcome, ...(a.responseStatus !== undefined ? { responseStatus: a.responseStatus } : {}) });
  const status: DeliveryStatus = {
    ...(s.observedGeneration !== undefined ? { observedGeneration: s.observedGeneration } : {}),
    ...(s.phase ? { phase: s.phase } : {}),
    attempts: s.attempts ?? 0,
    ...(s.nextAttemptAt ? { nextAttemptAt: s.nextAttemptAt } : {}),
    ...(s.finishedAt ? { finishedAt: s.finishedAt } : {}),
    ...(s.replays !== undefined ? { replays: s.replays } : {}),
    ...(s.interruptions !== undefined ? { interruptions: s.interruptions } : {}),
    ...(s.lastAttempt ? { lastAttempt: attempt(s.lastAttempt) } : {}),
    ...(s.history ? { history: s.history.map(attempt) } : {}),
    ...(s.deadLetter ? { deadLetter: { at: s.deadLetter.at, reason: s.deadLetter.reason } } : {}),
    ...(s.discard ? { discard: { at: s.discard.at, reason: s.discard.reason } } : {}),
    ...(s.ordering ? { ordering: s.ordering } : {}),
    ...(s.conditions ? { conditions: s.conditions.map(({ message: _m, ...c }) => ({ ...c, message: "details omitted: the API server refused the full status (see the StatusWriteRefused Event)" })) } : {}),
  };
  return { status, ...(r.final ? { final: r.final } : {}) };
}
