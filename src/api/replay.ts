// WebhookReplay: a declarative, auditable replay of finished deliveries. The spec says which
// (subscriptions, event types, dead-letter reasons, a time window on finishedAt, phases), where
// to (their own subscription, or a target), how fast (concurrency) and why (reason); it is
// immutable after create, so the object stays a record of what was asked. The status is the
// record of what happened.
import { z } from "zod";
import { conditions, int, objectName, timestamp, withRules } from "./fields.js";
import { DEAD_LETTER_REASONS, REPLAY_CONCURRENCY, REPLAY_REASON_MAX_LENGTH, REPLAY_REASON_MIN_LENGTH } from "./names.js";
import { EVENT_TYPE_PATTERN } from "./subscription.js";

export const REPLAY_SOURCE_PHASES = ["DeadLettered", "Succeeded"] as const;
export const REPLAY_PHASES = ["Pending", "Running", "Completed", "Failed"] as const;
export type ReplayObjectPhase = (typeof REPLAY_PHASES)[number];

/** Most subscriptions one replay may name (each is one lookup; the list is a set). */
export const MAX_REPLAY_SUBSCRIPTIONS = 256;

const validTime = (s: string) => !Number.isNaN(Date.parse(s)) && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i.test(s);
const instant = (description: string) =>
  z
    .string()
    .max(64)
    .refine(validTime, { message: "must be an RFC 3339 time such as 2026-11-30T06:00:00Z" })
    .meta({ description, format: "date-time" });

export const replaySpecSchema = withRules(
  z.object({
    reason: withRules(
      z.string().min(REPLAY_REASON_MIN_LENGTH).max(REPLAY_REASON_MAX_LENGTH),
      { description: `Why this replay is run (an incident, a ticket), ${REPLAY_REASON_MIN_LENGTH} to ${REPLAY_REASON_MAX_LENGTH} characters. Recorded on every delivery it replays (status.lastReplay.reason).` },
      [
        {
          rule: `self.trim().size() >= ${REPLAY_REASON_MIN_LENGTH}`,
          message: `reason must have at least ${REPLAY_REASON_MIN_LENGTH} characters besides spaces, e.g. "INC-42: acme endpoint fixed"`,
          check: (r) => r.trim().length >= REPLAY_REASON_MIN_LENGTH,
        },
      ],
    ),
    selector: z
      .object({
        subscriptions: z
          .array(objectName("Name of a WebhookSubscription in this namespace."))
          .max(MAX_REPLAY_SUBSCRIPTIONS)
          .optional()
          .meta({ description: "Deliveries of these subscriptions. Omitted: every subscription in the namespace.", "x-kubernetes-list-type": "set" }),
        eventTypes: z
          .array(z.string().min(1).max(256).regex(new RegExp(EVENT_TYPE_PATTERN), { message: 'must be an event type, a prefix such as "order.*", or "*"' }))
          .max(100)
          .optional()
          .meta({ description: 'Deliveries of these event types: exact names, a trailing wildcard such as "order.*", or "*". Omitted: every type.', "x-kubernetes-list-type": "set" }),
        reasons: z
          .array(z.enum(DEAD_LETTER_REASONS))
          .max(DEAD_LETTER_REASONS.length)
          .optional()
          .meta({ description: "Dead letters with these reasons (status.deadLetter.reason). Omitted: every reason. Needs DeadLettered in phases.", "x-kubernetes-list-type": "set" }),
      })
      .default({})
      .meta({ description: "Which finished deliveries of the namespace to replay. Omitted: all of them (in the phases below)." }),
    finishedAfter: instant("Only deliveries that finished (status.finishedAt) at or after this time (RFC 3339).").optional(),
    finishedBefore: instant("Only deliveries that finished before this time (RFC 3339). Whatever it says, a replay takes only deliveries that finished before it started.").optional(),
    phases: z
      .array(z.enum(REPLAY_SOURCE_PHASES))
      .min(1)
      .max(2)
      .default(["DeadLettered"])
      .meta({
        description: "DeadLettered: replay dead letters (a delivered one becomes Succeeded). Succeeded: send delivered events again (they stay Succeeded; the attempt is recorded in their history).",
        "x-kubernetes-list-type": "set",
      }),
    target: z
      .object({ subscription: objectName("Name of a WebhookSubscription in this namespace.") })
      .optional()
      .meta({
        description:
          "Send to this subscription instead of each delivery's own: a new attempt of the same event (same webhook id) to the target's URL, signed with the target's secret, within the target's limits. The source delivery keeps its phase; the attempt is recorded in its history and status.lastReplay.",
      }),
    concurrency: int(REPLAY_CONCURRENCY.min, REPLAY_CONCURRENCY.max, "Replays in flight at once (a batch); the endpoints' own limits (maxInFlight, rate limit, Retry-After) apply as well.").default(REPLAY_CONCURRENCY.default),
    dryRun: z.boolean().default(false).meta({ description: "true: count what the selector matches (status.matched) and send nothing." }),
  }),
  { description: "What to replay, where to and why. Immutable after create: a replay is an audit record; create a new one to replay again." },
  [
    {
      rule: "self == oldSelf",
      message: "spec is immutable: a WebhookReplay is an audit record; create a new WebhookReplay instead",
    },
    {
      rule: "!has(self.finishedAfter) || !has(self.finishedBefore) || timestamp(self.finishedAfter) < timestamp(self.finishedBefore)",
      message: "finishedBefore must be later than finishedAfter",
      fieldPath: ".finishedBefore",
      check: (s) => s.finishedAfter === undefined || s.finishedBefore === undefined || !validTime(s.finishedAfter) || !validTime(s.finishedBefore) || Date.parse(s.finishedAfter) < Date.parse(s.finishedBefore),
    },
    {
      rule: "!has(self.selector) || !has(self.selector.reasons) || size(self.selector.reasons) == 0 || !has(self.phases) || 'DeadLettered' in self.phases",
      message: "selector.reasons are dead-letter reasons: they need DeadLettered in phases",
      fieldPath: ".selector.reasons",
      check: (s) => !s.selector.reasons?.length || s.phases.includes("DeadLettered"),
    },
  ],
);

export const replayStatusSchema = z
  .object({
    observedGeneration: z.int().min(0).optional().meta({ description: "The .metadata.generation the operator last acted on." }),
    phase: z.enum(REPLAY_PHASES).optional().meta({ description: "Pending (not started: waiting for its target or for an earlier replay of the same subscriptions), Running, Completed, or Failed (it cannot run: see the Complete condition)." }),
    matched: z.int().min(0).optional().meta({ description: "Deliveries the selector matched so far. When Completed: attempted + skipped." }),
    attempted: z.int().min(0).optional().meta({ description: "Matched deliveries replayed or deduped: succeeded + failed + deduped." }),
    succeeded: z.int().min(0).optional().meta({ description: "Replays the endpoint accepted (2xx)." }),
    failed: z.int().min(0).optional().meta({ description: "Replays that failed (a dead letter goes back to DeadLettered, or Discarded as Poison at deadLetter.maxReplays)." }),
    deduped: z.int().min(0).optional().meta({ description: "Matched deliveries not sent because an equal one (same webhook id and payload, same destination) was replayed by this replay or is pending: each is marked on its status.lastReplay (result Deduped, dedupedBy)." }),
    skipped: z.int().min(0).optional().meta({ description: "Matched deliveries not replayed: changed or deleted since they matched, or their destination could not take them (paused, missing, invalid, its Secret missing); an Event says why." }),
    startedAt: timestamp("When the replay started; it takes only deliveries that finished before this.").optional(),
    finishedAt: timestamp("When it completed or failed.").optional(),
    cursor: z.string().max(600).optional().meta({ description: "Progress marker: the last delivery taken, so a restarted or new leader resumes after it." }),
    inFlight: z.array(z.string().max(253)).max(REPLAY_CONCURRENCY.max).optional().meta({ description: "Deliveries of the batch being replayed, so a restart neither repeats nor loses them." }),
    conditions: conditions(
      "Complete: True when it completed (reason Completed or DryRun), False when it failed (reason InvalidSpec), Unknown before. Progressing: True while it runs; False while it waits (reason TargetNotFound, TargetInvalid, TargetPaused or Queued, the message naming the field or the other replay) and once it ended.",
    ).optional(),
  })
  .meta({ description: "What the replay did." });

export type ReplaySpec = z.output<typeof replaySpecSchema>;
export type ReplayStatus = z.output<typeof replayStatusSchema>;
