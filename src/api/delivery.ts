// WebhookDelivery: one event to one subscription. The producer creates it; its name is the
// producer's idempotency key. The spec is immutable: an event does not change after the fact.
import { z } from "zod";
import { conditions, objectName, timestamp, withRules } from "./fields.js";
import { DEAD_LETTER_REASONS, DELIVERY_PHASES, DISCARD_REASONS, HISTORY_ERROR_MAX_LENGTH, HISTORY_MAX, REPLAY_REASON_MAX_LENGTH } from "./names.js";
import { traceContextSchema } from "./trace-context.js";

/** What an event id may hold: it is sent as a header value (visible ASCII, inner spaces; RE2 and JavaScript alike). */
export const EVENT_ID_PATTERN = "^[!-~]([ -~]*[!-~])?$";
export const EVENT_ID_MESSAGE = "must be printable ASCII with no leading or trailing space: it is sent as the webhook-id header";

const immutable = (field: string) => ({
  rule: "self == oldSelf",
  message: `${field} is immutable: create a new WebhookDelivery instead`,
});

export const deliverySpecSchema = withRules(
  z.object({
    subscriptionRef: withRules(
      z.object({ name: objectName("Name of a WebhookSubscription in the same namespace.") }),
      { description: "The subscription this event is delivered to." },
      [immutable("subscriptionRef")],
    ),
    eventType: withRules(
      z.string().min(1).max(256).regex(/^[A-Za-z0-9][A-Za-z0-9_.:/-]*$/, { message: "must be a dotted name such as order.paid" }),
      { description: "Type of the event, e.g. order.paid. Sent as `type` in the body." },
      [immutable("eventType")],
    ),
    eventId: withRules(
      z.string().min(1).max(256),
      {
        description:
          "Id of the event, sent as the webhook id (the webhook-id header) on every attempt and replay: printable ASCII, spaces only between other characters, at most 256 characters. Default: metadata.uid.",
      },
      [
        immutable("eventId"),
        // A header value cannot carry control characters or non-ASCII as they are, and HTTP
        // strips blanks at its ends: such an id would fail every attempt, or reach the receiver
        // different from the id that was signed.
        { rule: `self.matches('${EVENT_ID_PATTERN}')`, message: EVENT_ID_MESSAGE, check: (id) => new RegExp(EVENT_ID_PATTERN).test(id) },
      ],
    ).optional(),
    payload: z
      .unknown()
      .optional()
      .meta({
        description: "The event data: any JSON value, sent as `data` in the body. Above 256 KiB serialized the delivery is Discarded (PayloadTooLarge), nested deeper than 1000 arrays and objects it is Discarded (InvalidPayload).",
        "x-kubernetes-preserve-unknown-fields": true,
      }),
    traceContext: traceContextSchema.optional(),
  }),
  { description: "One event for one subscription. Immutable after create." },
  [
    {
      rule: "has(self.eventId) == has(oldSelf.eventId)",
      message: "eventId is immutable: create a new WebhookDelivery instead",
      fieldPath: ".eventId",
    },
    {
      rule: "has(self.traceContext) == has(oldSelf.traceContext)",
      message: "traceContext is immutable: create a new WebhookDelivery instead",
      fieldPath: ".traceContext",
    },
    {
      // CEL cannot read a schemaless field, but it can compare whole objects: when every typed
      // field is unchanged and the spec still differs, the payload changed.
      rule:
        "self == oldSelf || self.subscriptionRef != oldSelf.subscriptionRef || self.eventType != oldSelf.eventType || has(self.eventId) != has(oldSelf.eventId) || (has(self.eventId) && self.eventId != oldSelf.eventId) || has(self.traceContext) != has(oldSelf.traceContext) || (has(self.traceContext) && self.traceContext != oldSelf.traceContext)",
      message: "payload is immutable: create a new WebhookDelivery instead",
      fieldPath: ".payload",
    },
  ],
);

export const ATTEMPT_OUTCOMES = ["Succeeded", "Failed", "Gone", "PermanentFailure", "Blocked", "Interrupted"] as const;
export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number];

const attemptFields = {
  number: z.int().min(1).meta({ description: "1 for the first attempt. Interrupted attempts and replays are numbered too." }),
  startedAt: timestamp("When the request started."),
  durationMs: z.int().min(0).meta({ description: "From start to the response headers, or to the error." }),
  responseStatus: z.int().min(100).max(599).optional().meta({ description: "HTTP status of the response, if one arrived." }),
  error: z.string().max(1024).optional().meta({ description: "Why no usable response arrived (timeout, connection refused, ...). Never contains secrets." }),
  outcome: z.enum(ATTEMPT_OUTCOMES).meta({ description: "What the attempt meant for the delivery." }),
  reason: z.string().max(64).optional().meta({ description: "Classification, as in the metrics: http_2xx, http_5xx, timeout, network, dns, ..." }),
  replay: z.boolean().optional().meta({ description: "True when the attempt was a replay." }),
  target: z.string().max(253).optional().meta({ description: "A replay sent to another subscription (a WebhookReplay's spec.target): its name." }),
};

export const attemptSchema = z.object(attemptFields).meta({ description: "One attempt to deliver." });

/** An attempt as status.history keeps it: its error text shorter, so the whole history fits the object's budget. */
export const historyAttemptSchema = z
  .object({ ...attemptFields, error: z.string().max(HISTORY_ERROR_MAX_LENGTH).optional().meta({ description: `Why no usable response arrived (first ${HISTORY_ERROR_MAX_LENGTH} characters; lastAttempt.error has up to 1024).` }) })
  .meta({ description: "One attempt to deliver." });
export type Attempt = z.output<typeof attemptSchema>;

export const deliveryStatusSchema = z
  .object({
    observedGeneration: z.int().min(0).optional().meta({ description: "The .metadata.generation the operator last acted on." }),
    phase: z
      .enum(DELIVERY_PHASES)
      .optional()
      .meta({
        description:
          "Pending (not attempted yet, or waiting for its subscription, Secret or endpoint), Retrying, Succeeded, DeadLettered or Discarded. Absent until the operator first writes status.",
      }),
    attempts: z.int().min(0).optional().meta({ description: "Attempts counted against retry.maxAttempts." }),
    nextAttemptAt: timestamp("When the next attempt is due.").optional(),
    lastAttempt: attemptSchema.optional(),
    history: z
      .array(historyAttemptSchema)
      .max(HISTORY_MAX)
      .optional()
      .meta({ description: `Attempts, oldest first: every attempt up to the subscription's retry.maxAttempts plus deadLetter.maxReplays (at least 10, at most ${HISTORY_MAX}; the oldest go first), within 32 KiB.` }),
    deadLetter: z
      .object({
        at: timestamp("When the delivery was dead-lettered."),
        reason: z.enum(DEAD_LETTER_REASONS).meta({ description: "Exhausted, PermanentFailure, Gone, BreakerOpen, Drain, Blocked, EventTypeNotSubscribed (the subscription no longer lists the event type: replay it after adding the type back) or Expired (stream mode: the event waited in the stream longer than HOOKLINE_STREAM_MAX_AGE_MS)." }),
        message: z.string().max(1024).optional().meta({ description: "Details." }),
      })
      .optional()
      .meta({ description: "Set when the delivery is dead-lettered; kept after a successful replay, as the record of why it was one." }),
    discard: z
      .object({
        at: timestamp("When the delivery was discarded."),
        reason: z.enum(DISCARD_REASONS).meta({ description: "Poison, PayloadTooLarge, EventTypeNotSubscribed, InvalidSpec, InvalidPayload or Duplicate (a dead letter a replay deduped: its twin, same webhook id, payload and destination, carries the event)." }),
        message: z.string().max(1024).optional().meta({ description: "Details." }),
      })
      .optional()
      .meta({ description: "Set when the delivery is discarded: it will not be attempted or replayed again." }),
    replays: z.int().min(0).optional().meta({ description: "Failed replays so far; at deadLetter.maxReplays the delivery is Discarded (Poison)." }),
    lastReplay: z
      .object({
        reason: z.string().max(REPLAY_REASON_MAX_LENGTH).meta({ description: "The reason given for the replay." }),
        at: timestamp("When the replay was attempted."),
        requestId: z.string().max(128).optional().meta({ description: "The bulk replay or WebhookReplay this was part of (the subscription's status.lastReplay.id, or the WebhookReplay's metadata.uid)." }),
        result: z.enum(["Succeeded", "Failed", "Deduped"]).optional().meta({ description: "Succeeded, Failed, or Deduped (not sent: an equal delivery, same webhook id and payload, was pending or replayed by the same replay)." }),
        dedupedBy: z.string().max(253).optional().meta({ description: "Deduped: the delivery whose replay stands for this one (absent when the equal one was pending)." }),
        target: z.string().max(253).optional().meta({ description: "Sent to this subscription instead of the delivery's own (WebhookReplay spec.target)." }),
        replay: z.string().max(253).optional().meta({ description: "The WebhookReplay this was part of (its name)." }),
      })
      .optional()
      .meta({ description: "The last replay of this delivery." }),
    interruptions: z.int().min(0).optional().meta({ description: "Attempts cut short by an operator shutdown; not counted against maxAttempts." }),
    finishedAt: timestamp("When the delivery reached Succeeded, DeadLettered or Discarded. Retention counts from here (a replayed dead letter that was delivered keeps retention.deadLettered; a failed replay leaves it unchanged).").optional(),
    ordering: z
      .object({
        key: z.string().max(256).meta({ description: "The subscription's spec.ordering.key when it was recorded." }),
        value: z.string().max(256).meta({ description: "The delivery's value at the key, as JSON (a long one as sha256:<hex>)." }),
      })
      .optional()
      .meta({ description: "The ordering lane of the delivery (subscriptions with spec.ordering): a dead letter with it blocks the deliveries of the same value." }),
    conditions: conditions("Succeeded: True when delivered, False when dead-lettered or discarded (the reason says why), Unknown while pending.").optional(),
  })
  .meta({ description: "Observed state of the delivery." });

export type DeliverySpec = z.output<typeof deliverySpecSchema>;
export type DeliveryStatus = z.output<typeof deliveryStatusSchema>;
