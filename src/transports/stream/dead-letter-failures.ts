// Stream mode's failures to record a final outcome (a dead letter or a discard) as a
// WebhookDelivery, said where an operator looks: a Warning Event on the subscription, a counter
// by reason and an error log line naming what is missing (the permission, the quota). The
// message itself is kept in the stream and tried again (subscription-stream.ts), so nothing is
// lost; without this, a missing `create` on webhookdeliveries was a warning per retry and nothing
// else, for ever.
import type { Logger } from "pino";
import { ApiError } from "../../kube/client.js";
import type { EventSink } from "../../kube/events.js";
import type { Metrics } from "../../observability/metrics.js";
import type { Caches } from "../../delivery/caches.js";
import { subscriptionRef } from "../../delivery/objects.js";

/** forbidden: RBAC; quota: a ResourceQuota; refused: another 4xx; error: an outage (or the names taken). */
export type RecordFailure = "forbidden" | "quota" | "refused" | "error";

/** The RBAC permission a dead letter needs, as the log names it. */
export const CREATE_PERMISSION = "create webhookdeliveries.hookline.dev";

/** The same subscription and reason is logged at most this often (the counter and the Event count every one). */
const LOG_EVERY_MS = 60_000;

/** Why a create was refused: RBAC, a ResourceQuota (also a 403), another refusal, or an outage. */
export function classifyRecordFailure(err: unknown): RecordFailure {
  if (!(err instanceof ApiError)) return "error";
  if (err.status === 403) return /exceeded quota/i.test(err.message) ? "quota" : "forbidden";
  return err.isRefused ? "refused" : "error";
}

export interface DeadLetterFailuresDeps {
  caches: Caches;
  events: EventSink;
  metrics: Metrics;
  log: Logger;
  now?: () => number;
}

export class DeadLetterFailures {
  /** Last log line and failures since, by subscription key and reason. */
  private readonly logged = new Map<string, { at: number; since: number }>();

  constructor(private readonly d: DeadLetterFailuresDeps) {}

  /** A final outcome of `namespace/subscription` could not be recorded because of `err`. */
  report(namespace: string, subscription: string, err: unknown): void {
    const reason = classifyRecordFailure(err);
    const subKey = `${namespace}/${subscription}`;
    this.d.metrics.streamDeadLetterFailures.inc({ namespace, subscription, reason });
    const what = describe(namespace, reason, err);
    const sub = this.d.caches.subscription(subKey);
    // Folded by the recorder: one Event per subscription and reason per window, not one per message.
    if (sub) this.d.events.record(subscriptionRef(sub), "Warning", "DeadLetterNotRecorded", `a stream message's dead letter cannot be created: ${what}. The message is kept in the stream and tried again; nothing is lost`);
    const now = (this.d.now ?? Date.now)();
    const key = `${subKey}\u0000${reason}`;
    const last = this.logged.get(key);
    if (last && now - last.at < LOG_EVERY_MS) {
      last.since++;
      return;
    }
    if (this.logged.size > 10_000) this.logged.clear();
    this.logged.set(key, { at: now, since: 0 });
    this.d.log.error(
      { subscription: subKey, reason, ...(reason === "forbidden" ? { permission: CREATE_PERMISSION } : {}), failuresSinceLastLog: last?.since ?? 0, err: (err as Error).message },
      `stream mode: dead letters of this subscription cannot be created: ${what}; the messages are kept and tried again`,
    );
  }
}

function describe(namespace: string, reason: RecordFailure, err: unknown): string {
  switch (reason) {
    case "forbidden":
      return `the operator's ServiceAccount may not create webhookdeliveries in namespace ${namespace} (RBAC: ${CREATE_PERMISSION}; the chart grants it when stream mode is on)`;
    case "quota":
      return `a ResourceQuota of namespace ${namespace} refuses more webhookdeliveries (count/webhookdeliveries.hookline.dev)`;
    case "refused":
      // Status and reason only: the API server's message may quote the payload.
      return `the API server refused it (HTTP ${(err as ApiError).status} ${(err as ApiError).reason})`;
    case "error":
      return err instanceof ApiError ? `the API server failed (HTTP ${err.status} ${err.reason})` : `it failed: ${(err as Error).message}`;
  }
}
