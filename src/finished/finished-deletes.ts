// Deletes finished deliveries (retention, dead-letter overflow, the storage budget), at most a
// few at once beside the delivery writes, never the same one twice, and only the version that
// was indexed: a delivery annotated for replay meanwhile is kept.
import type { Logger } from "pino";
import { ACCEPT, ApiError, type KubeClient } from "../kube/client.js";
import { objectKey, objectPath } from "../kube/types.js";
import { DELIVERIES } from "../delivery/objects.js";
import type { TerminalRecord } from "./records.js";

/** Deletes run at most this many at once. */
const MAX_CONCURRENT_DELETES = 8;
/** A delete that failed (not 404/409) is tried again this much later. */
export const DELETE_RETRY_MS = 30_000;

export type DeleteReason = "retention" | "overflow" | "budget";

export interface FinishedDeletesDeps {
  client: KubeClient;
  log: Logger;
  /** A delete failed: try again at `at` (the retention timer). */
  retryAt: (key: string, at: number) => void;
  now?: () => number;
}

export class FinishedDeletes {
  private running = 0;
  private readonly waiters: Array<() => void> = [];
  /** Deliveries being deleted (or waiting for a delete slot): never deleted twice. */
  private readonly deleting = new Set<string>();
  private readonly now: () => number;

  constructor(private readonly d: FinishedDeletesDeps) {
    this.now = d.now ?? Date.now;
  }

  /** True when this call deleted it (false: gone already, changed since indexed, or failed). */
  async delete(rec: TerminalRecord, why: DeleteReason): Promise<boolean> {
    const key = objectKey(rec.metadata);
    if (this.deleting.has(key)) return false;
    this.deleting.add(key);
    try {
      if (this.running >= MAX_CONCURRENT_DELETES) await new Promise<void>((r) => this.waiters.push(r));
      this.running++;
      try {
        return await this.deleteNow(rec, why);
      } finally {
        this.running--;
        this.waiters.shift()?.();
      }
    } finally {
      this.deleting.delete(key);
    }
  }

  private async deleteNow(rec: TerminalRecord, why: DeleteReason): Promise<boolean> {
    const key = objectKey(rec.metadata);
    try {
      await this.d.client.request({
        method: "DELETE",
        path: objectPath(DELIVERIES, rec.metadata.namespace, rec.metadata.name),
        accept: ACCEPT.objectMetadata,
        body: { kind: "DeleteOptions", apiVersion: "v1", preconditions: { resourceVersion: rec.metadata.resourceVersion } },
      });
      this.d.log.debug({ delivery: key, why }, "deleted finished delivery");
      return true;
    } catch (err) {
      if (err instanceof ApiError && (err.isNotFound || err.status === 409)) return false;
      this.d.log.warn({ delivery: key, why, err: (err as Error).message }, "could not delete finished delivery");
      this.d.retryAt(key, this.now() + DELETE_RETRY_MS);
      return false;
    }
  }
}
