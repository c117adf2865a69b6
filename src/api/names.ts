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

export const ANNOTATIONS = {
  /** On a delivery: replay this dead letter once; the value is the reason (>= 5 characters). */
  replay: "hookline.dev/replay",
  /** On a subscription: replay all of its dead letters; the value is the reason. */
  replayDeadLetters: "hookline.dev/replay-dead-letters",
  /** On a subscription, with replay-dead-letters: how many replays run at once (default 5, 1..50). */
  replayConcurrency: "hookline.dev/replay-concurrency",
} as const;

export const LABELS = {
  /** Set by the publish doors on every delivery they create. */
  subscription: "hookline.dev/subscription",
  eventId: "hookline.dev/event-id",
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

/** Attempts kept in status.history. */
export const HISTORY_LIMIT = 10;

export const REPLAY_REASON_MIN_LENGTH = 5;
/** The longest replay reason status can hold; a longer one is refused like a short one. */
export const REPLAY_REASON_MAX_LENGTH = 1024;
export const REPLAY_CONCURRENCY = { default: 5, min: 1, max: 50 } as const;

export const DELIVERY_PHASES = ["Pending", "Retrying", "Succeeded", "DeadLettered", "Discarded"] as const;
export type DeliveryPhase = (typeof DELIVERY_PHASES)[number];
export function isTerminalPhase(phase: string | undefined): boolean {
  return phase === "Succeeded" || phase === "DeadLettered" || phase === "Discarded";
}

export const DEAD_LETTER_REASONS = ["Exhausted", "PermanentFailure", "Gone", "BreakerOpen", "Drain", "Blocked", "EventTypeNotSubscribed"] as const;
export type DeadLetterReason = (typeof DEAD_LETTER_REASONS)[number];

export const DISCARD_REASONS = ["Poison", "PayloadTooLarge", "EventTypeNotSubscribed", "InvalidSpec", "InvalidPayload"] as const;
export type DiscardReason = (typeof DISCARD_REASONS)[number];
