// What the benchmark creates: payloads of a fixed size, the webhook body Hookline would send for
// them, subscriptions, the Succeeded status Hookline writes (computed by Hookline's own pure
// outcome code, so the API ceiling patches exactly as many bytes), and the plain CRD the API
// ceiling writes to.
import { parseDuration } from "../../src/api/duration.js";
import { API_VERSION } from "../../src/api/names.js";
import { subscriptionSpecSchema, type SubscriptionSpecInput } from "../../src/api/subscription.js";
import { classifyStatus } from "../../src/core/attempt/classify.js";
import { applyAttempt } from "../../src/core/attempt/outcome.js";
import { resolvePolicy } from "../../src/core/attempt/policy.js";
import { toRfc3339 } from "../../src/core/rfc3339.js";
import type { DeliveryStatus } from "../../src/api/delivery.js";
import type { ResourceType } from "../../src/kube/types.js";

export const EVENT_TYPE = "bench.event";
/** Standard Webhooks secret used by every benchmark subscription and by the HTTP ceiling. */
export const SIGNING_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
export const SECRET_NAME = "bench-signing";

export const BENCH_ITEMS: ResourceType = { group: "bench.hookline.dev", version: "v1", plural: "benchitems" };

export interface Payload {
  seq: number;
  /** Producer's wall clock (ms) when it sent the create. */
  sentAt: number;
  pad: string;
}

/** A payload whose JSON is `bytes` long (for realistic sentAt values). */
export function payload(seq: number, sentAt: number, bytes: number): Payload {
  const bare = JSON.stringify({ seq, sentAt: Math.round(sentAt * 1000) / 1000, pad: "" }).length;
  return { seq, sentAt: Math.round(sentAt * 1000) / 1000, pad: "x".repeat(Math.max(0, bytes - bare)) };
}

/** The body Hookline sends (src/delivery/payload.ts loadRequestBody): {"id","type","timestamp","created_at","data"}. */
export function webhookBody(id: string, data: unknown, at = Date.now()): string {
  const timestamp = toRfc3339(Math.floor(at / 1000) * 1000).replace(/\.\d+Z$/, "Z");
  return JSON.stringify({ id, type: EVENT_TYPE, timestamp, created_at: timestamp, data });
}

export function namespace(name: string) {
  return { apiVersion: "v1", kind: "Namespace", metadata: { name, labels: { "hookline.dev/bench": "true" } } };
}

export function secret(ns: string) {
  return { apiVersion: "v1", kind: "Secret", metadata: { name: SECRET_NAME, namespace: ns }, type: "Opaque", stringData: { secret: SIGNING_SECRET } };
}

export function subscription(ns: string, name: string, spec: Partial<SubscriptionSpecInput> & { url: string }) {
  return {
    apiVersion: API_VERSION,
    kind: "WebhookSubscription",
    metadata: { name, namespace: ns },
    spec: { secretRef: { name: SECRET_NAME }, ...spec },
  };
}

export function delivery(ns: string, name: string, sub: string, data: unknown) {
  return {
    apiVersion: API_VERSION,
    kind: "WebhookDelivery",
    metadata: { name, namespace: ns },
    spec: { subscriptionRef: { name: sub }, eventType: EVENT_TYPE, eventId: name, payload: data },
  };
}

/** The status Hookline writes after a first attempt answered 200 (same fields, same size). */
export function succeededStatus(url: string, at = Date.now()): DeliveryStatus {
  const spec = subscriptionSpecSchema.parse({ url, secretRef: { name: SECRET_NAME } });
  const policy = resolvePolicy(spec, { deliveryTimeoutMs: parseDuration("10s"), breaker: { failureThreshold: 5, successThreshold: 1, cooldownMs: 60_000 } });
  return applyAttempt({
    status: undefined,
    generation: 1,
    now: at,
    attempt: { startedAt: at - 3, durationMs: 3, responseStatus: 200, classification: classifyStatus(200) },
    policy,
    random: Math.random,
  }).status;
}

/** A plain namespaced CRD with a status subresource: what the raw API ceiling writes. */
export function benchItemCrd() {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${BENCH_ITEMS.plural}.${BENCH_ITEMS.group}` },
    spec: {
      group: BENCH_ITEMS.group,
      scope: "Namespaced",
      names: { plural: BENCH_ITEMS.plural, singular: "benchitem", kind: "BenchItem", listKind: "BenchItemList" },
      versions: [
        {
          name: BENCH_ITEMS.version,
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: {
            openAPIV3Schema: {
              type: "object",
              properties: {
                spec: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
                status: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
              },
            },
          },
        },
      ],
    },
  };
}
