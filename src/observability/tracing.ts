// Tracing of webhook attempts. Every attempt (a replay is one) is sent in the producer's trace:
// the delivery's spec.traceContext (or a stream message's traceparent/tracestate headers).
//
// - Tracing off (no OTEL_EXPORTER_OTLP_ENDPOINT): the producer's traceparent and tracestate
//   are sent as they are, a pass-through as W3C describes it, and nothing of the OpenTelemetry
//   SDK is loaded (PASS_THROUGH below imports nothing).
// - Tracing on: each attempt is a CLIENT span, child of the producer's context (or the root of a
//   new trace when there is none), exported over OTLP/HTTP (./otel.ts, loaded only then); the
//   attempt sends `traceparent` with that span's id, so the receiver's spans hang below it, and
//   the producer's `tracestate` unchanged.
//
// Log lines of an attempt carry `trace_id` (and `span_id` when a span is recorded).
import type { AttemptResult } from "../core/outcome.js";
import { traceIdOf, type TraceContext } from "../core/trace-context.js";
import type { TracingConfig } from "../config/tracing.js";

/** What a span says about one attempt. */
export interface AttemptInfo {
  namespace: string;
  /** The delivery's name (in stream mode, the message's key). */
  delivery: string;
  subscription: string;
  /** 1 for the first attempt; replays and interrupted attempts are numbered too. */
  attempt?: number | undefined;
  replay: boolean;
  /** The webhook id (sent as webhook-id). */
  eventId: string;
  url: string;
  /** The producer's trace context, in the stored form. */
  parent?: TraceContext | undefined;
}

export interface AttemptTrace {
  /** traceparent (and tracestate) to send with the request; empty when the attempt is in no trace. */
  readonly headers: Readonly<Record<string, string>>;
  /** For the attempt's log lines. */
  readonly log: Readonly<{ trace_id?: string; span_id?: string }>;
  /** Records the outcome and ends the span; once. */
  end(result: AttemptResult | { error: Error }): void;
}

export interface AttemptTracer {
  /** Starts the trace of one attempt, right before its request is sent. */
  start(info: AttemptInfo): AttemptTrace;
  /** Exports what is left (bounded) and stops. */
  shutdown(): Promise<void>;
}

function headersOf(parent: TraceContext | undefined): Record<string, string> {
  if (!parent) return {};
  return { traceparent: parent.traceparent, ...(parent.tracestate ? { tracestate: parent.tracestate } : {}) };
}

/** Tracing off: the producer's context is sent unchanged and nothing is recorded. */
export const PASS_THROUGH: AttemptTracer = {
  start(info) {
    const traceId = traceIdOf(info.parent);
    return { headers: headersOf(info.parent), log: traceId ? { trace_id: traceId } : {}, end: () => undefined };
  },
  shutdown: () => Promise.resolve(),
};

export interface TracerLog {
  info(fields: Record<string, unknown>, msg: string): void;
  warn(fields: Record<string, unknown>, msg: string): void;
}

/**
 * The tracer for a configuration: PASS_THROUGH when tracing is off, else the OpenTelemetry
 * SDK's (imported only now, so an operator without tracing never loads it).
 */
export async function createAttemptTracer(config: TracingConfig | undefined, opts: { log: TracerLog; version: string }): Promise<AttemptTracer> {
  if (!config) return PASS_THROUGH;
  const { OtelAttemptTracer } = await import("./otel.js");
  return new OtelAttemptTracer(config, opts);
}

/**
 * url.full as a span may carry it: scheme, host and port, with the path and the query values
 * replaced by REDACTED and no user information. Webhook URLs often hold their secret in the path
 * (https://hooks.slack.com/services/T…/B…/…) or the query (?token=…), and traces are read by
 * more people than Secrets are. The subscription is named in hookline.subscription.
 */
export function redactedUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return "REDACTED";
  }
  const path = url.pathname === "/" || url.pathname === "" ? "/" : "/REDACTED";
  const query = [...url.searchParams.keys()].map((k) => `${encodeURIComponent(k)}=REDACTED`).join("&");
  const user = url.username || url.password ? "REDACTED:REDACTED@" : "";
  return `${url.protocol}//${user}${url.host}${path}${query ? `?${query}` : ""}`;
}
