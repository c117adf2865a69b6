// The subscriptions' feature: the reconciler that says whether a subscription is Ready and rolls
// its endpoint's state up into its status.
import { ignoreNotFound } from "../kube/client.js";
import { objectPath, splitKey } from "../kube/types.js";
import { SUBSCRIPTIONS, type SubscriptionObject } from "../delivery/objects.js";
import type { Shared } from "../delivery/shared.js";
import { SubscriptionReconciler, type SubscriptionReconcilerDeps } from "./reconciler.js";

export function setupSubscriptions(s: Shared, d: Pick<SubscriptionReconcilerDeps, "deadLetters" | "bulkReplay" | "streamPending">): SubscriptionReconciler {
  return new SubscriptionReconciler({
    caches: s.caches,
    endpoints: s.endpoints,
    secrets: s.secrets,
    credentials: s.credentials,
    statusWriter: s.statusWriter,
    events: s.events,
    expectations: s.expectations.subscriptions,
    metrics: s.metrics,
    log: s.log.child({ controller: "subscription" }),
    read: (key) => {
      const { namespace, name } = splitKey(key);
      return ignoreNotFound(s.client.request<SubscriptionObject>({ method: "GET", path: objectPath(SUBSCRIPTIONS, namespace, name) }));
    },
    ...d,
  });
}
