// The OpenTelemetry variables (the OpenTelemetry specification's names and meanings) that turn on
// the export of a CLIENT span per attempt and per replay: OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) set means on; unset means off and nothing of the
// OpenTelemetry SDK is loaded. Header values (OTEL_EXPORTER_OTLP_HEADERS) are credentials: no
// message repeats them, and the Config keeps them apart from what is logged.

type Env = Record<string, string | undefined>;

export type SamplerName = "always_on" | "always_off" | "traceidratio" | "parentbased_always_on" | "parentbased_always_off" | "parentbased_traceidratio";
const SAMPLERS: readonly SamplerName[] = ["always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"];

export interface TracingConfig {
  /** Where spans are POSTed (OTLP/HTTP, JSON): OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
  url: string;
  /** The URL without credentials, for logs. */
  urlRedacted: string;
  /** Headers sent with every export (credentials: never log them; `headerNames` is for logs). */
  headers: Record<string, string>;
  headerNames: string[];
  /** The resource: service.name (OTEL_SERVICE_NAME, default hookline) and OTEL_RESOURCE_ATTRIBUTES. */
  serviceName: string;
  resourceAttributes: Record<string, string>;
  sampler: { name: SamplerName; ratio: number };
  /** OTEL_BSP_SCHEDULE_DELAY: how long finished spans wait to be exported together. */
  scheduleDelayMs: number;
  /** OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT: one export's timeout. */
  exportTimeoutMs: number;
}

export interface TracingWarning {
  variable: string;
  message: string;
}

const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;
const HEADER_VALUE = /^[\t\x20-\x7e]*$/;

function decode(s: string): string | undefined {
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
}

/**
 * `key1=value1,key2=value2` as the OpenTelemetry specification writes header and resource
 * lists (W3C Baggage's form: values percent-decoded, spaces around entries ignored). `what`
 * names an entry in messages; values are never repeated (`secret`) or are (`!secret`).
 */
export function parseKeyValueList(raw: string, variable: string, secret: boolean, problems: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [i, entry] of raw.split(",").entries()) {
    if (entry.trim() === "") continue;
    const eq = entry.indexOf("=");
    const key = decode(entry.slice(0, eq < 0 ? entry.length : eq).trim());
    const value = eq < 0 ? undefined : decode(entry.slice(eq + 1).trim());
    // Without "=" the whole entry may be a value: it is not repeated either.
    const where = `${variable} entry ${i + 1}${key && (eq >= 0 || !secret) ? ` (${JSON.stringify(key)})` : ""}`;
    if (eq < 0 || key === undefined || key === "" || value === undefined) {
      problems.push(`${where} is invalid: entries are key=value, comma-separated, percent-encoded${secret ? " (the value is not shown)" : ""}`);
      continue;
    }
    if (secret && (!HEADER_NAME.test(key) || !HEADER_VALUE.test(value))) {
      problems.push(`${where} is invalid: a header name is an HTTP token and its value printable ASCII (the value is not shown)`);
      continue;
    }
    out[key] = value;
  }
  return out;
}

function milliseconds(env: Env, name: string, fallback: number, max: number, problems: string[]): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) > max) {
    problems.push(`${name}=${JSON.stringify(raw)} is invalid: must be an integer number of milliseconds from 0 to ${max} (default ${fallback})`);
    return fallback;
  }
  return Number(raw);
}

function endpointUrl(env: Env, problems: string[]): URL | undefined {
  const signal = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const [name, raw] = signal ? ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", signal] : ["OTEL_EXPORTER_OTLP_ENDPOINT", base];
  if (!raw) return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    problems.push(`${name} is invalid: not a URL (e.g. http://otel-collector.observability.svc:4318)`);
    return undefined;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    problems.push(`${name} is invalid: Hookline exports OTLP over HTTP; use an http:// or https:// URL (the collector's OTLP/HTTP port, usually 4318)`);
    return undefined;
  }
  // The specification: the base endpoint gets the signal's path; the signal endpoint is used as it is.
  if (!signal) url.pathname = `${url.pathname.replace(/\/+$/, "")}/v1/traces`;
  return url;
}

function redact(url: URL): string {
  const copy = new URL(url.href);
  if (copy.username || copy.password) {
    copy.username = "REDACTED";
    copy.password = copy.password ? "REDACTED" : "";
  }
  if (copy.search) copy.search = "?REDACTED";
  return copy.href;
}

/** Tracing settings, or undefined when off (no endpoint, OTEL_SDK_DISABLED=true, OTEL_TRACES_EXPORTER=none). */
// One line per variable, as in loadConfig.
// eslint-disable-next-line complexity
export function loadTracing(env: Env, problems: string[], warnings: TracingWarning[]): TracingConfig | undefined {
  const disabled = env.OTEL_SDK_DISABLED?.trim().toLowerCase();
  if (disabled === "true") return undefined;
  if (disabled && disabled !== "false") problems.push(`OTEL_SDK_DISABLED=${JSON.stringify(env.OTEL_SDK_DISABLED)} is invalid: must be true or false`);
  const exporter = env.OTEL_TRACES_EXPORTER?.trim();
  if (exporter === "none") return undefined;
  if (exporter && exporter !== "otlp") problems.push(`OTEL_TRACES_EXPORTER=${JSON.stringify(exporter)} is not supported: Hookline exports with otlp (or none)`);
  const url = endpointUrl(env, problems);
  if (!url) return undefined;

  const protocolVar = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim() ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" : "OTEL_EXPORTER_OTLP_PROTOCOL";
  const protocol = env[protocolVar]?.trim();
  if (protocol === "grpc") problems.push(`${protocolVar}=grpc is not supported: Hookline exports OTLP over HTTP (JSON); point the endpoint at the collector's OTLP/HTTP port (4318)`);
  else if (protocol === "http/protobuf") warnings.push({ variable: protocolVar, message: `${protocolVar}=http/protobuf: Hookline sends OTLP/HTTP as JSON (http/json), which OTLP/HTTP receivers accept on the same endpoint` });
  else if (protocol && protocol !== "http/json") problems.push(`${protocolVar}=${JSON.stringify(protocol)} is invalid: must be http/json (or http/protobuf, sent as http/json)`);

  const headers = {
    ...parseKeyValueList(env.OTEL_EXPORTER_OTLP_HEADERS ?? "", "OTEL_EXPORTER_OTLP_HEADERS", true, problems),
    ...parseKeyValueList(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS ?? "", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", true, problems),
  };
  const resourceAttributes = parseKeyValueList(env.OTEL_RESOURCE_ATTRIBUTES ?? "", "OTEL_RESOURCE_ATTRIBUTES", false, problems);
  const serviceName = env.OTEL_SERVICE_NAME?.trim() || resourceAttributes["service.name"] || "hookline";

  const samplerRaw = env.OTEL_TRACES_SAMPLER?.trim() || "parentbased_always_on";
  let sampler: TracingConfig["sampler"] = { name: "parentbased_always_on", ratio: 1 };
  if (!(SAMPLERS as readonly string[]).includes(samplerRaw)) {
    problems.push(`OTEL_TRACES_SAMPLER=${JSON.stringify(samplerRaw)} is not supported: must be one of ${SAMPLERS.join(", ")} (default parentbased_always_on)`);
  } else {
    const argRaw = env.OTEL_TRACES_SAMPLER_ARG?.trim();
    const ratio = argRaw ? Number(argRaw) : 1;
    if (samplerRaw.endsWith("traceidratio") && (!Number.isFinite(ratio) || ratio < 0 || ratio > 1)) problems.push(`OTEL_TRACES_SAMPLER_ARG=${JSON.stringify(argRaw)} is invalid: a ratio from 0 to 1`);
    sampler = { name: samplerRaw as SamplerName, ratio: Number.isFinite(ratio) ? Math.min(1, Math.max(0, ratio)) : 1 };
  }

  const timeoutVar = env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT?.trim() ? "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT" : "OTEL_EXPORTER_OTLP_TIMEOUT";
  return {
    url: url.href,
    urlRedacted: redact(url),
    headers,
    headerNames: Object.keys(headers),
    serviceName,
    resourceAttributes,
    sampler,
    scheduleDelayMs: milliseconds(env, "OTEL_BSP_SCHEDULE_DELAY", 5_000, 600_000, problems),
    exportTimeoutMs: milliseconds(env, timeoutVar, 10_000, 600_000, problems),
  };
}

/** The variables above, for docs/api.md (config.ts's ENV_DOCS ends with them). */
export const TRACING_ENV_DOCS: Array<{ name: string; default: string; range: string; what: string }> = [
  { name: "OTEL_EXPORTER_OTLP_ENDPOINT", default: "empty: no spans exported", range: "http:// or https:// URL (OTLP/HTTP)", what: "export a CLIENT span per attempt and per replay to this OTLP/HTTP endpoint (`/v1/traces` is appended); unset, nothing of the OpenTelemetry SDK is loaded" },
  { name: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", default: "empty", range: "http:// or https:// URL", what: "the same, used as it is (no path appended); wins over OTEL_EXPORTER_OTLP_ENDPOINT" },
  { name: "OTEL_EXPORTER_OTLP_HEADERS", default: "empty", range: "key=value list, percent-encoded", what: "headers of every export, e.g. an API key; never logged (only their names)" },
  { name: "OTEL_EXPORTER_OTLP_TRACES_HEADERS", default: "empty", range: "key=value list, percent-encoded", what: "more headers, winning over OTEL_EXPORTER_OTLP_HEADERS for the same name" },
  { name: "OTEL_EXPORTER_OTLP_PROTOCOL", default: "http/json", range: "http/json, http/protobuf (sent as http/json, with a warning)", what: "Hookline exports OTLP/HTTP with JSON bodies; grpc is refused (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL wins)" },
  { name: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", default: "empty", range: "as OTEL_EXPORTER_OTLP_PROTOCOL", what: "the same, for traces" },
  { name: "OTEL_EXPORTER_OTLP_TIMEOUT", default: "10000", range: "0..600000", what: "ms one export may take (OTEL_EXPORTER_OTLP_TRACES_TIMEOUT wins)" },
  { name: "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", default: "empty", range: "0..600000", what: "the same, for traces" },
  { name: "OTEL_SERVICE_NAME", default: "hookline", range: "", what: "the spans' service.name" },
  { name: "OTEL_RESOURCE_ATTRIBUTES", default: "empty", range: "key=value list, percent-encoded", what: "more resource attributes (deployment.environment.name=prod, ...); OTEL_SERVICE_NAME wins for service.name" },
  { name: "OTEL_TRACES_SAMPLER", default: "parentbased_always_on", range: "always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio", what: "which attempts are recorded; parent-based follows the producer's sampled flag" },
  { name: "OTEL_TRACES_SAMPLER_ARG", default: "1", range: "0..1", what: "the ratio of the traceidratio samplers" },
  { name: "OTEL_TRACES_EXPORTER", default: "otlp", range: "otlp, none", what: "none: no spans, whatever the endpoint" },
  { name: "OTEL_BSP_SCHEDULE_DELAY", default: "5000", range: "0..600000", what: "ms finished spans wait to be exported in one batch" },
  { name: "OTEL_SDK_DISABLED", default: "false", range: "true, false", what: "true: no spans, whatever the endpoint" },
];
