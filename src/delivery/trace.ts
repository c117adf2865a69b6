// [tracing] What an attempt on a WebhookDelivery knows of its trace: the producer's trace context
// (spec.traceContext, as the publish doors stored it), for the executor's span
// (src/observability/tracing.ts). Stream mode reads the same from the message.
import { normalizeTraceContext, type TraceContext } from "../core/request/trace-context.js";
import type { DeliveryObject } from "./objects.js";

export function traceOf(obj: DeliveryObject): TraceContext | undefined {
  const stored = obj.spec?.traceContext;
  if (typeof stored?.traceparent !== "string") return undefined;
  // The API server checked it against the CRD it had; one that does not read is not sent.
  const r = normalizeTraceContext({ traceparent: stored.traceparent, ...(typeof stored.tracestate === "string" ? { tracestate: stored.tracestate } : {}) });
  return r.ok ? r.value : undefined;
}
