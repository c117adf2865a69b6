// Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it:
// acquire when the Lease is free or its holder has not renewed for leaseDuration (measured on
// our own clock from when we last saw the record change, so clock skew between pods does not
// matter), renew every retryPeriod, and give up leadership at once when a renew has not
// succeeded within renewDeadline (before anyone else may take the Lease). Releasing empties
// the holder so a standby takes over immediately instead of waiting for expiry.
import type { Logger } from "pino";
import { ApiError, type KubeClient } from "./client.js";
import { collectionPath, CORE, objectPath } from "./types.js";
import { sleep } from "../lib/sleep.js";

export interface LeaderElectorOptions {
  client: KubeClient;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  log: Logger;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
  /**
   * A Lease write went through but its answer was read past the renew deadline (the process was
   * paused or starved meanwhile): an acquire not led on, or a renew after which it steps down.
   */
  onLateAnswer?: (write: "acquire" | "renew") => void;
  random?: () => number;
}

interface Lease {
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

/** MicroTime: the API server wants exactly six fractional digits. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

export class LeaderElector {
  private leading = false;
  /** When this replica sent the last Lease write it read back in time (Date.now()): its term counts from then. */
  private renewedAt = 0;
  private observed: { record: string; at: number } | undefined;
  private lease: Lease | undefined;
  private running: Promise<void> | undefined;
  private abort = new AbortController();

  constructor(private readonly o: LeaderElectorOptions) {}

  get isLeader(): boolean {
    return this.leading;
  }

  /**
   * Leading, and the Lease renewed within the renew deadline. A replica that was paused (a long
   * GC, SIGSTOP, a stalled node) past it may have been replaced meanwhile: from the moment it
   * runs again until its renew loop steps down, this is false, so nothing it does as leader
   * starts (delivery attempts check it).
   */
  get leaseFresh(): boolean {
    return this.leading && Date.now() - this.renewedAt < this.o.renewDeadlineMs;
  }

  get holder(): string | undefined {
    return this.lease?.spec?.holderIdentity;
  }

  start(): void {
    if (this.running) return;
    this.abort = new AbortController();
    this.running = this.loop(this.abort.signal);
  }

  /** Stops campaigning; when leading, releases the Lease so a standby takes over at once. */
  async stop(release = true): Promise<void> {
    this.abort.abort();
    await this.running;
    this.running = undefined;
    if (this.leading) {
      this.leading = false;
      this.o.onStoppedLeading();
      if (release) await this.release();
    }
  }

  private async loop(signal: AbortSignal): Promise<void> {
    const random = this.o.random ?? Math.random;
    while (!signal.aborted) {
      // Campaign.
      while (!signal.aborted && !this.leading) {
        const at = await this.tryAcquireOrRenew();
        if (this.inTime(at)) {
          this.leading = true;
          this.renewedAt = at;
          this.o.log.info({ lease: `${this.o.namespace}/${this.o.name}`, identity: this.o.identity }, "became leader");
          this.o.onStartedLeading();
          break;
        }
        if (at !== undefined) {
          // The Lease was ours from `at`, but the answer came past the renew deadline (the process
          // was paused while it was on its way): another replica may lead by now. Campaign again.
          this.o.onLateAnswer?.("acquire");
          this.o.log.warn({ lease: `${this.o.namespace}/${this.o.name}`, answeredAfterMs: Date.now() - at }, "lease acquired past the renew deadline; not leading on it, campaigning again");
        }
        await sleep(this.o.retryPeriodMs * (1 + random() * 0.2), signal);
      }
      // Renew.
      while (!signal.aborted && this.leading) {
        await sleep(this.o.retryPeriodMs, signal);
        if (signal.aborted) return;
        // Woken past the renew deadline (the process was paused): another replica may lead
        // already, so this one steps down before anything else, and campaigns again.
        const at = Date.now() - this.renewedAt < this.o.renewDeadlineMs ? await this.tryAcquireOrRenew(AbortSignal.any([signal, AbortSignal.timeout(Math.max(100, this.o.renewDeadlineMs - (Date.now() - this.renewedAt)))])) : undefined;
        // A renew counts from when it was sent, not from when its answer was read.
        if (this.inTime(at)) this.renewedAt = at;
        else {
          // Written but read past the renew deadline: counted. The deadline since the last renew has passed then too.
          if (at !== undefined) this.o.onLateAnswer?.("renew");
          if (Date.now() - this.renewedAt < this.o.renewDeadlineMs) continue;
          this.leading = false;
          this.o.log.error({ lease: `${this.o.namespace}/${this.o.name}`, sinceRenewMs: Date.now() - this.renewedAt }, "lost leadership: could not renew the Lease within the renew deadline; delivery work stops");
          this.o.onStoppedLeading();
        }
      }
    }
  }

  /** A Lease write that succeeded (sent at `at`) and whose answer was read within the renew deadline of it. */
  private inTime(at: number | undefined): at is number {
    return at !== undefined && Date.now() - at < this.o.renewDeadlineMs;
  }

  /**
   * Takes or renews the Lease. On success, when the write was sent: the Lease is ours from then,
   * however late the answer is read (another replica may take it only a whole lease duration after
   * it sees the write, which is later). Undefined otherwise.
   */
  private async tryAcquireOrRenew(signal?: AbortSignal): Promise<number | undefined> {
    const now = Date.now();
    const c = this.o.client;
    const path = objectPath(CORE.leases, this.o.namespace, this.o.name);
    const spec = (prev?: Lease["spec"]) => {
      const takingOver = prev?.holderIdentity !== this.o.identity;
      return {
        holderIdentity: this.o.identity,
        leaseDurationSeconds: Math.ceil(this.o.leaseDurationMs / 1000),
        acquireTime: takingOver || !prev?.acquireTime ? microTime(now) : prev.acquireTime,
        renewTime: microTime(now),
        leaseTransitions: (prev?.leaseTransitions ?? 0) + (takingOver && prev?.holderIdentity ? 1 : 0),
      };
    };
    try {
      let lease: Lease;
      try {
        lease = await c.request<Lease>({ method: "GET", path, signal, timeoutMs: this.o.renewDeadlineMs });
      } catch (err) {
        if (!(err instanceof ApiError && err.isNotFound)) throw err;
        const sentAt = Date.now();
        this.lease = await c.request<Lease>({
          method: "POST",
          path: collectionPath(CORE.leases, this.o.namespace),
          body: { apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: { name: this.o.name, namespace: this.o.namespace }, spec: spec() },
          signal,
        });
        this.observed = { record: JSON.stringify(this.lease.spec), at: Date.now() };
        return sentAt;
      }
      const record = JSON.stringify(lease.spec ?? {});
      if (!this.observed || this.observed.record !== record) this.observed = { record, at: now };
      const holder = lease.spec?.holderIdentity;
      const durationMs = (lease.spec?.leaseDurationSeconds ?? Math.ceil(this.o.leaseDurationMs / 1000)) * 1000;
      if (holder && holder !== this.o.identity && this.observed.at + durationMs > now) {
        this.lease = lease;
        return undefined;
      }
      const sentAt = Date.now();
      this.lease = await c.request<Lease>({
        method: "PUT",
        path,
        body: { ...lease, spec: spec(lease.spec) },
        signal,
      });
      this.observed = { record: JSON.stringify(this.lease.spec), at: Date.now() };
      return sentAt;
    } catch (err) {
      if (signal?.aborted && this.abort.signal.aborted) return undefined; // stopping: not a failure
      if (!(err instanceof ApiError && err.isConflict)) {
        this.o.log.warn({ lease: `${this.o.namespace}/${this.o.name}`, err: (err as Error).message }, "lease acquire/renew failed");
      }
      return undefined;
    }
  }

  private async release(): Promise<void> {
    const path = objectPath(CORE.leases, this.o.namespace, this.o.name);
    // Read it fresh: a renew cut short by stop() may have gone through and moved the version.
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const lease = await this.o.client.request<Lease>({ method: "GET", path, timeoutMs: 2_000 });
        if (lease.spec?.holderIdentity !== this.o.identity) return;
        await this.o.client.request({
          method: "PUT",
          path,
          body: { ...lease, spec: { ...lease.spec, holderIdentity: "", leaseDurationSeconds: 1, renewTime: microTime(Date.now()) } },
          timeoutMs: 2_000,
        });
        this.o.log.info({ lease: `${this.o.namespace}/${this.o.name}` }, "released the leader Lease");
        return;
      } catch (err) {
        if (err instanceof ApiError && err.isConflict) continue;
        this.o.log.warn({ err: (err as Error).message }, "could not release the Lease; a standby takes over when it expires");
        return;
      }
    }
  }
}
