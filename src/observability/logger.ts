// The root pino logger (JSON to stdout). Created once by the composition root; everything else
// gets a child. Known secret-bearing paths are redacted as a second line of defence: the first
// is that no code logs a secret, a header value, a URL path or a payload.
import { pino, type Logger } from "pino";

export function createLogger(opts: { level?: string; name?: string; destination?: NodeJS.WritableStream } = {}): Logger {
  return pino(
    {
      name: opts.name ?? "hookline",
      level: opts.level ?? "info",
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: {
        paths: ["secret", "*.secret", "headers.authorization", "*.headers.authorization", "token", "*.token", "payload", "*.payload"],
        censor: "[redacted]",
      },
      formatters: { level: (label) => ({ level: label }) },
    },
    opts.destination ?? stdoutDestination(),
  );
}

/**
 * Standard output, written asynchronously: lines logged while a write is on its way go out
 * together in the next one (at a few thousand attempts a second, one write per webhook_attempt
 * line was a measurable share of the operator's CPU). Nothing waits when the log is quiet: a
 * line is written as soon as the previous write finished. What is still buffered is written
 * synchronously when the process exits (pino registers that), so the drain lines are never
 * lost; a SIGKILL loses at most the lines of the write in progress.
 */
function stdoutDestination(): NodeJS.WritableStream {
  return pino.destination({ dest: 1, sync: false }) as unknown as NodeJS.WritableStream;
}

export type { Logger };

/**
 * A child of `parent` without its redaction, for the one line written per attempt
 * (webhook_attempt, ATTEMPT_LOG_LINE below), whose every field the engine builds from values
 * that are never secret: ids, names, a result, numbers, and the endpoint with its path and query
 * values already redacted. The redaction of the root's listed paths (`*.secret`, `*.payload`...)
 * can never match those fields, and it cost about 10 µs a line, three times the line without
 * it: about 4% of a stream-mode delivery's CPU. Never log an object from elsewhere through it.
 */
export function fixedFieldsLogger(parent: Logger, bindings: Record<string, string>): Logger {
  return parent.child(bindings, { redact: { paths: [], censor: "[redacted]" } });
}

/**
 * The shutdown log lines users alert and grep on (`msg` of a JSON line), in the order they
 * appear. src/delivery/drain.ts writes them; docs/api.md lists them, and a unit test checks
 * drain.ts still does.
 */
export const DRAIN_LOG_LINES = [
  { msg: "webhook_deliveries_drained", level: "info", fields: "drained, durationMs", when: "every in-flight delivery finished within WEBHOOK_DRAIN_TIMEOUT_MS (the only drain line on this path)" },
  { msg: "webhook_drain_timeout", level: "warn", fields: "inFlightAtStart, interrupted, drainTimeoutMs, action", when: "the drain timeout hit; the remaining attempts were aborted" },
  {
    msg: "webhook_drain_flushed_to_dlq",
    level: "warn",
    fields: "requeued, deadLettered, durationMs",
    when: "after webhook_drain_timeout, once the aborted attempts are recorded: requeued as interrupted (due at once for the next leader) or DeadLettered (reason Drain), per WEBHOOK_DRAIN_TIMEOUT_ACTION",
  },
] as const;

/** The one line each attempt writes (at info), for a log store: the attempt's record. */
export const ATTEMPT_LOG_LINE = {
  msg: "webhook_attempt",
  level: "info",
  fields: "eventId, type (the event type), endpoint (the URL, path and query values REDACTED), delivery (namespace/name), subscription (namespace/name), attempt (its number in status.history), result (Succeeded, Failed, Gone, PermanentFailure, Blocked, Interrupted), status and statusCode (the HTTP status or null: statusCode is the specification's name), reason (http_2xx, timeout, ...), durationMs, replay (true for a replay), target (a replay to another subscription), trace_id and span_id (the trace it was sent in: the producer's trace context, and the attempt's span when tracing is on)",
  when: "every attempt, once its answer is classified (before its outcome is written)",
} as const;
