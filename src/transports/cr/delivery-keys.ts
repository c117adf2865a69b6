// The delivery work queue's reconciler: which module a delivery key goes to. An outcome that
// waits to be written always goes first (the delivery reconciler writes it); replay takes the
// keys it claims (a bulk replay's dead letters, finished deliveries annotated for replay); the
// delivery reconciler takes the rest. Whichever ran, a request slot held for the key and not
// taken goes to the next waiter.
import type { ReconcileContext, Reconciler, Result } from "../../runtime/controller.js";
import type { EndpointRegistry } from "../../delivery/engine/endpoints.js";

export interface DeliveryKeysDeps {
  deliveries: Reconciler;
  replay: Reconciler & { claims(key: string): boolean };
  /** Whether an attempt's outcome for the key waits to be written. */
  hasUnwritten(key: string): boolean;
  endpoints: Pick<EndpointRegistry, "settle">;
}

export class DeliveryKeys implements Reconciler {
  constructor(private readonly d: DeliveryKeysDeps) {}

  async reconcile(key: string, signal: AbortSignal, ctx: ReconcileContext): Promise<Result | void> {
    try {
      if (!this.d.hasUnwritten(key) && this.d.replay.claims(key)) return await this.d.replay.reconcile(key, signal, ctx);
      return await this.d.deliveries.reconcile(key, signal, ctx);
    } finally {
      this.d.endpoints.settle(key);
    }
  }
}
