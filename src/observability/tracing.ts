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
import { traceIdOf, type TraceContext } from "../core/request/trace-context.js";
import type { TracingConfig } from "../config/tracing.js";
import type { AttemptTracer, TracerLog } from "./attempt-trace.js";

export { redactedUrl, type AttemptInfo, type AttemptTrace, type AttemptTracer, type TracerLog } from "./attempt-trace.js";

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

/**
 * The tracer for a configuration: PASS_THROUGH when tracing is off, else the OpenTelemetry
 * SDK's (imported only now, so an operator without tracing never loads it).
 */
export async function createAttemptTracer(config: TracingConfig | undefined, opts: { log: TracerLog; version: string }): Promise<AttemptTracer> {
  if (!config) return PASS_THROUGH;
  const { OtelAttemptTracer } = await import("./otel.js");
  return new OtelAttemptTracer(config, opts);
}
