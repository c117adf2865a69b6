// The `hookline` package for TypeScript services: publish an event once and Hookline fans it out
// to every matching WebhookSubscription of the namespace. Credentials are the caller's own:
// a kubeconfig (path or KubeConfig object), else KUBECONFIG / ~/.kube/config / the pod's
// ServiceAccount, the way kubectl finds them.
//
//   import { publish } from "hookline";
//   const { id, deliveries } = await publish({ namespace: "shop", type: "order.paid", id: "evt-1001", data: { order: 1001 } });
import { KubeConfig } from "@kubernetes/client-node";
import { KubeClient } from "./kube/client.js";
import { publish as fanOut, type PublishResult } from "./publish/fanout.js";
import type { PublishInput } from "./publish/input.js";
import { USER_AGENT } from "./version.js";

export interface ConnectOptions {
  /** A kubeconfig file path or a loaded KubeConfig; default: KUBECONFIG, ~/.kube/config, or in-cluster. */
  kubeconfig?: string | KubeConfig;
  /** Deliveries created at once per publish; default 8. */
  concurrency?: number;
}

/** A reusable publisher: one connection pool for many events. Close it when done. */
export interface Publisher {
  publish(input: PublishInput, opts?: { signal?: AbortSignal }): Promise<PublishResult>;
  close(): Promise<void>;
}

function loadKubeConfig(kubeconfig: string | KubeConfig | undefined): KubeConfig {
  if (kubeconfig instanceof KubeConfig) return kubeconfig;
  const kc = new KubeConfig();
  if (kubeconfig) kc.loadFromFile(kubeconfig);
  else kc.loadFromDefault();
  return kc;
}

/** Connects once with the caller's credentials; `publish` many events through it. */
export async function createPublisher(opts: ConnectOptions = {}): Promise<Publisher> {
  const client = await KubeClient.create(loadKubeConfig(opts.kubeconfig), { userAgent: USER_AGENT, connections: 16 });
  return {
    publish: (input, o = {}) => fanOut(client, input, { ...(opts.concurrency ? { concurrency: opts.concurrency } : {}), ...(o.signal ? { signal: o.signal } : {}) }),
    close: () => client.close(),
  };
}

/**
 * Publishes one event: creates one WebhookDelivery per matching, non-paused subscription of
 * `input.namespace`, named from the event id, so publishing the same id again creates nothing
 * new. Returns the id (generated when absent) and, per subscription, `created` or `existing`.
 */
export async function publish(input: PublishInput, opts: ConnectOptions = {}): Promise<PublishResult> {
  const publisher = await createPublisher(opts);
  try {
    return await publisher.publish(input);
  } finally {
    await publisher.close();
  }
}

export { PublishInputError, PayloadTooLargeError, IdempotencyConflictError, PublishFailedError, BacklogFullError, type PublishFailure, type FullSubscription } from "./publish/errors.js";
export type { PublishInput } from "./publish/input.js";
export type { PublishResult, DeliveryResult, SkippedSubscription } from "./publish/fanout.js";
export { deliveryName } from "./publish/naming.js";
export { GROUP, VERSION, API_VERSION, SUBSCRIPTION, DELIVERY, LABELS, ANNOTATIONS, MAX_PAYLOAD_BYTES } from "./api/names.js";
export type { DeliveryPhase, DeadLetterReason, DiscardReason } from "./api/names.js";
export type { SubscriptionSpec, SubscriptionSpecInput, SubscriptionStatus, BreakerStatus, HealthStatus } from "./api/subscription.js";
export type { DeliverySpec, DeliveryStatus, Attempt, AttemptOutcome } from "./api/delivery.js";
export { KubeConfig };
