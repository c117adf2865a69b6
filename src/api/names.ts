// Names users, scripts and dashboards depend on. Change none of them lightly.

export const GROUP = "hookline.dev";
export const VERSION = "v1alpha1";
export const API_VERSION = `${GROUP}/${VERSION}`;
export const CATEGORY = "hookline";

export const SUBSCRIPTION = {
  kind: "WebhookSubscription",
  listKind: "WebhookSubscriptionList",
  plural: "webhooksubscriptions",
  singular: "webhooksubscription",
  shortNames: ["whsub"],
} as const;

export const DELIVERY = {
  kind: "WebhookDelivery",
  listKind: "WebhookDeliveryList",
  plural: "webhookdeliveries",
  singular: "webhookdelivery",
  shortNames: ["whdel"],
} as const;

export const REPLAY = {
  kind: "WebhookReplay",
  listKind: "WebhookReplayList",
  plural: "webhookreplays",
  singular: "webhookreplay",
  shortNames: ["whrep"],
} as const;

export type KindNames = typeof SUBSCRIPTION | typeof DELIVERY | typeof REPLAY;

export const ANNOTATIONS = {
  /** On a delivery: replay this dead letter once; the value is the reason (>= 5 characters). */
  replay: "hookline.dev/replay",
  /** On a subscription: replay all of its dead letters; the value is the reason. */
  replayDeadLetters: "hookline.dev/replay-dead-letters",
  /** On a subscription, with replay-dead-letters: how many replays run at once (default 5, 1..50). */
  replayConcurrency: "hookline.dev/replay-concurrency",
  /** On a subscription: close its breaker and re-enable its endpoint now; the value is the reason. */
  resetEndpoint: "hookline.dev/reset-endpoint",
  /** Set by stream mode on the dead letters it creates: `<stream>/<sequence>` of the event's message. */
  streamMessage: "hookline.dev/stream-message",
  /** Set by stream mode on the dead letters it creates: the event's publish time, sent as `timestamp` (also by a replay). */
  eventTimestamp: "hookline.dev/event-timestamp",
  /** Set by stream mode on an ordered subscription's deliveries: `<stream>/<sequence>` of the event's message (the lane's order). */
  streamOrdered: "hookline.dev/stream-ordered",
} as const;

/** What each annotation does, for docs/api.md (the JSDoc above is not visible at run time). */
export const ANNOTATION_DOCS: Record<keyof typeof ANNOTATIONS, { on: string; value: string; what: string }> = {
  replay: { on: "WebhookDelivery", value: "the reason, 5..1024 characters", what: "Replay this dead letter once (one immediate attempt). The operator removes the annotation when handled; a shorter reason is refused with a Warning Event." },
  replayDeadLetters: { on: "WebhookSubscription", value: "the reason, 5..1024 characters", what: "Replay every dead letter of the subscription; progress and the summary in status.lastReplay. A delivery equal to one already pending is skipped (deduped)." },
  replayConcurrency: { on: "WebhookSubscription", value: "an integer, default 5, clamped to 1..50", what: "With replay-dead-letters: how many replays run at once." },
  resetEndpoint: { on: "WebhookSubscription", value: "the reason, 5..1024 characters", what: "Close the circuit breaker and re-enable the endpoint now (health Healthy, failures in a row 0); recorded as the EndpointReset Event and status.lastReset. The operator removes the annotation." },
  streamMessage: { on: "WebhookDelivery", value: "`<stream>/<sequence>`, set by the operator", what: "Stream mode: the JetStream message this dead letter was made from. A delivery with it and no status yet is never attempted (stream mode writes its status next)." },
  eventTimestamp: { on: "WebhookDelivery", value: "RFC 3339, set by the operator", what: "Stream mode: when the event was published; sent as the body's `timestamp` (also by a replay) instead of the delivery's creation time." },
  streamOrdered: { on: "WebhookDelivery", value: "`<stream>/<sequence>`, set by the operator", what: "Stream mode, a subscription with spec.ordering: the JetStream message this delivery was made from, one at a time in publish order. A lane goes by creation time, then (creation times are kept to the second) this sequence, then the name." },
};

export const LABEL_DOCS: Record<keyof typeof LABELS, string> = {
  subscription: "Set by the publish doors on every delivery they create: the subscription's name.",
  eventId: "Set by the publish doors: the event id (a readable prefix and a hash when the id is not a valid label value).",
  provider:
    "Set by you on a WebhookSubscription: who runs its endpoint (stripe, github, ...). Its attempts and breaker metrics carry it as the `provider` label when the value is in HOOKLINE_METRIC_PROVIDERS (compared lower-case), else as `generic`, so the label's values stay few.",
};

/**
 * The event type of `kubectl hookline ping`: delivered to the subscription it names whatever
 * its eventTypes list, so a ping tests the endpoint, not the filter.
 */
export const PING_EVENT_TYPE = "hookline.ping";

export const LABELS = {
  /** Set by the publish doors on every delivery they create. */
  subscription: "hookline.dev/subscription",
  eventId: "hookline.dev/event-id",
  /** Set by users on a subscription: the `provider` label of its metrics (core/provider.ts). */
  provider: "hookline.dev/provider",
} as const;

/** The field manager Hookline writes with, visible in managedFields. */
export const FIELD_MANAGER = "hookline";

/** Payloads above this many bytes (serialized JSON) are refused or Discarded. */
export const MAX_PAYLOAD_BYTES = 256 * 1024;

/**
 * Payloads nested deeper than this many arrays and objects are refused or Discarded
 * (InvalidPayload): JSON.stringify overflows the stack at about 4,000 levels, the API server
 * stores up to 9,998 (its JSON decoder stops at 10,000, the delivery object takes two), and
 * no receiver needs more than a few dozen.
 */
export const MAX_PAYLOAD_DEPTH = 1000;

/**
 * Attempts kept in status.history: every attempt up to the subscription's retry.maxAttempts plus
 * deadLetter.maxReplays (at least HISTORY_MIN, at most HISTORY_MAX), the oldest dropped first,
 * and never more than HISTORY_MAX_BYTES serialized (docs/capacity.md).
 */
export const HISTORY_MIN = 10;
export const HISTORY_MAX = 64;
export const HISTORY_MAX_BYTES = 32 * 1024;
/** The error text of an attempt in status.history (lastAttempt keeps up to 1024). */
export const HISTORY_ERROR_MAX_LENGTH = 256;

export const REPLAY_REASON_MIN_LENGTH = 5;
/** The longest replay reason status can hold; a longer one is refused like a short one. */
export const REPLAY_REASON_MAX_LENGTH = 1024;
export const REPLAY_CONCURRENCY = { default: 5, min: 1, max: 50 } as const;

export const DELIVERY_PHASES = ["Pending", "Retrying", "Succeeded", "DeadLettered", "Discarded"] as const;
export type DeliveryPhase = (typeof DELIVERY_PHASES)[number];
export function isTerminalPhase(phase: string | undefined): boolean {
  return phase === "Succeeded" || phase === "DeadLettered" || phase === "Discarded";
}

export const DEAD_LETTER_REASONS = ["Exhausted", "PermanentFailure", "Gone", "BreakerOpen", "Drain", "Blocked", "EventTypeNotSubscribed", "Expired"] as const;
export type DeadLetterReason = (typeof DEAD_LETTER_REASONS)[number];

export const DISCARD_REASONS = ["Poison", "PayloadTooLarge", "EventTypeNotSubscribed", "InvalidSpec", "InvalidPayload", "Duplicate"] as const;
export type DiscardReason = (typeof DISCARD_REASONS)[number];

/** The longest spec.filter (a CEL expression, core/filter.ts) the CRD accepts, in characters. */
export const FILTER_MAX_LENGTH = 4096;

/**
 * The notifications a subscription's spec.notify may ask for, each the event type it is sent as
 * (core of the `hookline.` types: delivered whatever the receiving subscription's eventTypes).
 */
export const NOTIFY_EVENTS = {
  "endpoint.unhealthy": "hookline.endpoint.unhealthy",
  "endpoint.breaker_opened": "hookline.endpoint.breaker_opened",
  "endpoint.throttled": "hookline.endpoint.throttled",
  "delivery.dead_lettered": "hookline.delivery.dead_lettered",
} as const;
export type NotifyEvent = keyof typeof NOTIFY_EVENTS;
/** Event types Hookline itself sends (ping, notifications): never filtered out by eventTypes, never notified about. */
export const OPERATOR_EVENT_PREFIX = "hookline.";
