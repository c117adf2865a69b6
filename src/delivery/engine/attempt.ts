// The attempt executor: the one place a webhook request is made. Given what to send, the
// subscription's policy, its endpoint and the admission plan() granted, it takes the endpoint's
// slots, builds and signs the request, sends it, classifies the answer, records it in the
// metrics and on the endpoint (breaker, health), and hands the result to the transport, which
// records it (a status write in CR mode). It knows nothing of where the work came from.
import { cachedTransform } from "../../core/transform.js";
import type { Logger } from "pino";
import { attemptStatusLabel, classify } from "../../core/attempt/classify.js";
import { attemptOutcome, type AttemptResult } from "../../core/attempt/outcome.js";
import type { EndpointCommit } from "../../core/attempt/plan.js";
import type { Policy } from "../../core/attempt/policy.js";
import type { Metrics } from "../../observability/metrics.js";
import { redactedUrl } from "../../observability/attempt-trace.js";
import { PASS_THROUGH, type AttemptTracer } from "../../observability/tracing.js"; // [tracing]
import type { TraceContext } from "../../core/request/trace-context.js"; // [tracing]
import type { Credentials, ResolvedCredentials } from "./credentials.js"; // [receiver-credentials]
import type { Endpoint, EndpointRegistry } from "./endpoints.js";
import { splitKey } from "../../kube/types.js";
import { subscriptionLabels } from "../objects.js";
import { buildRequest, type RequestBody } from "./request.js";
import type { SendResult } from "./sender.js";

export interface AttemptSpec {
  /** The work's key (a delivery's "namespace/name"): slots and parking go by it. */
  key: string;
  endpoint: Endpoint;
  policy: Policy;
  /** The endpoint state the attempt was admitted with (a probe granted, a token taken). */
  commit: EndpointCommit;
  /** This attempt is the breaker's (or a Disabled endpoint's) single trial. */
  probe: boolean;
  /** An operator's replay: its result speaks for the endpoint whatever the breaker's state. */
  viaReplay: boolean;
  /** Signing keys, the current one first. */
  keys: Buffer[];
  /** [receiver-credentials] Resolved before planning by every transport and replay (`secretsFor`). */
  credentials: ResolvedCredentials | undefined;
  /** What to send; undefined when there is nothing to send any more (the delivery is gone). */
  message: (signal: AbortSignal) => Promise<RequestBody | undefined>;
  /** Aborted by a shutdown: the attempt ends as interrupted. */
  signal: AbortSignal;
  /** [tracing] The producer's trace context (spec.traceContext, a stream message's headers). */
  trace?: TraceContext | undefined;
  /** For the attempt's log line and span: its number (status.lastAttempt.number + 1). */
  attempt?: number;
  /** For the attempt's log line: a replay to another subscription (its name). */
  target?: string;
}

/**
 * Stream mode, where every replica delivers: a probe granted here is one replica's only once it
 * is claimed in the state the replicas share (src/transports/stream/shared-endpoints.ts).
 */
export interface ProbeClaims {
  /** Claims the probe `ep` was just granted; false: another replica holds it, nothing is sent. */
  claim(ep: Endpoint, policy: Policy): Promise<boolean>;
  /** After the probe's report: shares its verdict (or its release); after a lost claim, takes the winner's state. */
  settled(ep: Endpoint, policy: Policy, claimed: boolean): void;
}

export interface AttemptExecutorDeps {
  endpoints: EndpointRegistry;
  /** [receiver-credentials] Sends through the Sender with the Secret headers, TLS identity, proxy and OAuth2 token (one refresh and re-send on a 401). */
  credentials: Pick<Credentials, "send">;
  metrics: Metrics;
  userAgent: string;
  /** [tracing] Sends each attempt in the producer's trace, as a CLIENT span when tracing is on (src/observability/tracing.ts); default: pass-through. */
  tracing?: AttemptTracer;
  /** Writes the one `webhook_attempt` line per attempt, with trace_id and span_id (observability/logger.ts ATTEMPT_LOG_LINE). */
  log?: Logger;
  /** Stream mode: probes are claimed across replicas before they are sent. */
  probes?: ProbeClaims;
  now?: () => number;
}

export class AttemptExecutor {
  private readonly now: () => number;

  constructor(private readonly d: AttemptExecutorDeps) {
    this.now = d.now ?? Date.now;
  }

  /**
   * One attempt. `record` runs before the endpoint's slot is freed, so a crash leaves at most
   * maxInFlight deliveries per endpoint whose outcome is unknown (re-sent with the same
   * webhook-id; docs/adr/0004-send-first-record-after.md). Undefined when nothing was sent.
   */
  async run<T>(spec: AttemptSpec, record: (result: AttemptResult) => Promise<T>): Promise<T | undefined> {
    const { endpoint: ep, policy, probe } = spec;
    const { endpoints, probes } = this.d;
    endpoints.acquire(ep, spec.commit, spec.key);
    // Whether this attempt holds a probe another replica could also have been granted.
    const claiming = probe && probes !== undefined;
    let claimed = false;
    try {
      let message: RequestBody | undefined;
      try {
        claimed = claiming && (await probes.claim(ep, policy));
        if (!claiming || claimed) message = await spec.message(spec.signal);
      } finally {
        // Nothing will be sent: a probe granted to this attempt is given back.
        if (!message && probe) endpoints.report(ep, policy, "interrupted", { probe, viaReplay: spec.viaReplay });
        if (claiming && !claimed) probes.settled(ep, policy, false);
      }
      if (!message) return undefined;
      const startedAt = this.now();
      // spec.transform builds the body sent (and signed) from the event; it failing on this
      // event sends nothing and dead-letters it at once (invalid_request: PermanentFailure),
      // replayable once fixed. The endpoint is not judged by it: a probe is given back.
      if (policy.transform !== undefined) {
        const t = transformBody(policy.transform, message, splitKey(spec.key).namespace);
        if (!t.ok) {
          if (probe) endpoints.report(ep, policy, "interrupted", { probe, viaReplay: spec.viaReplay });
          const failed: AttemptResult = { startedAt, durationMs: 0, error: `spec.transform: ${t.message}`, classification: { verdict: "permanent", reason: "invalid_request" } };
          this.count(ep.key, failed);
          this.logAttempt(spec, message, failed, {});
          return await record(failed);
        }
        message = t.message;
      }
      // [receiver-credentials] sent through src/delivery/engine/credentials.ts (which calls the Sender).
      const credentials = spec.credentials;
      // Nothing is sent without what the receiver requires (plan() waits for it before this).
      if (credentials?.kind === "missing") throw new Error(credentials.message);
      const request = buildRequest({ message, policy, keys: spec.keys, userAgent: this.d.userAgent, startedAt, signal: spec.signal });
      const trace = this.startTrace(spec, message.id); // [tracing]
      Object.assign(request.headers, trace.headers); // [tracing] traceparent, tracestate
      let result: AttemptResult;
      try {
        result = toAttemptResult(await this.d.credentials.send(credentials, request), startedAt);
      } catch (err) {
        trace.end({ error: err as Error }); // [tracing]
        throw err;
      }
      trace.end(result); // [tracing]
      this.count(ep.key, result);
      this.logAttempt(spec, message, result, trace.log);
      endpoints.report(ep, policy, result.classification, { probe, viaReplay: spec.viaReplay });
      // A 429/503 with Retry-After holds the whole endpoint, whichever transport asked.
      endpoints.holdFor(ep, policy, result);
      return await record(result);
    } finally {
      endpoints.release(ep, policy.maxInFlight);
      if (claimed) probes!.settled(ep, policy, true);
    }
  }

  /** [tracing] The attempt's span (or the producer's context passed through), started right before the request. */
  private startTrace(spec: AttemptSpec, eventId: string) {
    const { namespace, name } = splitKey(spec.key);
    return (this.d.tracing ?? PASS_THROUGH).start({
      namespace,
      delivery: name,
      subscription: splitKey(spec.endpoint.key).name,
      attempt: spec.attempt,
      replay: spec.viaReplay,
      eventId,
      url: spec.policy.url,
      parent: spec.trace,
    });
  }

  /** An attempt refused because the endpoint's breaker is open (whenOpen: DeadLetter). */
  countBreakerOpen(subKey: string): void {
    this.d.metrics.countAttempt(subscriptionLabels(subKey), "failure", "circuit_open");
  }

  /** One held attempt (an Open breaker under Defer: circuit_open; a Retry-After hold: retry_after). */
  countHeld(subKey: string, reason: "circuit_open" | "retry_after"): void {
    this.d.metrics.held.inc({ ...subscriptionLabels(subKey), reason });
  }

  /** The attempt's record, one info line, for a log store (event id, number, result, status, and the trace it was sent in). */
  private logAttempt(spec: AttemptSpec, message: RequestBody, r: AttemptResult, trace: { trace_id?: string; span_id?: string }): void {
    const log = this.d.log;
    if (!log?.isLevelEnabled("info")) return;
    const c = r.classification;
    log.info(
      {
        eventId: message.id,
        // The specification's names: type, endpoint (the URL with its path and query values
        // redacted, as in the attempt's span: webhook URLs carry secrets), statusCode.
        type: message.type ?? null,
        endpoint: redactedUrlOf(spec.policy),
        delivery: spec.key,
        subscription: spec.endpoint.key,
        attempt: spec.attempt ?? null,
        result: attemptOutcome(c),
        status: r.responseStatus ?? null,
        statusCode: r.responseStatus ?? null,
        reason: c === "interrupted" ? "interrupted" : c.reason,
        durationMs: Math.round(r.durationMs),
        ...(spec.viaReplay ? { replay: true } : {}),
        ...(spec.target ? { target: spec.target } : {}),
        ...trace,
      },
      "webhook_attempt",
    );
  }

  /** One signal per real attempt in webhook_delivery_attempts_total (and its duration). */
  private count(subKey: string, result: AttemptResult): void {
    const labels = subscriptionLabels(subKey);
    const c = result.classification;
    if (c === "interrupted") {
      this.d.metrics.countAttempt(labels, "failure", "interrupted");
      return;
    }
    this.d.metrics.countAttempt(labels, attemptStatusLabel(c), c.reason);
    this.d.metrics.attemptDuration.observe(labels, result.durationMs / 1000);
  }
}

/** The body a transform builds from the standard body's event (core/transform.ts); the id and type stay. */
export function transformBody(source: string, message: RequestBody, namespace: string): { ok: true; message: RequestBody } | { ok: false; message: string } {
  const compiled = cachedTransform(source);
  if (!compiled.ok) return { ok: false, message: compiled.message };
  const event = JSON.parse(message.body) as { id: string; type: string | null; data: unknown };
  const r = compiled.transform.run({ id: event.id, type: event.type ?? "", namespace, data: event.data });
  return r.ok ? { ok: true, message: { ...message, body: r.body } } : r;
}

const redactedUrls = new WeakMap<Policy, string>();
/** The policy's URL as the attempt's log line shows it, worked out once per policy (a subscription's spec). */
function redactedUrlOf(policy: Policy): string {
  let text = redactedUrls.get(policy);
  if (text === undefined) redactedUrls.set(policy, (text = redactedUrl(policy.url)));
  return text;
}

/** What the sender answered, classified. */
export function toAttemptResult(sent: SendResult, startedAt: number): AttemptResult {
  if (sent.kind === "response") {
    return { startedAt, durationMs: sent.durationMs, responseStatus: sent.status, ...(sent.retryAfter ? { retryAfter: sent.retryAfter } : {}), classification: classify({ kind: "response", status: sent.status }) };
  }
  if (sent.interrupted) return { startedAt, durationMs: sent.durationMs, error: sent.message, classification: "interrupted" };
  return { startedAt, durationMs: sent.durationMs, error: sent.message, classification: classify({ kind: "error", code: sent.code, name: sent.code }) };
}
