// Tracing on (OTEL_EXPORTER_OTLP_ENDPOINT): one CLIENT span per attempt, exported in batches over
// OTLP/HTTP with OpenTelemetry's own SDK. The only module that imports @opentelemetry/*; loaded
// by tracing.ts only when tracing is configured. No global provider or context manager is
// registered: the span's parent (the producer's context) is passed explicitly.
import { createTraceState, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags, type Attributes, type Context, type Span } from "@opentelemetry/api";
import { ExportResultCode } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { AlwaysOffSampler, AlwaysOnSampler, BasicTracerProvider, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, type ReadableSpan, type Sampler, type SpanExporter } from "@opentelemetry/sdk-trace-base";
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_SERVICE_NAME,
  ATTR_SERVICE_VERSION,
  ATTR_URL_FULL,
  ATTR_URL_SCHEME,
} from "@opentelemetry/semantic-conventions";
import type { TracingConfig } from "../config/tracing.js";
import type { AttemptResult } from "../core/attempt/outcome.js";
import { childTraceparent, parseTraceparent } from "../core/request/trace-context.js";
import { redactedUrl, type AttemptInfo, type AttemptTrace, type AttemptTracer, type TracerLog } from "./attempt-trace.js";

/** Hookline's own span attributes (the semantic conventions name the HTTP ones). */
export const ATTRS = {
  namespace: "hookline.namespace",
  subscription: "hookline.subscription",
  delivery: "hookline.delivery",
  attempt: "hookline.attempt",
  replay: "hookline.replay",
  eventId: "hookline.event.id",
} as const;

const SHUTDOWN_MS = 5_000;
/** A failing endpoint is reported at most this often. */
const EXPORT_WARNING_INTERVAL_MS = 60_000;

/** The exporter, saying in the log (at most once a minute) when spans could not be exported. */
function reporting(inner: SpanExporter, log: TracerLog, endpoint: string): SpanExporter {
  let lastWarning = -Infinity;
  let dropped = 0;
  return {
    export(spans: ReadableSpan[], done) {
      inner.export(spans, (result) => {
        if (result.code !== ExportResultCode.SUCCESS) {
          dropped += spans.length;
          const now = Date.now();
          if (now - lastWarning >= EXPORT_WARNING_INTERVAL_MS) {
            lastWarning = now;
            log.warn({ endpoint, droppedSpans: dropped, err: result.error?.message }, "spans could not be exported to the OTLP endpoint; deliveries are not affected");
            dropped = 0;
          }
        }
        done(result);
      });
    },
    shutdown: () => inner.shutdown(),
    forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
  };
}

function sampler(cfg: TracingConfig["sampler"]): Sampler {
  const ratio = new TraceIdRatioBasedSampler(cfg.ratio);
  switch (cfg.name) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return ratio;
    case "parentbased_always_on":
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: ratio });
  }
}

/** The producer's context as a remote parent; the root context when there is none. */
function parentContext(info: AttemptInfo): Context {
  const parsed = info.parent ? parseTraceparent(info.parent.traceparent) : undefined;
  if (!parsed?.ok) return ROOT_CONTEXT;
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: parsed.value.traceId,
    spanId: parsed.value.parentId,
    traceFlags: parsed.value.flags & TraceFlags.SAMPLED,
    isRemote: true,
    ...(info.parent?.tracestate ? { traceState: createTraceState(info.parent.tracestate) } : {}),
  });
}

function attributesOf(info: AttemptInfo): Attributes {
  const attrs: Attributes = {
    [ATTR_HTTP_REQUEST_METHOD]: "POST",
    [ATTR_URL_FULL]: redactedUrl(info.url),
    [ATTRS.namespace]: info.namespace,
    [ATTRS.subscription]: info.subscription,
    [ATTRS.delivery]: info.delivery,
    [ATTRS.replay]: info.replay,
    [ATTRS.eventId]: info.eventId,
  };
  if (info.attempt !== undefined) attrs[ATTRS.attempt] = info.attempt;
  try {
    const url = new URL(info.url);
    attrs[ATTR_URL_SCHEME] = url.protocol.replace(/:$/, "");
    attrs[ATTR_SERVER_ADDRESS] = url.hostname.replace(/^\[|\]$/g, "");
    attrs[ATTR_SERVER_PORT] = url.port ? Number(url.port) : url.protocol === "https:" ? 443 : 80;
  } catch {
    // An unparsable URL fails the attempt; the span says so through error.type.
  }
  return attrs;
}

/** The outcome on the span: status code, error.type (the status for >= 400, else the metric's reason) and the span status. */
function recordOutcome(span: Span, result: AttemptResult | { error: Error }): void {
  if ("classification" in result) {
    if (result.responseStatus !== undefined) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, result.responseStatus);
    const c = result.classification;
    const delivered = c !== "interrupted" && c.verdict === "delivered";
    if (delivered) return;
    const errorType = result.responseStatus !== undefined && result.responseStatus >= 400 ? String(result.responseStatus) : c === "interrupted" ? "interrupted" : c.reason;
    span.setAttribute(ATTR_ERROR_TYPE, errorType);
    span.setStatus({ code: SpanStatusCode.ERROR });
    return;
  }
  // Not sent at all (a Secret went missing for a replay, say): no message (it may name a Secret's key), only its kind.
  span.setAttribute(ATTR_ERROR_TYPE, result.error.name || "Error");
  span.setStatus({ code: SpanStatusCode.ERROR });
}

export class OtelAttemptTracer implements AttemptTracer {
  private readonly provider: BasicTracerProvider;
  private readonly tracer;

  constructor(
    private readonly config: TracingConfig,
    private readonly opts: { log: TracerLog; version: string },
  ) {
    const exporter = reporting(new OTLPTraceExporter({ url: config.url, headers: { ...config.headers }, timeoutMillis: config.exportTimeoutMs }), opts.log, config.urlRedacted);
    this.provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ ...config.resourceAttributes, [ATTR_SERVICE_NAME]: config.serviceName, [ATTR_SERVICE_VERSION]: opts.version }),
      sampler: sampler(config.sampler),
      spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: config.scheduleDelayMs, exportTimeoutMillis: config.exportTimeoutMs })],
    });
    this.tracer = this.provider.getTracer("hookline", opts.version);
    // Where and with which header names, never their values.
    opts.log.info({ endpoint: config.urlRedacted, headers: config.headerNames, serviceName: config.serviceName, sampler: config.sampler.name }, "exporting a span per attempt (OpenTelemetry)");
  }

  start(info: AttemptInfo): AttemptTrace {
    const span = this.tracer.startSpan("POST", { kind: SpanKind.CLIENT, attributes: attributesOf(info) }, parentContext(info));
    const sc = span.spanContext();
    const sampled = (sc.traceFlags & TraceFlags.SAMPLED) !== 0;
    const headers: Record<string, string> = { traceparent: childTraceparent(info.parent, sc.traceId, sc.spanId, sampled) };
    if (info.parent?.tracestate) headers.tracestate = info.parent.tracestate;
    let ended = false;
    return {
      headers,
      log: span.isRecording() ? { trace_id: sc.traceId, span_id: sc.spanId } : { trace_id: sc.traceId },
      end: (result) => {
        if (ended) return;
        ended = true;
        if (span.isRecording()) recordOutcome(span, result);
        span.end();
      },
    };
  }

  async shutdown(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), SHUTDOWN_MS)));
    try {
      const r = await Promise.race([this.provider.shutdown().then(() => "done" as const), timeout]);
      if (r === "timeout") this.opts.log.warn({ endpoint: this.config.urlRedacted, timeoutMs: SHUTDOWN_MS }, "spans not exported at shutdown: the OTLP endpoint did not answer in time");
    } catch (err) {
      this.opts.log.warn({ endpoint: this.config.urlRedacted, err: (err as Error).message }, "spans not exported at shutdown");
    } finally {
      clearTimeout(timer);
    }
  }
}
