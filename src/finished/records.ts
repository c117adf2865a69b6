// What the index of finished deliveries keeps per delivery: the one shape terminal-index.ts
// fills and retention, the storage budget, deletes and replay read (its own module, so the
// modules it feeds do not import the index that feeds them).
import type { ObjectMeta } from "../kube/types.js";

export type TerminalPhase = "Succeeded" | "DeadLettered" | "Discarded";

/** What the index keeps per finished delivery: a few small fields, strings shared where they repeat. */
export interface TerminalRecord {
  metadata: Pick<ObjectMeta, "name" | "namespace" | "resourceVersion"> & { annotations?: Record<string, string> };
  subscription: string;
  phase: TerminalPhase;
  /** Epoch ms: finishedAt, or creation when absent. */
  finishedAt: number;
  /** spec.eventType (what a replay's selector matches). */
  eventType?: string;
  /** The reason of a dead letter (its Succeeded condition's). */
  reason?: string;
  /** The ordering lane recorded in its status (ordered subscriptions only). */
  ordering?: { key: string; value: string };
  /** Succeeded, and was a dead letter (delivered by a replay): kept for retention.deadLettered. */
  wasDeadLetter?: true;
}
