// Breaker and health across replicas, in stream mode where every replica delivers: one record
// per subscription in the JetStream key-value bucket `hookline-endpoints` (key
// `endpoint.<subscription uid>`), always written with compare-and-set on the revision this
// replica last saw, and watched by every replica, which adopts what the others decided
// (core/endpoint/shared-endpoint.ts says what is adopted and who wins a conflict):
//   - a replica whose breaker opens (or whose endpoint becomes Disabled) writes it; one that
//     finds the endpoint already held back takes that record instead;
//   - a probe (Open -> HalfOpen, a Disabled endpoint's trial) is claimed by a write before it is
//     sent: the one replica whose write lands probes, the others take its claim and wait;
//   - the prober writes the verdict (Closed, Healthy, or Open / Disabled again with a new
//     cooldown); a claim whose replica died expires after the attempt's timeout;
//   - an operator's reset (the leader) writes Closed and Healthy.
// Failure streaks stay per replica. It is the registry's observer (wrapping the one that says
// transitions as Events and gauges) and the executor's ProbeClaims.
//
// Counts follow the same bucket (`counts.<uid>`): replicas that do not lead add what they
// delivered and attempted, with compare-and-set, and the leader moves the sums into its
// endpoint, from which the subscription rollup writes status as in CR mode. And each replica
// says it is there (`replica.<identity>`, every few seconds): a subscription's rate limit is
// shared between the replicas seen (core/endpoint/token-bucket.ts share).
//
// A record names its URL only by a hash keyed with the subscription's uid (core/endpoint/shared-endpoint.ts
// endpointTarget), never the URL itself: a URL may carry a secret in its path or query. A record
// an earlier version wrote with the URL is taken as it was and written again without it.
import { JetStreamApiError, StorageType, type JetStreamClient } from "@nats-io/jetstream";
import { KvWatchInclude, Kvm, type KV, type KvEntry } from "@nats-io/kv";
import type { Logger } from "pino";
import type { BreakerConfig, BreakerTransition } from "../../core/endpoint/breaker.js";
import * as health from "../../core/endpoint/health.js";
import type { Policy } from "../../core/attempt/policy.js";
import { adoptRecord, claimExpiresAt, endpointTarget, fromLegacyRecord, mergeFailing, toRecord, writeAgain, type SharedEndpointRecord, type SharedWrite } from "../../core/endpoint/shared-endpoint.js";
import type { ProbeClaims } from "../../delivery/engine/attempt.js";
import type { Endpoint, EndpointObserver, EndpointRegistry } from "../../delivery/engine/endpoints.js";
import { KV_BUCKETS } from "../../jetstream/permissions.js";

export const ENDPOINTS_BUCKET = KV_BUCKETS.endpoints;
const RECORD = "endpoint";
const COUNTS = "counts";
const REPLICA = "replica";
/** A replica says it is there this often, and counts as gone when not heard for REPLICA_TTL_MS. */
const HEARTBEAT_MS = 5_000;
const REPLICA_TTL_MS = 15_000;
/** A probe claim lasts the attempt's timeout plus this. */
const CLAIM_MARGIN_MS = 5_000;
/** How often counts move between replicas and the leader. */
const COUNTS_INTERVAL_MS = 2_000;
/** Compare-and-set attempts of one write before it gives up (each conflict re-reads). */
const MAX_WRITES = 5;
const WRONG_LAST_SEQUENCE = new Set([10071, 10164]);

export interface SharedEndpointsDeps {
  /** Says transitions (Events, gauges, rollups); every call is passed on. */
  inner: EndpointObserver;
  endpoints: () => EndpointRegistry;
  /** This replica (POD_NAME). */
  me: string;
  /** A subscription's breaker settings (its policy, else the operator's defaults). */
  breakerConfig: (subKey: string) => BreakerConfig;
  healthProbeIntervalMs: number;
  isLeader: () => boolean;
  /** Another replica's state was taken for this subscription: what waits on it looks again. */
  onAdopted: (subKey: string) => void;
  log: Logger;
  now?: () => number;
}

interface Known {
  rec: SharedEndpointRecord | undefined;
  revision: number;
}

interface Counts {
  succeeded: number;
  discarded: number;
  attempts: number;
  failures: number;
}

const ZERO: Counts = { succeeded: 0, discarded: 0, attempts: 0, failures: 0 };
const isZero = (c: Counts) => c.succeeded === 0 && c.discarded === 0 && c.attempts === 0 && c.failures === 0;

function isWrongLastSequence(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = e.cause) if (e instanceof JetStreamApiError && WRONG_LAST_SEQUENCE.has(e.code)) return true;
  return false;
}

/** Whether a verdict moved the gating state the claim was made with (else the probe only ended). */
function sameGate(a: SharedEndpointRecord, b: SharedEndpointRecord): boolean {
  return a.breaker.state === b.breaker.state && a.breaker.nextProbeAt === b.breaker.nextProbeAt && a.health.state === b.health.state && a.health.nextProbeAt === b.health.nextProbeAt;
}

export class SharedEndpoints implements EndpointObserver, ProbeClaims {
  private kv: KV | undefined;
  private closed = false;
  private readonly known = new Map<string, Known>();
  /** Probes this replica claimed and has not settled, by subscription uid. */
  private readonly claims = new Map<string, SharedEndpointRecord>();
  private readonly chains = new Map<string, Promise<unknown>>();
  private readonly expiries = new Map<string, NodeJS.Timeout>();
  /** Totals already added to the shared counts, per endpoint. */
  private readonly pushed = new WeakMap<Endpoint, { attempts: number; failures: number }>();
  private countsTimer: NodeJS.Timeout | undefined;
  private wasLeader = false;
  private stopWatch: (() => void) | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  /** Other replicas, by identity: when this replica last heard of each (its own clock). */
  private readonly replicasSeen = new Map<string, number>();
  private readonly replicaKey: string;
  private readonly now: () => number;
  private readonly healthConfig: health.HealthConfig;

  constructor(private readonly d: SharedEndpointsDeps) {
    this.now = d.now ?? Date.now;
    this.healthConfig = health.healthConfig(d.healthProbeIntervalMs);
    this.replicaKey = `${REPLICA}.${d.me.replace(/[^A-Za-z0-9_=.-]/g, "_")}`;
  }

  /** Opens (or makes) the bucket and starts watching it. */
  async open(js: JetStreamClient, opts: { replicas: number }): Promise<void> {
    const kv = await new Kvm(js).create(ENDPOINTS_BUCKET, {
      description: "Hookline stream mode: breaker and health of each subscription's endpoint, shared by the replicas",
      history: 1,
      storage: StorageType.File,
      replicas: opts.replicas,
    });
    this.kv = kv;
    void this.watch(kv);
    this.countsTimer = setInterval(() => void this.flushCounts(), COUNTS_INTERVAL_MS);
    this.countsTimer.unref();
    const beat = () => void kv.put(this.replicaKey, JSON.stringify({ at: new Date(this.now()).toISOString() })).catch(() => undefined);
    beat();
    this.heartbeat = setInterval(beat, HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  /** Replicas delivering now: this one and those heard of lately (1 before the bucket is open). */
  replicas(): number {
    if (!this.kv || this.closed) return 1;
    const now = this.now();
    let n = 1;
    for (const at of this.replicasSeen.values()) if (now - at < REPLICA_TTL_MS) n++;
    return n;
  }

  /** Stops watching; what this replica counted and did not share yet is shared first. */
  async close(): Promise<void> {
    await this.flushCounts();
    this.closed = true;
    clearInterval(this.countsTimer);
    clearInterval(this.heartbeat);
    // The others stop counting this replica at once (its share of rate limits goes to them).
    await this.kv?.delete(this.replicaKey).catch(() => undefined);
    for (const t of this.expiries.values()) clearTimeout(t);
    this.expiries.clear();
    this.stopWatch?.();
  }

  private async watch(kv: KV): Promise<void> {
    while (!this.closed) {
      try {
        const iter = await kv.watch({ key: [`${RECORD}.>`, `${REPLICA}.>`], include: KvWatchInclude.LastValue });
        this.stopWatch = () => iter.stop();
        if (this.closed) iter.stop();
        for await (const e of iter) this.onEntry(e);
      } catch (err) {
        if (!this.closed) this.d.log.warn({ err: (err as Error).message }, "stream mode: watching the shared endpoint state failed; watching again");
      }
      if (!this.closed) await new Promise((r) => setTimeout(r, 1_000).unref());
    }
  }

  private onEntry(e: KvEntry): void {
    if (e.key.startsWith(`${REPLICA}.`)) {
      if (e.key === this.replicaKey) return;
      // A replica that died without saying so left its last heartbeat: not counted once stale.
      if (e.operation === "PUT" && this.now() - e.created.getTime() < REPLICA_TTL_MS) this.replicasSeen.set(e.key, this.now());
      else this.replicasSeen.delete(e.key);
      return;
    }
    const uid = e.key.slice(RECORD.length + 1);
    if (e.operation !== "PUT") {
      this.known.delete(uid);
      return;
    }
    const k = this.known.get(uid);
    if (k && e.revision <= k.revision) return; // our own write, or older than what we hold
    let rec: SharedEndpointRecord;
    let legacy: SharedEndpointRecord | undefined;
    try {
      rec = e.json<SharedEndpointRecord>();
      legacy = fromLegacyRecord(uid, rec);
    } catch {
      return;
    }
    if (legacy) rec = legacy;
    this.known.set(uid, { rec, revision: e.revision });
    this.apply(uid, rec, false);
    if (legacy) void this.rewriteLegacy(uid, e.revision, legacy);
  }

  /** Writes a record an earlier version wrote with its URL again, with its target instead (the bucket keeps one revision: the URL is gone with it). */
  private rewriteLegacy(uid: string, revision: number, rec: SharedEndpointRecord): Promise<unknown> {
    return this.serialized(uid, async () => {
      const kv = this.kv;
      // Written since (by any replica): what it wrote has no URL.
      if (!kv || this.closed || this.known.get(uid)?.revision !== revision) return;
      try {
        const written = await kv.put(`${RECORD}.${uid}`, JSON.stringify(rec), { previousSeq: revision });
        this.known.set(uid, { rec, revision: written });
        this.d.log.info({ subscription: rec.subscription }, "stream mode: rewrote a shared endpoint record an earlier version wrote, without its URL");
      } catch (err) {
        if (!isWrongLastSequence(err)) this.d.log.warn({ subscription: rec.subscription, err: (err as Error).message }, "stream mode: cannot rewrite a shared endpoint record an earlier version wrote; it is rewritten with the next change");
      }
    });
  }

  /** Takes `rec` into this replica's endpoint of the subscription, if it has one for that uid and URL. */
  private apply(uid: string, rec: SharedEndpointRecord, wake: boolean): void {
    const registry = this.d.endpoints();
    const ep = registry.get(rec.subscription);
    if (!ep || ep.uid !== uid || (ep.url !== undefined && endpointTarget(uid, ep.url) !== rec.target)) return;
    const now = this.now();
    const next = adoptRecord({ breaker: ep.breaker, health: ep.health }, rec, { me: this.d.me, now, breaker: this.d.breakerConfig(ep.key), health: this.healthConfig });
    const changed = registry.adopt(ep, next, { wake });
    if (changed) this.d.log.info({ subscription: ep.key, breaker: next.breaker.state, health: next.health.state, from: rec.by }, "stream mode: took the endpoint state another replica shared");
    clearTimeout(this.expiries.get(uid));
    this.expiries.delete(uid);
    const expiresAt = claimExpiresAt(rec, this.d.me, now);
    if (expiresAt !== undefined) {
      // A claim whose replica died: once it expires the probe may be claimed again.
      const t = setTimeout(() => {
        this.expiries.delete(uid);
        if (this.known.get(uid)?.rec === rec) this.apply(uid, rec, true);
      }, expiresAt - now + 1);
      t.unref();
      this.expiries.set(uid, t);
    }
    if (changed || wake) this.d.onAdopted(ep.key);
  }

  // --- EndpointObserver ------------------------------------------------------------------

  breakerMoved(ep: Endpoint, t: BreakerTransition): void {
    this.d.inner.breakerMoved(ep, t);
    // Probe transitions are shared by claim and settled; this is a replica's own streak.
    if (t.from === "Closed" && t.to === "Open") void this.write(ep, "failing");
  }

  healthMoved(ep: Endpoint, t: health.HealthTransition): void {
    this.d.inner.healthMoved(ep, t);
    if (t.to === "Disabled" && t.from !== "Disabled" && !(ep.uid && this.claims.has(ep.uid))) void this.write(ep, "failing");
  }

  changed(subKey: string, urgent: boolean): void {
    this.d.inner.changed(subKey, urgent);
  }

  deliveriesOf(subKey: string): Iterable<string> {
    return this.d.inner.deliveriesOf(subKey);
  }

  created(ep: Endpoint): void {
    this.d.inner.created?.(ep);
    this.pushed.set(ep, { attempts: ep.health.totalAttempts, failures: ep.health.totalFailures });
    const k = ep.uid ? this.known.get(ep.uid) : undefined;
    if (k?.rec) this.apply(ep.uid!, k.rec, false);
  }

  reset(ep: Endpoint): void {
    this.d.inner.reset?.(ep);
    void this.write(ep, "reset");
  }

  // --- ProbeClaims -----------------------------------------------------------------------

  async claim(ep: Endpoint, policy: Policy): Promise<boolean> {
    if (!this.kv || !ep.uid || ep.url === undefined) return true;
    return this.write(ep, "claim", this.now() + policy.timeoutMs + CLAIM_MARGIN_MS);
  }

  settled(ep: Endpoint, _policy: Policy, claimed: boolean): void {
    if (!ep.uid) return;
    if (!claimed) {
      // Another replica holds the probe: take its record (after our probe was given back).
      const k = this.known.get(ep.uid);
      if (k?.rec) this.apply(ep.uid, k.rec, true);
      else this.d.onAdopted(ep.key);
      return;
    }
    const claim = this.claims.get(ep.uid);
    this.claims.delete(ep.uid);
    if (!claim || ep.url === undefined) return;
    const current = toRecord(ep, { subscription: ep.key, target: endpointTarget(ep.uid, ep.url), by: this.d.me, now: this.now() });
    void this.write(ep, sameGate(claim, current) ? "release" : "verdict");
  }

  // --- writes ----------------------------------------------------------------------------

  /** Writes this replica's state of `ep` (serialized per subscription). True when written, or when the bucket cannot be reached (a probe then goes: fail open). */
  private write(ep: Endpoint, kind: SharedWrite, probeUntil?: number): Promise<boolean> {
    const uid = ep.uid;
    if (!uid) return Promise.resolve(true);
    return this.serialized(uid, () => this.writeNow(ep, uid, kind, probeUntil));
  }

  /** Runs `fn` after every write of the subscription's record started before it. */
  private serialized<T>(uid: string, fn: () => Promise<T>): Promise<T> {
    const run = (this.chains.get(uid) ?? Promise.resolve()).then(fn);
    const tail = run.catch(() => undefined);
    this.chains.set(uid, tail);
    void tail.then(() => {
      if (this.chains.get(uid) === tail) this.chains.delete(uid);
    });
    return run;
  }

  private async writeNow(ep: Endpoint, uid: string, kind: SharedWrite, probeUntil: number | undefined): Promise<boolean> {
    const kv = this.kv;
    if (!kv || ep.url === undefined || this.closed) return true;
    const key = `${RECORD}.${uid}`;
    const target = endpointTarget(uid, ep.url);
    let rec = toRecord(ep, { subscription: ep.key, target, by: this.d.me, now: this.now(), ...(probeUntil !== undefined ? { probeUntil } : {}) });
    let merged = false;
    for (let i = 0; i < MAX_WRITES; i++) {
      const revision = this.known.get(uid)?.revision ?? 0;
      try {
        const written = await kv.put(key, JSON.stringify(rec), { previousSeq: revision });
        this.known.set(uid, { rec, revision: written });
        if (kind === "claim") this.claims.set(uid, rec);
        if (merged) this.apply(uid, rec, true);
        this.d.log.debug({ subscription: ep.key, kind, breaker: rec.breaker.state, health: rec.health.state, revision: written }, "stream mode: shared the endpoint state");
        return true;
      } catch (err) {
        if (!isWrongLastSequence(err)) return this.unreachable(ep, uid, kind, rec, err);
      }
      let theirs: SharedEndpointRecord | undefined;
      try {
        const latest = await kv.get(key);
        const read = latest?.operation === "PUT" ? latest.json<SharedEndpointRecord>() : undefined;
        theirs = read && (fromLegacyRecord(uid, read) ?? read);
        this.known.set(uid, { rec: theirs, revision: latest?.revision ?? 0 });
      } catch (err) {
        return this.unreachable(ep, uid, kind, rec, err);
      }
      if (!writeAgain(kind, rec, theirs)) {
        // A claim's loser takes the record in settled(), after the executor gave its probe back.
        if (theirs && kind !== "claim") this.apply(uid, theirs, true);
        this.d.log.debug({ subscription: ep.key, kind, by: theirs?.by }, "stream mode: another replica wrote the endpoint state first");
        return false;
      }
      if (kind === "failing" && theirs) {
        rec = mergeFailing(rec, theirs);
        merged = true;
      } else rec = toRecord(ep, { subscription: ep.key, target, by: this.d.me, now: this.now() });
    }
    this.d.log.warn({ subscription: ep.key, kind }, "stream mode: the endpoint state kept changing under this write; left as the others wrote it");
    return false;
  }

  private unreachable(ep: Endpoint, uid: string, kind: SharedWrite, rec: SharedEndpointRecord, err: unknown): boolean {
    this.d.log.warn({ subscription: ep.key, kind, err: (err as Error).message }, "stream mode: cannot write the shared endpoint state; this replica goes on with its own");
    // The probe goes (fail open: at worst one probe per replica); its verdict is written after.
    if (kind === "claim") this.claims.set(uid, rec);
    return true;
  }

  /** The subscription is gone: its record and counts go too. */
  async forget(uid: string): Promise<void> {
    const kv = this.kv;
    if (!kv) return;
    this.known.delete(uid);
    await Promise.all([kv.purge(`${RECORD}.${uid}`), kv.purge(`${COUNTS}.${uid}`)]);
  }

  // --- counts ----------------------------------------------------------------------------

  private async flushCounts(): Promise<void> {
    const kv = this.kv;
    if (!kv || this.closed) return;
    const leading = this.d.isLeader();
    const registry = this.d.endpoints();
    if (this.wasLeader && !leading) {
      // What this replica wrote to status as leader is not added again.
      for (const ep of registry.all()) this.pushed.set(ep, { attempts: ep.health.totalAttempts, failures: ep.health.totalFailures });
    }
    this.wasLeader = leading;
    for (const ep of registry.all()) {
      if (!ep.uid) continue;
      try {
        if (leading) await this.pullCounts(kv, ep, ep.uid);
        else await this.pushCounts(kv, ep, ep.uid);
      } catch (err) {
        if (!isWrongLastSequence(err)) this.d.log.debug({ subscription: ep.key, err: (err as Error).message }, "stream mode: counts not shared this time");
      }
    }
  }

  /** Adds what this replica delivered and attempted since its last push to the shared counts. */
  private async pushCounts(kv: KV, ep: Endpoint, uid: string): Promise<void> {
    const base = this.pushed.get(ep) ?? { attempts: ep.health.totalAttempts, failures: ep.health.totalFailures };
    const delta: Counts = { succeeded: ep.succeededDelta, discarded: ep.discardedDelta, attempts: ep.health.totalAttempts - base.attempts, failures: ep.health.totalFailures - base.failures };
    if (isZero(delta)) return;
    const key = `${COUNTS}.${uid}`;
    const e = await kv.get(key);
    const cur = e?.operation === "PUT" && e.length > 0 ? e.json<Counts>() : ZERO;
    const sum: Counts = { succeeded: cur.succeeded + delta.succeeded, discarded: cur.discarded + delta.discarded, attempts: cur.attempts + delta.attempts, failures: cur.failures + delta.failures };
    await kv.put(key, JSON.stringify(sum), { previousSeq: e?.revision ?? 0 });
    ep.succeededDelta -= delta.succeeded;
    ep.discardedDelta -= delta.discarded;
    this.pushed.set(ep, { attempts: base.attempts + delta.attempts, failures: base.failures + delta.failures });
  }

  /** The leader takes the shared counts into its endpoint (the rollup writes them) and sets them to zero. */
  private async pullCounts(kv: KV, ep: Endpoint, uid: string): Promise<void> {
    const key = `${COUNTS}.${uid}`;
    const e = await kv.get(key);
    if (!e || e.operation !== "PUT" || e.length === 0) return;
    const c = e.json<Counts>();
    if (isZero(c)) return;
    await kv.put(key, JSON.stringify(ZERO), { previousSeq: e.revision });
    ep.succeededDelta += c.succeeded;
    ep.discardedDelta += c.discarded;
    ep.health = { ...ep.health, totalAttempts: ep.health.totalAttempts + c.attempts, totalFailures: ep.health.totalFailures + c.failures };
    ep.dirty = true;
    this.d.inner.changed(ep.key, false);
  }
}
