// What the attempt executor and the tracers agree on: the span's facts about one attempt, the
// trace an attempt carries, the tracer, and how a URL is shown in a span. Its own module, so the
// OpenTelemetry tracer (./otel.ts, loaded on demand by ./tracing.ts) and tracing.ts both import
// it and not each other.
import type { AttemptResult } from "../core/attempt/outcome.js";
import type { TraceContext } from "../core/request/trace-context.js";

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

export interface TracerLog {
  info(fields: Record<string, unknown>, msg: string): void;
  warn(fields: Record<string, unknown>, msg: string): void;
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
