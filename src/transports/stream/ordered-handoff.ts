// spec.ordering in stream mode (docs/adr/0014-ordered-stream-events-become-deliveries.md): an
// ordered subscription's consumer lets one message out at a time (max_ack_pending 1,
// jetstream/consumers.ts), and each becomes a WebhookDelivery (message-deliveries.ts, annotation
// hookline.dev/stream-ordered with the message's sequence) before it is acknowledged. CR mode's
// ordering lanes then deliver it: one in flight per key value, in publish order (the sequence
// settles what the creation time cannot), a dead letter blocking its key until it is replayed,
// discarded or deleted. The state that ordering needs (which event of a key is next, which dead
// letter blocks it) is then kept where CR mode keeps it, durably, for every replica.
//
// The next message is not let out before this one is acknowledged, and this one is acknowledged
// only once its delivery exists: publish order holds across a crash, a hand-back or a NATS
// restart (a message that comes again finds its own delivery and is acknowledged).
import { ANNOTATIONS } from "../../api/names.js";
import type { KubeClient } from "../../kube/client.js";
import type { OutcomeMeta } from "../../delivery/finals.js";
import type { OutcomeWriter } from "../../delivery/outcome-writer.js";
import { createMessageDelivery, type MadeDelivery, type MessageEvent } from "./message-deliveries.js";

export interface OrderedHandOffDeps {
  client: KubeClient;
  outcomes: OutcomeWriter<OutcomeMeta>;
}

export class OrderedHandOff {
  constructor(private readonly d: OrderedHandOffDeps) {}

  /** The event's delivery: created, or found (this message's own, made before it came again). */
  make(e: MessageEvent): Promise<MadeDelivery> {
    return createMessageDelivery(this.d.client, this.d.outcomes, e, ANNOTATIONS.streamOrdered);
  }
}
