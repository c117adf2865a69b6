// Builds docs/api.md, the API reference, from the zod schemas and the name catalogues in src/
// (scripts/gen-crds.ts writes it; `npm run gen:check` fails when it is stale).
import type { z } from "zod";
import { DELIVERY_COLUMNS, DELIVERY_SELECTABLE_FIELDS, REPLAY_COLUMNS, SUBSCRIPTION_COLUMNS, SUBSCRIPTION_SELECTABLE_FIELDS, toOpenApi } from "../src/api/crd.js";
import { replaySpecSchema, replayStatusSchema } from "../src/api/replay.js";
import { deliverySpecSchema, deliveryStatusSchema } from "../src/api/delivery.js";
import {
  ANNOTATIONS,
  ANNOTATION_DOCS,
  API_VERSION,
  CATEGORY,
  DEAD_LETTER_REASONS,
  DELIVERY,
  DISCARD_REASONS,
  FIELD_MANAGER,
  HISTORY_MAX,
  HISTORY_MAX_BYTES,
  HISTORY_MIN,
  LABELS,
  LABEL_DOCS,
  MAX_PAYLOAD_BYTES,
  MAX_PAYLOAD_DEPTH,
  REPLAY_CONCURRENCY,
  REPLAY_REASON_MAX_LENGTH,
  REPLAY_REASON_MIN_LENGTH,
  REPLAY,
  SUBSCRIPTION,
  type KindNames,
} from "../src/api/names.js";
import { subscriptionSpecSchema, subscriptionStatusSchema } from "../src/api/subscription.js";
import { COMMANDS } from "../src/cli/main.js";
import { EXIT_DOCS } from "../src/cli/exit-codes.js";
import { PLUGIN_COMMANDS, PLUGIN_GLOBAL_FLAGS } from "../src/cli/plugin-commands.js";
import { ENV_DOCS } from "../src/config/config.js";
import { ATTEMPT_LOG_LINE, DRAIN_LOG_LINES } from "../src/observability/logger.js";
import { Metrics } from "../src/observability/metrics.js";

interface Node {
  type?: string;
  format?: string;
  description?: string;
  pattern?: string;
  enum?: unknown[];
  default?: unknown;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  maxItems?: number;
  maxProperties?: number;
  required?: string[];
  properties?: Record<string, Node>;
  items?: Node;
  additionalProperties?: Node | boolean;
  "x-kubernetes-preserve-unknown-fields"?: boolean;
  "x-kubernetes-validations"?: Array<{ message: string; rule: string }>;
}
interface Row {
  path: string;
  type: string;
  def: string;
  limits: string;
  what: string;
}

const cell = (s: string) => s.replace(/\|/g, "\\|").replace(/\n/g, " ");
const code = (s: string) => (s === "" ? "" : `\`${s.replace(/`/g, "'")}\``);

function typeOf(n: Node): string {
  if (n["x-kubernetes-preserve-unknown-fields"]) return "any JSON";
  if (Array.isArray(n.enum)) return "enum";
  if (n.type === "array") return `[]${typeOf((n.items ?? {}))}`;
  if (n.type === "object" && n.additionalProperties && typeof n.additionalProperties === "object") return `map[string]${typeOf(n.additionalProperties)}`;
  if (n.format === "date-time") return "timestamp";
  return n.type ?? "any";
}

function limitsOf(n: Node): string {
  const parts: string[] = [];
  if (Array.isArray(n.enum)) parts.push(`one of ${n.enum.map((v) => code(String(v))).join(", ")}`);
  if (n.minimum !== undefined || n.maximum !== undefined) parts.push(`${n.minimum ?? "…"}..${n.maximum ?? "…"}`);
  if (n.minLength !== undefined) parts.push(`min length ${String(n.minLength)}`);
  if (n.maxLength !== undefined) parts.push(`max length ${String(n.maxLength)}`);
  if (n.maxItems !== undefined) parts.push(`max ${String(n.maxItems)} items`);
  if (n.maxProperties !== undefined) parts.push(`max ${String(n.maxProperties)} entries`);
  if (n.pattern !== undefined && !n.description?.includes("duration such as")) parts.push(`pattern ${code(n.pattern)}`);
  for (const v of n["x-kubernetes-validations"] ?? []) {
    // Transition rules (oldSelf) say what cannot change; the rest what the value must be.
    parts.push(v.rule.includes("oldSelf") ? `immutable: ${v.message}` : `rule: ${v.message}`);
  }
  const items = n.items;
  if (items && !items.properties) {
    const each = limitsOf(items);
    if (each) parts.push(`each item: ${each}`);
  }
  return parts.join("; ");
}

function walk(n: Node, path: string, rows: Row[], required: boolean): void {
  const def = n.default === undefined ? "" : code(JSON.stringify(n.default));
  rows.push({ path, type: typeOf(n), def, limits: [required ? "required" : "", limitsOf(n)].filter(Boolean).join("; "), what: n.description ?? "" });
  const req = new Set(n.required ?? []);
  for (const [k, child] of Object.entries(n.properties ?? {})) walk(child, `${path}.${k}`, rows, req.has(k));
  const items = n.items;
  for (const [k, child] of Object.entries(items?.properties ?? {})) walk(child, `${path}[].${k}`, rows, (items?.required ?? []).includes(k));
}

function fieldTable(schema: z.ZodType, root: string): string {
  const rows: Row[] = [];
  walk(toOpenApi(schema), root, rows, false);
  return [
    "| field | type | default | limits | description |",
    "| --- | --- | --- | --- | --- |",
    ...rows.slice(1).map((r) => `| ${code(r.path)} | ${r.type} | ${cell(r.def)} | ${cell(r.limits)} | ${cell(r.what)} |`),
  ].join("\n");
}

function kindSection(names: KindNames, spec: z.ZodType, status: z.ZodType, columns: typeof DELIVERY_COLUMNS, selectable: readonly string[]): string {
  return `## ${names.kind}

\`apiVersion: ${API_VERSION}\`, \`kind: ${names.kind}\`, namespaced. Plural \`${names.plural}\`, short name${names.shortNames.length > 1 ? "s" : ""} ${names.shortNames.map(code).join(", ")}, category \`${CATEGORY}\` (\`kubectl get ${CATEGORY}\` lists the three kinds).

Columns of \`kubectl get ${names.shortNames[0]}\` (\`-o wide\` adds those marked wide):

| column | JSONPath | wide | description |
| --- | --- | --- | --- |
${columns.map((c) => `| ${c.name} | ${code(c.jsonPath)} | ${c.priority ? "yes" : ""} | ${cell(c.description)} |`).join("\n")}

${selectable.length ? `Selectable fields (\`kubectl get ${names.shortNames[0]} --field-selector FIELD=VALUE\`): ${selectable.map(code).join(", ")}.` : ""}

### spec

${fieldTable(spec, "spec")}

### status

Written by the operator only (the status subresource).

${fieldTable(status, "status")}
`;
}

async function metricsSection(): Promise<string> {
  const m = new Metrics({ defaultMetrics: false });
  const rows: string[] = [];
  for (const metric of m.registry.getMetricsAsArray()) {
    // prom-client's metric objects carry their label names; MetricObject does not declare them.
    const { name, help, labelNames } = metric as unknown as { name: string; help: string; labelNames: string[] };
    const type = (await (metric as unknown as { get(): Promise<{ type: string }> }).get()).type;
    rows.push(`| \`${name}\` | ${type} | ${labelNames.map(code).join(", ")} | ${cell(help)} |`);
  }
  return `## Metrics

Prometheus text format on \`METRICS_PORT\`, path \`/metrics\`. Label values are bounded
(namespace, subscription, closed sets of reasons and states): never raw error text or payload
data. The per-subscription gauges (breaker, health, dead letters) are exported by the leading
replica only, so \`sum by\` over replicas counts each subscription once.
Node.js process metrics are exported too, prefixed \`hookline_\` (\`hookline_process_cpu_seconds_total\`, ...).

| metric | type | labels | help |
| --- | --- | --- | --- |
${rows.join("\n")}
`;
}

export async function apiReference(): Promise<string> {
  const annotations = (Object.keys(ANNOTATIONS) as Array<keyof typeof ANNOTATIONS>).map((k) => `| \`${ANNOTATIONS[k]}\` | ${ANNOTATION_DOCS[k].on} | ${cell(ANNOTATION_DOCS[k].value)} | ${cell(ANNOTATION_DOCS[k].what)} |`);
  const labels = (Object.keys(LABELS) as Array<keyof typeof LABELS>).map((k) => `| \`${LABELS[k]}\` | ${cell(LABEL_DOCS[k])} |`);
  return `<!-- Generated by \`npm run gen\` (scripts/api-doc.ts) from src/api, src/config, src/observability and src/cli. Do not edit by hand. -->
# API reference

Everything a user, a script or a dashboard depends on: the three kinds with every field, default
and limit, the annotations and labels, the operator's environment, the metrics, the shutdown log
lines, and the command lines with their exit codes. The API server enforces the limits below
(OpenAPI schema and CEL rules in the CRDs, \`crds/\`); the operator checks them again.

Durations are Kubernetes-style strings (\`250ms\`, \`10s\`, \`1h30m\`). Timestamps are RFC 3339.
Paths below use \`[]\` for "every item of the list".

${kindSection(SUBSCRIPTION, subscriptionSpecSchema, subscriptionStatusSchema, SUBSCRIPTION_COLUMNS, SUBSCRIPTION_SELECTABLE_FIELDS)}
${kindSection(DELIVERY, deliverySpecSchema, deliveryStatusSchema, DELIVERY_COLUMNS, DELIVERY_SELECTABLE_FIELDS)}
Dead-letter reasons (\`status.deadLetter.reason\`): ${DEAD_LETTER_REASONS.map(code).join(", ")}.
Discard reasons (\`status.discard.reason\`): ${DISCARD_REASONS.map(code).join(", ")}.
Wait for a delivery to finish: \`kubectl wait --for=condition=Succeeded whdel/NAME\` (delivered) or
\`kubectl wait --for=condition=Succeeded=False whdel/NAME\` (dead-lettered or discarded).

${kindSection(REPLAY, replaySpecSchema, replayStatusSchema, REPLAY_COLUMNS, [])}
Wait for a replay to finish: \`kubectl wait --for=condition=Complete whrep/NAME\`.

## Limits

| limit | value |
| --- | --- |
| payload, serialized JSON | ${MAX_PAYLOAD_BYTES} bytes (refused at the publish doors, Discarded \`PayloadTooLarge\` if created directly) |
| payload nesting | ${MAX_PAYLOAD_DEPTH} levels of arrays and objects (\`InvalidPayload\`) |
| attempts kept in \`status.history\` | retry.maxAttempts + deadLetter.maxReplays, at least ${HISTORY_MIN}, at most ${HISTORY_MAX}, at most ${HISTORY_MAX_BYTES / 1024} KiB serialized (the oldest go first) |
| replay and reset reasons | ${REPLAY_REASON_MIN_LENGTH}..${REPLAY_REASON_MAX_LENGTH} characters |
| bulk replay concurrency | default ${REPLAY_CONCURRENCY.default}, clamped to ${REPLAY_CONCURRENCY.min}..${REPLAY_CONCURRENCY.max} (WebhookReplay: spec.concurrency, the same range) |

## Annotations

A reason outside its length range is refused with a Warning Event and the annotation removed.

| annotation | on | value | what |
| --- | --- | --- | --- |
${annotations.join("\n")}

## Labels

| label | what |
| --- | --- |
${labels.join("\n")}

Hookline writes with field manager \`${FIELD_MANAGER}\` (visible in \`managedFields\`).

## Operator environment

Read once at start; a bad value stops the process (exit 78) with a message naming the variable,
the value and the allowed range.

| variable | default | range | what |
| --- | --- | --- | --- |
${ENV_DOCS.map((e) => `| \`${e.name}\` | ${cell(e.default)} | ${cell(e.range)} | ${cell(e.what)} |`).join("\n")}

${await metricsSection()}
## Shutdown log lines

JSON lines (pino) on stdout; \`msg\` is the name.

| \`msg\` | level | fields | when |
| --- | --- | --- | --- |
${DRAIN_LOG_LINES.map((l) => `| \`${l.msg}\` | ${l.level} | ${cell(l.fields)} | ${cell(l.when)} |`).join("\n")}

## Attempt log line

One JSON line per attempt, at level \`${ATTEMPT_LOG_LINE.level}\`, \`msg\` \`${ATTEMPT_LOG_LINE.msg}\`: ${cell(ATTEMPT_LOG_LINE.when)}. Fields: ${cell(ATTEMPT_LOG_LINE.fields)}.

## Command line

\`hookline\` (the npm package's bin; \`hookline COMMAND --help\` shows one command's options):

| command | what |
| --- | --- |
${COMMANDS.map((c) => `| \`hookline ${cell(c.usage)}\` | ${cell(c.what)} |`).join("\n")}
| \`hookline --version\` | print the version |

\`kubectl hookline\` (bin \`kubectl-hookline\`, the on-call console):

| command | what |
| --- | --- |
${PLUGIN_COMMANDS.map((c) => `| \`kubectl hookline ${cell(c.usage)}\` | ${cell(c.what)} |`).join("\n")}

Flags of every \`kubectl hookline\` command (one that applies to some commands only names them in parentheses):

| flag | what |
| --- | --- |
${PLUGIN_GLOBAL_FLAGS.map((f) => `| \`${cell(f.flag)}\` | ${cell(f.what)} |`).join("\n")}

### Exit codes

The same for every command of both:

| code | meaning |
| --- | --- |
${EXIT_DOCS.map((e) => `| ${e.code} | ${cell(e.meaning)} |`).join("\n")}
`;
}
