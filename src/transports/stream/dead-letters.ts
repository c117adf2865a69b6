// Stream mode's final outcomes other than delivered become custom resources, as in CR mode: a
// WebhookDelivery for the subscription (spec: subscriptionRef, eventType, eventId, payload,
// traceContext), then one status write with the outcome core/attempt/outcome.ts computed (attempt
// history, deadLetter or discard reason), so replay, the field selector, retention, the
// dashboard and every dead-letter rule work on it unchanged.
//
// How the object is made, named and found again after a crash: message-deliveries.ts. Until its
// status is written, CR mode never attempts it (core/attempt/plan.ts: hookline.dev/stream-message).
//
// A failure to create it is reported loudly (dead-letter-failures.ts) before the caller keeps
// the message and tries again.
import { ANNOTATIONS, isTerminalPhase } from "../../api/names.js";
import type { Final, OutcomeResult } from "../../core/attempt/outcome.js";
import type { KubeClient } from "../../kube/client.js";
import { objectKey } from "../../kube/types.js";
import type { OutcomeMeta } from "../../delivery/finals.js";
import type { DeliveryObject } from "../../delivery/objects.js";
import type { OutcomeWriter } from "../../delivery/outcome-writer.js";
import { createMessageDelivery, type MessageEvent } from "./message-deliveries.js";
import { DeadLetterFailures, type DeadLetterFailuresDeps } from "./dead-letter-failures.js";

/** One message's final outcome, to be recorded as a WebhookDelivery. */
export interface StreamFinal extends MessageEvent {
  result: OutcomeResult;
}

export interface Recorded {
  obj: DeliveryObject;
  /** The final phase written now; undefined when an earlier delivery of this message had it already. */
  final?: Final;
}

export interface StreamDeadLettersDeps extends DeadLetterFailuresDeps {
  client: KubeClient;
  outcomes: OutcomeWriter<OutcomeMeta>;
}

export class StreamDeadLetters {
  private readonly failures: DeadLetterFailures;

  constructor(private readonly d: StreamDeadLettersDeps) {
    this.failures = new DeadLetterFailures(d);
  }

  /** Creates the delivery (or finds this message's own) and writes its final status; a failure is reported, then thrown. */
  async record(f: StreamFinal): Promise<Recorded> {
    try {
      return await this.recordOnce(f);
    } catch (err) {
      this.failures.report(f.namespace, f.subscription, err);
      throw err;
    }
  }

  private async recordOnce(f: StreamFinal): Promise<Recorded> {
    const made = await createMessageDelivery(this.d.client, this.d.outcomes, f, ANNOTATIONS.streamMessage);
    if (!made.created && isTerminalPhase(made.obj.status?.phase)) return { obj: made.obj };
    const key = objectKey(made.obj.metadata);
    const written = await this.d.outcomes.write(key, made.obj, () => f.result);
    if (!written) throw new Error(`dead letter ${key} was deleted before its status was written`);
    return { obj: written.obj, ...(written.final ? { final: written.final } : {}) };
  }
}
