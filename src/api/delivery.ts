// WebhookDelivery: one event to one subscription. The producer creates it; its name is the
// producer's idempotency key. The spec is immutable: an event does not change after the fact.
import { z } from "zod";
import { conditions, objectName, timestamp, withRules } from "./fields.js";
import { DEAD_LETTER_REASONS, DELIVERY_PHASES, DISCARD_REASONS, REPLAY_REASON_MAX_LENGTH } from "./names.js";
import { traceContextSchema } from "./trace-context.js";

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
      { description: "Id of the event, sent as the webhook id on every attempt and replay. Default: metadata.uid." },
      [immutable("eventId")],
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

export const attemptSchema = z
  .object({
    number: z.int().min(1).meta({ description: "1 for the first attempt. Interrupted attempts and replays are numbered too." }),
    startedAt: timestamp("When the request started."),
    durationMs: z.int().min(0).meta({ description: "From start to the response headers, or to the error." }),
    responseStatus: z.int().min(100).max(599).optional().meta({ description: "HTTP status of the response, if one arrived." }),
    error: z.string().max(1024).optional().meta({ description: "Why no usable response arrived (timeout, connection refused, ...). Never contains secrets." }),
    outcome: z.enum(ATTEMPT_OUTCOMES).meta({ description: "What the attempt meant for the delivery." }),
    reason: z.string().max(64).optional().meta({ description: "Classification, as in the metrics: http_2xx, http_5xx, timeout, network, dns, ..." }),
    replay: z.boolean().optional().meta({ description: "True when the attempt was a replay." }),
  })
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
    history: z.array(attemptSchema).max(10).optional().meta({ description: "The last 10 attempts, oldest first." }),
    deadLetter: z
      .object({
        at: timestamp("When the delivery was dead-lettered."),
        reason: z.enum(DEAD_LETTER_REASONS).meta({ description: "Exhausted, PermanentFailure, Gone, BreakerOpen, Drain, Blocked or EventTypeNotSubscribed (the subscription no longer lists the event type: replay it after adding the type back)." }),
        message: z.string().max(1024).optional().meta({ description: "Details." }),
      })
      .optional()
      .meta({ description: "Set when the delivery is dead-lettered." }),
    discard: z
      .object({
        at: timestamp("When the delivery was discarded."),
        reason: z.enum(DISCARD_REASONS).meta({ description: "Poison, PayloadTooLarge, EventTypeNotSubscribed, InvalidSpec or InvalidPayload." }),
        message: z.string().max(1024).optional().meta({ description: "Details." }),
      })
      .optional()
      .meta({ description: "Set when the delivery is discarded: it will not be attempted or replayed again." }),
    replays: z.int().min(0).optional().meta({ description: "Failed replays so far; at deadLetter.maxReplays the delivery is Discarded (Poison)." }),
    lastReplay: z
      .object({
        reason: z.string().max(REPLAY_REASON_MAX_LENGTH).meta({ description: "The reason given for the replay." }),
        at: timestamp("When the replay was attempted."),
        requestId: z.string().max(128).optional().meta({ description: "The bulk replay this was part of (see the subscription's status.lastReplay.id)." }),
        result: z.enum(["Succeeded", "Failed", "Deduped"]).optional().meta({ description: "Succeeded, Failed, or Deduped (skipped: an equal delivery was pending)." }),
      })
      .optional()
      .meta({ description: "The last replay of this delivery." }),
    interruptions: z.int().min(0).optional().meta({ description: "Attempts cut short by an operator shutdown; not counted against maxAttempts." }),
    finishedAt: timestamp("When the delivery reached Succeeded, DeadLettered or Discarded. Retention counts from here.").optional(),
    conditions: conditions("Succeeded: True when delivered, False when dead-lettered or discarded (the reason says why), Unknown while pending.").optional(),
  })
  .meta({ description: "Observed state of the delivery." });

export type DeliverySpec = z.output<typeof deliverySpecSchema>;
export type DeliveryStatus = z.output<typeof deliveryStatusSchema>;
