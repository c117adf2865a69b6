// Builds the three CustomResourceDefinitions from the zod schemas (scripts/gen-crds.ts writes
// them to crds/; CI fails when the files are stale).
import { z } from "zod";
import { deliverySpecSchema, deliveryStatusSchema } from "./delivery.js";
import { API_VERSION, CATEGORY, DELIVERY, GROUP, REPLAY, SUBSCRIPTION, VERSION, type KindNames } from "./names.js";
import { replaySpecSchema, replayStatusSchema } from "./replay.js";
import { subscriptionSpecSchema, subscriptionStatusSchema } from "./subscription.js";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

/** zod -> OpenAPI v3 as a structural CRD schema accepts it. */
export function toOpenApi(schema: z.ZodType): JsonObject {
  const raw = z.toJSONSchema(schema, { target: "openapi-3.0", io: "input", unrepresentable: "any" }) as JsonObject;
  return clean(raw) as JsonObject;
}

function clean(node: Json): Json {
  if (Array.isArray(node)) return node.map(clean);
  if (node === null || typeof node !== "object") return node;
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === "$schema" || key === "definitions" || key === "propertyNames") continue;
    if (key === "additionalProperties" && value === false) continue;
    // zod gives every integer the safe-integer range; Kubernetes integers are int64 anyway.
    if ((key === "minimum" || key === "maximum") && Math.abs(value as number) === Number.MAX_SAFE_INTEGER) continue;
    out[key] = clean(value);
  }
  if (out["x-kubernetes-preserve-unknown-fields"] === true) {
    // Any JSON value: no type, and nothing zod added for `unknown`.
    delete out.type;
  }
  return out;
}

interface PrinterColumn {
  name: string;
  type: "string" | "integer" | "date" | "boolean" | "number";
  jsonPath: string;
  description: string;
  priority?: number;
}

const metadataFields = {
  apiVersion: { type: "string", description: "APIVersion of this object." },
  kind: { type: "string", description: "Kind of this object." },
  metadata: { type: "object" },
} satisfies JsonObject;

function crd(opts: {
  names: KindNames;
  description: string;
  spec: z.ZodType;
  status: z.ZodType;
  columns: PrinterColumn[];
  selectableFields?: string[];
}): JsonObject {
  const { names } = opts;
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: {
      name: `${names.plural}.${GROUP}`,
      labels: { "app.kubernetes.io/name": "hookline", "app.kubernetes.io/part-of": "hookline" },
    },
    spec: {
      group: GROUP,
      names: {
        kind: names.kind,
        listKind: names.listKind,
        plural: names.plural,
        singular: names.singular,
        shortNames: [...names.shortNames],
        categories: [CATEGORY],
      },
      scope: "Namespaced",
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: opts.columns as unknown as Json,
          ...(opts.selectableFields ? { selectableFields: opts.selectableFields.map((jsonPath) => ({ jsonPath: `.${jsonPath}` })) } : {}),
          schema: {
            openAPIV3Schema: {
              type: "object",
              description: opts.description,
              required: ["spec"],
              properties: { ...metadataFields, spec: toOpenApi(opts.spec), status: toOpenApi(opts.status) },
            },
          },
        },
      ],
    },
  };
}

export const DELIVERY_SELECTABLE_FIELDS = ["spec.subscriptionRef.name", "spec.eventType", "status.phase"] as const;

export const SUBSCRIPTION_COLUMNS: PrinterColumn[] = [
  { name: "URL", type: "string", jsonPath: ".spec.url", description: "Endpoint" },
  { name: "Ready", type: "string", jsonPath: '.status.conditions[?(@.type=="Ready")].status', description: "Spec and Secret accepted" },
  { name: "Breaker", type: "string", jsonPath: ".status.breaker.state", description: "Circuit breaker state" },
  { name: "Health", type: "string", jsonPath: ".status.health.state", description: "Endpoint health" },
  { name: "Pending", type: "integer", jsonPath: ".status.deliveries.pending", description: "Deliveries not finished" },
  { name: "Dead letters", type: "integer", jsonPath: ".status.deliveries.deadLettered", description: "Dead letters held" },
  { name: "Paused", type: "boolean", jsonPath: ".spec.paused", description: "Deliveries held", priority: 1 },
  { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp", description: "Age" },
];

/** `kubectl get whsub --field-selector status.breaker.state=Open` finds the failing endpoints. */
export const SUBSCRIPTION_SELECTABLE_FIELDS = ["status.breaker.state", "status.health.state", "spec.paused"] as const;

export function subscriptionCrd(): JsonObject {
  return crd({
    names: SUBSCRIPTION,
    description: `A ${SUBSCRIPTION.kind} (${API_VERSION}) tells Hookline where and how to deliver one endpoint's webhooks: URL, signing, retries, circuit breaker, limits, dead letters and retention.`,
    spec: subscriptionSpecSchema,
    status: subscriptionStatusSchema,
    columns: SUBSCRIPTION_COLUMNS,
    selectableFields: [...SUBSCRIPTION_SELECTABLE_FIELDS],
  });
}

/**
 * The terminal-delivery index reads these columns by name from Table responses (`as=Table`):
 * Subscription, Event type, Phase, Reason, Finished, Dead-lettered, Ordering key and Ordering
 * value; see src/finished/terminal-index.ts before renaming one.
 */
export const DELIVERY_COLUMNS: PrinterColumn[] = [
  { name: "Subscription", type: "string", jsonPath: ".spec.subscriptionRef.name", description: "Subscription" },
  { name: "Event type", type: "string", jsonPath: ".spec.eventType", description: "Event type" },
  { name: "Phase", type: "string", jsonPath: ".status.phase", description: "Pending, Retrying, Succeeded, DeadLettered or Discarded" },
  { name: "Attempts", type: "integer", jsonPath: ".status.attempts", description: "Attempts made" },
  { name: "Last status", type: "integer", jsonPath: ".status.lastAttempt.responseStatus", description: "HTTP status of the last attempt" },
  // A string, not a date: kubectl renders a date column as an age, and an age in the future
  // (the usual case here) as "<invalid>".
  { name: "Next attempt", type: "string", jsonPath: ".status.nextAttemptAt", description: "When the next attempt is due (RFC 3339)" },
  { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp", description: "Age" },
  { name: "Reason", type: "string", jsonPath: ".status.conditions[?(@.type==\"Succeeded\")].reason", description: "Why it is in this phase", priority: 1 },
  // A string, not a date: Table rows turn date cells into ages ("16m"), and the terminal index
  // reads the exact finish time from this cell.
  { name: "Finished", type: "string", jsonPath: ".status.finishedAt", description: "When it finished (RFC 3339)", priority: 1 },
  { name: "Replays", type: "integer", jsonPath: ".status.replays", description: "Failed replays", priority: 1 },
  // Also read by the terminal index: a Succeeded delivery that was a dead letter keeps
  // retention.deadLettered, and a dead letter's lane blocks its ordering key (a new leader
  // learns both from a list).
  { name: "Dead-lettered", type: "string", jsonPath: ".status.deadLetter.at", description: "When it was dead-lettered (RFC 3339); kept when a replay delivered it", priority: 1 },
  { name: "Ordering key", type: "string", jsonPath: ".status.ordering.key", description: "The subscription's spec.ordering.key (ordered subscriptions)", priority: 1 },
  { name: "Ordering value", type: "string", jsonPath: ".status.ordering.value", description: "The delivery's value at the ordering key, as JSON", priority: 1 },
  { name: "Last error", type: "string", jsonPath: ".status.lastAttempt.reason", description: "Classification of the last attempt (http_5xx, timeout, network, ...)", priority: 1 },
];

export const REPLAY_COLUMNS: PrinterColumn[] = [
  { name: "Phase", type: "string", jsonPath: ".status.phase", description: "Pending, Running, Completed or Failed" },
  { name: "Matched", type: "integer", jsonPath: ".status.matched", description: "Deliveries the selector matched" },
  { name: "Attempted", type: "integer", jsonPath: ".status.attempted", description: "Replayed or deduped (succeeded + failed + deduped)" },
  { name: "Succeeded", type: "integer", jsonPath: ".status.succeeded", description: "Replays the endpoint accepted" },
  { name: "Failed", type: "integer", jsonPath: ".status.failed", description: "Replays that failed" },
  { name: "Deduped", type: "integer", jsonPath: ".status.deduped", description: "Not sent: an equal delivery was replayed or pending" },
  { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp", description: "Age" },
  { name: "Skipped", type: "integer", jsonPath: ".status.skipped", description: "Matched but not replayed (see the Events)", priority: 1 },
  { name: "Target", type: "string", jsonPath: ".spec.target.subscription", description: "Sent to this subscription instead of each delivery's own", priority: 1 },
  { name: "Dry run", type: "boolean", jsonPath: ".spec.dryRun", description: "Counted only, nothing sent", priority: 1 },
  { name: "Reason", type: "string", jsonPath: ".spec.reason", description: "Why it was run", priority: 1 },
];

export function replayCrd(): JsonObject {
  return crd({
    names: REPLAY,
    description: `A ${REPLAY.kind} (${API_VERSION}) replays finished deliveries of its namespace (dead letters, or delivered events again), to their own subscription or a target, and records what it did. Its spec is immutable: it is an audit record.`,
    spec: replaySpecSchema,
    status: replayStatusSchema,
    columns: REPLAY_COLUMNS,
  });
}

export function deliveryCrd(): JsonObject {
  return crd({
    names: DELIVERY,
    description: `A ${DELIVERY.kind} (${API_VERSION}) is one event for one subscription. Its name is the producer's idempotency key: creating the same name twice is refused.`,
    spec: deliverySpecSchema,
    status: deliveryStatusSchema,
    columns: DELIVERY_COLUMNS,
    selectableFields: [...DELIVERY_SELECTABLE_FIELDS],
  });
}
