// The typed failures of a publish. Every door maps them the same way: input problems name the
// field (HTTP 400/413, CLI exit 2), an id reused for a different event is a conflict (409), and
// a publish cut short by the API server says what was created so far and that retrying with
// the same id is safe.
import type { PublishResult } from "./result.js";

/** The event is malformed: `field` names the part of the input at fault. */
export class PublishInputError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
    this.name = "PublishInputError";
  }
}

/** The serialized data is above the limit (MAX_PAYLOAD_BYTES). */
export class PayloadTooLargeError extends PublishInputError {
  constructor(
    readonly size: number,
    readonly limit: number,
  ) {
    super("data", `data is ${size} bytes serialized as JSON; the limit is ${limit} bytes`);
    this.name = "PayloadTooLargeError";
  }
}

/** A delivery with the event's name exists but carries another event: the id was reused. */
export class IdempotencyConflictError extends Error {
  constructor(
    readonly id: string,
    readonly delivery: string,
    readonly subscription: string,
    readonly difference: "eventType" | "eventId" | "subscription" | "payload",
  ) {
    super(`event id "${id}" was already published with a different ${difference === "payload" ? "data" : difference} (delivery ${delivery}); use a new id for a new event`);
    this.name = "IdempotencyConflictError";
  }
}

export interface PublishFailure {
  subscription: string;
  name: string;
  status: number | undefined;
  message: string;
}

/** Some deliveries could not be created. Retrying with the same id creates only the missing ones. */
export class PublishFailedError extends Error {
  constructor(
    readonly result: PublishResult,
    readonly failures: PublishFailure[],
  ) {
    const first = failures[0];
    super(
      `${failures.length} of ${failures.length + result.deliveries.length} deliveries of event "${result.id}" could not be created` +
        `${first ? ` (${first.subscription}: ${first.message})` : ""}; publish again with the same id to finish: nothing is duplicated`,
    );
    this.name = "PublishFailedError";
  }
}

/** Why a subscription takes no new delivery now. */
export interface FullSubscription {
  subscription: string;
  /** The delivery that was not created (publish again with the same id to create it). */
  name: string;
  /** MaxPending: the subscription's spec.maxPending; ResourceQuota: the namespace's quota on deliveries. */
  reason: "MaxPending" | "ResourceQuota";
  /** Pending deliveries counted (at least this many), for MaxPending. */
  pending?: number;
  maxPending?: number;
  message: string;
}

/** How long a producer is told to wait before publishing a refused event again. */
export const BACKLOG_RETRY_AFTER_SECONDS = 10;

/**
 * Backpressure: some matching subscriptions hold their spec.maxPending pending deliveries, or the
 * namespace's ResourceQuota is used up. Deliveries to the other subscriptions were created;
 * publishing again with the same id later creates only the missing ones.
 */
export class BacklogFullError extends PublishFailedError {
  readonly retryAfterSeconds = BACKLOG_RETRY_AFTER_SECONDS;
  constructor(
    result: PublishResult,
    readonly full: FullSubscription[],
  ) {
    super(
      result,
      full.map(({ subscription, name, message }) => ({ subscription, name, status: 429, message })),
    );
    const first = full[0]!;
    this.message =
      `${full.length === 1 ? `subscription ${first.subscription} takes` : `${full.length} subscriptions take`} no new delivery now (${first.message}); ` +
      `publish event "${result.id}" again with the same id in ${BACKLOG_RETRY_AFTER_SECONDS} s: ${result.deliveries.length} deliveries to other subscriptions were created and nothing is duplicated`;
    this.name = "BacklogFullError";
  }
}
