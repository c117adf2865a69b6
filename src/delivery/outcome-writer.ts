// Writes a delivery's next status, owning every rule about how: one merge patch computed from
// the freshest copy, carrying the resourceVersion it was computed from; on a conflict the
// delivery is read again and the outcome re-applied, unless the stored status moved past the
// status it was computed from (then it is dropped: a delivered event never becomes a dead
// letter because a slower attempt wrote second), except a delivered attempt on a delivery not
// final yet, which is recorded as its next attempt so the event is not sent again. An attempt's
// outcome that cannot be written is kept and written before anything else happens to that
// delivery, so it is never sent again.
import type { Logger } from "pino";
import type { DeliveryStatus } from "../api/delivery.js";
import { dropLateOutcome, essentials, movedPast, type Final, type OutcomeResult } from "../core/attempt/outcome.js";
import { ACCEPT, ApiError, ignoreNotFound, type KubeClient } from "../kube/client.js";
import type { EventSink } from "../kube/events.js";
import { createMergePatch } from "../kube/merge-patch.js";
import type { StatusWriter } from "../kube/status-writer.js";
import { objectPath, splitKey } from "../kube/types.js";
import type { Expectations } from "../runtime/expectations.js";
import { DELIVERIES, deliveryRef, type DeliveryObject } from "./objects.js";

export type ComputeStatus = (status: DeliveryStatus | undefined) => OutcomeResult;

/** The delivery as written (its new metadata and status), and the final phase it reached. */
export interface Written {
  obj: DeliveryObject;
  final?: Final;
}

/** An attempt's outcome not recorded yet, with the status it was computed from. */
interface Unwritten<M> {
  compute: ComputeStatus;
  basis: DeliveryStatus | undefined;
  /** What the caller needs again when it is finally written. */
  meta: M;
}

/** The version expected of a delivery we deleted: none; the expectation ends when it leaves the cache. */
const DELETED = "(deleted)";

/** Conflicts in a row before a write gives up (and the key is retried with backoff). */
const MAX_CONFLICTS = 5;

export interface OutcomeWriterDeps {
  client: KubeClient;
  statusWriter: StatusWriter;
  expectations: Expectations;
  events: EventSink;
  log: Logger;
}

export class OutcomeWriter<M = unknown> {
  private readonly unwritten = new Map<string, Unwritten<M>>();
  /**
   * Set while outcome writes fail (API server unreachable): no new attempt starts until the
   * outcomes already made are recorded, so what lives only in memory stays small.
   */
  private writesFailing = false;

  constructor(private readonly d: OutcomeWriterDeps) {}

  /** Whether an outcome of `key` waits to be written. */
  hasUnwritten(key: string): boolean {
    return this.unwritten.has(key);
  }

  /** No new attempt should start: the API server is unreachable and outcomes wait to be written. */
  get holdingBack(): boolean {
    return this.writesFailing && this.unwritten.size > 0;
  }

  /** The delivery read from the API server; undefined when it does not exist. */
  fetch(key: string): Promise<DeliveryObject | undefined> {
    const { namespace, name } = splitKey(key);
    return ignoreNotFound(this.d.client.request<DeliveryObject>({ method: "GET", path: objectPath(DELIVERIES, namespace, name) }));
  }

  /**
   * Merge-patches the status `compute` makes of the freshest copy. Returns undefined when the
   * delivery no longer exists. `basis` is the status the outcome was computed from.
   */
  async write(key: string, obj: DeliveryObject, compute: ComputeStatus, basis: DeliveryStatus | undefined = obj.status): Promise<Written | undefined> {
    const { namespace, name } = splitKey(key);
    let current: DeliveryObject | undefined = obj;
    for (let i = 0; i < MAX_CONFLICTS && current; i++) {
      const computed = compute(current.status);
      if (dropLateOutcome(basis, current.status, computed)) {
        this.d.log.info({ delivery: key, phase: current.status?.phase, attempt: current.status?.lastAttempt?.number }, "outcome dropped: the delivery moved on while it was written");
        // The cache is behind what we just read: wait for the watch to bring this version (or
        // read it again) before planning, never plan another attempt from the stale copy.
        if (current.metadata.resourceVersion) this.d.expectations.expect(key, current.metadata.resourceVersion, current.metadata.uid);
        return { obj: current };
      }
      if (movedPast(basis, current.status)) this.d.log.info({ delivery: key, phase: current.status?.phase, attempt: current.status?.lastAttempt?.number }, "late success recorded: the delivery moved on while it was written, and this attempt delivered it");
      const result = { ...computed, status: this.d.statusWriter.fit(DELIVERIES, computed.status) };
      const patch = createMergePatch(current.status ?? {}, result.status);
      if (patch === undefined) return { obj: current, ...(result.final ? { final: result.final } : {}) };
      try {
        const { metadata } = await this.d.statusWriter.patchStatusMetadataOnly(DELIVERIES, namespace, name, patch, current.metadata.resourceVersion);
        this.d.expectations.expect(key, metadata.resourceVersion, current.metadata.uid);
        return { obj: { ...current, metadata, status: result.status }, ...(result.final ? { final: result.final } : {}) };
      } catch (err) {
        if (err instanceof ApiError && err.isNotFound) return undefined;
        if (!(err instanceof ApiError && err.isConflict)) throw err;
        current = await this.fetch(key);
      }
    }
    if (!current) return undefined;
    throw new Error(`status of ${key} kept changing under us (${MAX_CONFLICTS} conflicts in a row)`);
  }

  /**
   * Deletes the delivery at exactly the version `obj` carries (a delivery changed meanwhile, say
   * annotated for replay, is kept): "deleted", "changed" (409) or "gone" (404).
   */
  async deleteAt(key: string, obj: DeliveryObject): Promise<"deleted" | "changed" | "gone"> {
    const { namespace, name } = splitKey(key);
    try {
      await this.d.client.request({
        method: "DELETE",
        path: objectPath(DELIVERIES, namespace, name),
        accept: ACCEPT.objectMetadata,
        body: { kind: "DeleteOptions", apiVersion: "v1", preconditions: { resourceVersion: obj.metadata.resourceVersion } },
      });
      // Until the watch drops it, the cache still holds the delivery as it was before the
      // attempt: never plan from that copy (no cached version equals this marker).
      this.d.expectations.expect(key, DELETED, obj.metadata.uid);
      return "deleted";
    } catch (err) {
      if (err instanceof ApiError && err.isNotFound) return "gone";
      if (err instanceof ApiError && err.status === 409) return "changed";
      throw err;
    }
  }

  /**
   * Writes an attempt's outcome; when it cannot be written it is kept (with `meta`) and written
   * first on the key's next reconcile (writeUnwritten), so the request is not sent again.
   */
  async writeOrKeep(key: string, obj: DeliveryObject, compute: ComputeStatus, meta: M): Promise<Written | undefined> {
    try {
      const written = await this.write(key, obj, compute);
      this.writesFailing = false;
      return written;
    } catch (err) {
      // Only an outage holds back every attempt. A write the API server refuses concerns this
      // object alone: it is retried for this key (with the per-key backoff), never re-sent.
      if (err instanceof ApiError && err.isRefused) {
        this.d.events.record(deliveryRef(obj), "Warning", "StatusWriteRefused", `the API server refused the attempt's status (${err.message}); the outcome is kept and written again, the request is not re-sent`);
        this.unwritten.set(key, { compute: (s) => essentials(compute(s)), basis: obj.status, meta });
      } else {
        this.unwritten.set(key, { compute, basis: obj.status, meta });
        this.writesFailing = true;
      }
      throw err;
    }
  }

  /** Records the outcome kept for `key` on a fresh read of the delivery; throws while it still fails. */
  async writeUnwritten(key: string): Promise<{ written: Written | undefined; meta: M } | undefined> {
    const pending = this.unwritten.get(key);
    if (!pending) return undefined;
    let written: Written | undefined;
    try {
      const obj = await this.fetch(key);
      written = obj ? await this.write(key, obj, pending.compute, pending.basis) : undefined;
    } catch (err) {
      if (err instanceof ApiError && err.isRefused) this.writesFailing = false; // it answers: no outage
      throw err;
    }
    this.unwritten.delete(key);
    this.writesFailing = false;
    return { written, meta: pending.meta };
  }
}
