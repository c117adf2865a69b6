// The `hookline` package for TypeScript services: publish an event once and Hookline fans it out
// to every matching WebhookSubscription of the namespace. Credentials are the caller's own:
// a kubeconfig (path or KubeConfig object), else KUBECONFIG / ~/.kube/config / the pod's
// ServiceAccount, the way kubectl finds them.
//
//   import { publish } from "hookline";
//   const { id, deliveries } = await publish({ namespace: "shop", type: "order.paid", id: "evt-1001", data: { order: 1001 } });
//
// Stream mode (docs/stream-mode.md): with `nats`, the event is written once to NATS JetStream
// and the publish returns once JetStream stored it; no Kubernetes credentials are used: the URL
// carries a NATS user allowed to publish the namespace's events.
//
//   const { seq, result } = await publish({ namespace: "shop", type: "order.paid", id: "evt-1001", data: { order: 1001 } }, { nats: "nats://publisher-shop:PASSWORD@nats.nats.svc:4222" });
//
// Tracing (docs/receivers.md): pass the producer's W3C trace context, and every attempt is sent
// (and, when the operator exports traces, recorded) in that trace.
//
//   await publish(event, { traceContext: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" } });
import { KubeConfig } from "@kubernetes/client-node";
import { KubeClient } from "./kube/client.js";
import { publish as fanOut } from "./publish/fanout.js";
import type { PublishResult } from "./publish/result.js";
import { validateEvent, validateTraceContext, type PublishInput } from "./publish/input.js";
import { publishToStream, type StreamPublishResult } from "./publish/stream.js";
import { StreamConnection } from "./jetstream/jetstream.js";
import type { TraceContext } from "./jetstream/message.js";
import { USER_AGENT } from "./version.js";

export interface ConnectOptions {
  /** A kubeconfig file path or a loaded KubeConfig; default: KUBECONFIG, ~/.kube/config, or in-cluster. */
  kubeconfig?: string | KubeConfig;
  /** Deliveries created at once per publish; default 8. */
  concurrency?: number;
}

export interface StreamConnectOptions {
  /** Stream mode: the NATS server(s) with JetStream, nats://HOST:PORT or tls://… (comma-separated for a cluster; credentials as nats://USER:PASS@HOST). */
  nats: string;
  /** How long a publish waits for JetStream's acknowledgement; default 5 s. */
  timeoutMs?: number;
}

/** Per event: the producer's W3C trace context, stored on each delivery (spec.traceContext) and sent with every attempt. */
export interface PublishOptions {
  /**
   * The W3C trace context of the code publishing the event: `traceparent` (and `tracestate`)
   * as they would travel in HTTP headers. With OpenTelemetry, `propagation.inject(context.active(), carrier)`
   * fills such an object. Validated strictly (PublishInputError naming traceContext.traceparent
   * or traceContext.tracestate); a tracestate above 512 characters is truncated by whole entries.
   */
  traceContext?: TraceContext;
}

/** A reusable publisher: one connection pool for many events. Close it when done. */
export interface Publisher {
  publish(input: PublishInput, opts?: PublishOptions & { signal?: AbortSignal }): Promise<PublishResult>;
  close(): Promise<void>;
}

/** A reusable stream-mode publisher: one NATS connection (reconnecting by itself) for many events. */
export interface StreamPublisher {
  publish(input: PublishInput, opts?: PublishOptions): Promise<StreamPublishResult>;
  close(): Promise<void>;
}

function loadKubeConfig(kubeconfig: string | KubeConfig | undefined): KubeConfig {
  if (kubeconfig instanceof KubeConfig) return kubeconfig;
  const kc = new KubeConfig();
  if (kubeconfig) kc.loadFromFile(kubeconfig);
  else kc.loadFromDefault();
  return kc;
}

/** Stream mode when a `nats` URL is given (a JavaScript caller may pass `nats: undefined`: CR mode then). */
const isStream = (opts: ConnectOptions | StreamConnectOptions): opts is StreamConnectOptions => typeof (opts as Partial<StreamConnectOptions>).nats === "string";

/** Connects once; `publish` many events through it. With `nats`, to JetStream (stream mode). */
export async function createPublisher(opts: StreamConnectOptions): Promise<StreamPublisher>;
export async function createPublisher(opts?: ConnectOptions): Promise<Publisher>;
export async function createPublisher(opts: ConnectOptions | StreamConnectOptions = {}): Promise<Publisher | StreamPublisher> {
  if (isStream(opts)) return createStreamPublisher(opts);
  return createKubePublisher(opts);
}

async function createStreamPublisher(opts: StreamConnectOptions): Promise<StreamPublisher> {
  const connection = await StreamConnection.connect({ url: opts.nats, source: "the nats option", name: "hookline library", ...(opts.timeoutMs !== undefined ? { publishTimeoutMs: opts.timeoutMs } : {}) });
  return {
    publish: (input, o = {}) => publishToStream(connection, input, o.traceContext ? { traceContext: o.traceContext } : {}),
    close: () => connection.close(),
  };
}

async function createKubePublisher(opts: ConnectOptions): Promise<Publisher> {
  const client = await KubeClient.create(loadKubeConfig(opts.kubeconfig), { userAgent: USER_AGENT, connections: 16 });
  return {
    publish: (input, o = {}) => fanOut(client, input, { ...(opts.concurrency ? { concurrency: opts.concurrency } : {}), ...(o.signal ? { signal: o.signal } : {}), ...(o.traceContext ? { traceContext: o.traceContext } : {}) }),
    close: () => client.close(),
  };
}

/**
 * Publishes one event: creates one WebhookDelivery per matching, non-paused subscription of
 * `input.namespace`, named from the event id, so publishing the same id again creates nothing
 * new. Returns the id (generated when absent) and, per subscription, `created` or `existing`.
 */
export async function publish(input: PublishInput, opts: StreamConnectOptions & PublishOptions): Promise<StreamPublishResult>;
export async function publish(input: PublishInput, opts?: ConnectOptions & PublishOptions): Promise<PublishResult>;
export async function publish(input: PublishInput, opts: (ConnectOptions | StreamConnectOptions) & PublishOptions = {}): Promise<PublishResult | StreamPublishResult> {
  // An input problem is reported as such even when the cluster or NATS is down.
  const traceContext = validateTraceContext(opts.traceContext);
  const each = traceContext ? { traceContext } : {};
  if (isStream(opts)) {
    // The id is settled once.
    const { id } = validateEvent(input);
    const publisher = await createStreamPublisher(opts);
    try {
      return await publisher.publish({ ...input, id }, each);
    } finally {
      await publisher.close();
    }
  }
  const publisher = await createKubePublisher(opts);
  try {
    return await publisher.publish(input, each);
  } finally {
    await publisher.close();
  }
}

export { PublishInputError, PayloadTooLargeError, IdempotencyConflictError, PublishFailedError, BacklogFullError, type PublishFailure, type FullSubscription } from "./publish/errors.js";
export type { PublishInput } from "./publish/input.js";
export type { PublishResult, DeliveryResult, SkippedSubscription } from "./publish/result.js";
export type { StreamPublishResult } from "./publish/stream.js";
export { StreamQuotaExceededError, StreamUnavailableError } from "./jetstream/jetstream.js";
export { NatsUrlError } from "./jetstream/url.js";
export type { TraceContext } from "./jetstream/message.js";
export { deliveryName } from "./publish/naming.js";
export { GROUP, VERSION, API_VERSION, SUBSCRIPTION, DELIVERY, LABELS, ANNOTATIONS, MAX_PAYLOAD_BYTES } from "./api/names.js";
export type { DeliveryPhase, DeadLetterReason, DiscardReason } from "./api/names.js";
export type { SubscriptionSpec, SubscriptionSpecInput, SubscriptionStatus, BreakerStatus, HealthStatus } from "./api/subscription.js";
export type { DeliverySpec, DeliveryStatus, Attempt, AttemptOutcome } from "./api/delivery.js";
export { KubeConfig };
