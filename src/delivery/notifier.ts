// spec.notify: tell a subscription's owner when its endpoint fails (docs/operations.md,
// "Notifications"; ADR 0016). Each change of state, not each attempt, becomes one event,
// published as a WebhookDelivery to the subscription spec.notify names: delivered by the same
// engine, with that subscription's retries, breaker, signature and dead letters.
//   endpoint.unhealthy        health moved to Degraded or Disabled (EndpointTransitions)
//   endpoint.breaker_opened   the breaker opened (EndpointTransitions)
//   endpoint.throttled        a Retry-After hold began (EndpointTransitions)
//   delivery.dead_lettered    a delivery became a dead letter (Finals)
// Never to the failing subscription itself or one with the same url; an event of Hookline's own
// (a notification, a ping) never notifies, so notifications cannot feed each other. The
// delivery's name comes from the event (a deterministic id): a second replica, or the same
// change seen twice, finds it existing and sends nothing more.
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import { API_VERSION, DELIVERY, LABELS, NOTIFY_EVENTS, OPERATOR_EVENT_PREFIX, type NotifyEvent } from "../api/names.js";
import { toRfc3339 } from "../core/rfc3339.js";
import { ApiError, type KubeClient } from "../kube/client.js";
import { collectionPath, splitKey } from "../kube/types.js";
import { redactedUrl } from "../observability/attempt-trace.js";
import type { EventSink } from "../kube/events.js";
import type { Caches } from "./caches.js";
import { DELIVERIES, subscriptionRef } from "./objects.js";

export interface NotifierDeps {
  client: KubeClient;
  caches: Caches;
  log: Logger;
  /** A Warning Event on the subscription when its notification cannot be sent (naming why). */
  events?: EventSink;
  /** Notifications created, by event (webhook_notifications_total). */
  created?: (namespace: string, subscription: string, event: NotifyEvent) => void;
  now?: () => number;
}

/** Why spec.notify names a subscription it may not send to, or undefined. */
export function notifyTargetProblem(self: { name: string; url: string }, target: { name: string; url: string } | undefined, targetName: string): string | undefined {
  if (targetName === self.name) return "spec.notify.subscriptionRef names this subscription: notifications never go to the failing endpoint itself";
  if (target && target.url === self.url) return `spec.notify.subscriptionRef names ${targetName}, which has this subscription's url: notifications never go to the failing endpoint itself`;
  return undefined;
}

export class Notifier {
  private readonly now: () => number;
  constructor(private readonly d: NotifierDeps) {
    this.now = d.now ?? Date.now;
  }

  /**
   * One change of state of `subKey`'s endpoint or delivery: `change` identifies it (the same
   * change gives the same id, so it is sent once), `data` is the event's payload.
   */
  notify(subKey: string, event: NotifyEvent, change: string, data: Record<string, unknown>): void {
    const sub = this.d.caches.subscription(subKey);
    if (!sub) return;
    const parsed = this.d.caches.subscriptionSpec(sub);
    if (!parsed.ok || !parsed.spec.notify) return;
    const notify = parsed.spec.notify;
    if (notify.events && !notify.events.includes(event)) return;
    const { namespace, name } = splitKey(subKey);
    const targetName = notify.subscriptionRef.name;
    const target = this.d.caches.subscription(`${namespace}/${targetName}`);
    const targetSpec = target ? this.d.caches.subscriptionSpec(target) : undefined;
    const problem = notifyTargetProblem({ name, url: parsed.spec.url }, targetSpec?.ok ? { name: targetName, url: targetSpec.spec.url } : undefined, targetName);
    // (A target that does not exist yet gets the notification when it appears: its delivery waits.)
    if (problem) {
      this.d.events?.record({ ...subscriptionRef(sub), resourceVersion: undefined }, "Warning", "NotificationNotSent", `${event} not sent: ${problem}`);
      return;
    }
    const type = NOTIFY_EVENTS[event];
    const hash = createHash("sha256").update(`${sub.metadata.uid ?? subKey}\u0000${change}\u0000${targetName}`).digest("hex").slice(0, 16);
    const eventId = `${type}.${hash}`;
    const body = {
      apiVersion: API_VERSION,
      kind: DELIVERY.kind,
      // A valid object name from the event (its type with - for _, and the hash): the same change, the same name.
      metadata: { name: `${type.replace(/_/g, "-")}.${hash}`, namespace, labels: { [LABELS.subscription]: targetName } },
      spec: {
        subscriptionRef: { name: targetName },
        eventType: type,
        eventId,
        // The failing endpoint's url with its path and query values redacted: it may hold a secret.
        payload: { subscription: name, namespace, url: redactedUrl(parsed.spec.url), at: toRfc3339(this.now()), ...data },
      },
    };
    void this.d.client
      .request({ method: "POST", path: collectionPath(DELIVERIES, namespace), body })
      .then(() => this.d.created?.(namespace, name, event))
      .catch((err: unknown) => {
        if (err instanceof ApiError && err.isAlreadyExists) return; // this change was notified already
        this.d.log.warn({ subscription: subKey, event, err: (err as Error).message }, "notification not created (spec.notify)");
      });
  }

  /** Whether an event of this type may notify: Hookline's own events never do (no loops). */
  static notifies(eventType: string | undefined): boolean {
    return !eventType?.startsWith(OPERATOR_EVENT_PREFIX);
  }
}
