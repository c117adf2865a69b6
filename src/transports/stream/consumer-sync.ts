// What only the leader does in stream mode: one durable JetStream consumer per subscription,
// on its namespace's stream (made first: src/jetstream/layout.ts), created and updated with it
// (filter from eventTypes, max_ack_pending from maxInFlight, or 1 for an ordered subscription
// (ordered-handoff.ts), ack wait from the timeout:
// src/jetstream/consumers.ts) and deleted when the subscription is; a periodic sweep of the
// consumers whose subscription is gone (deleted while no replica led) and of subscriptions whose
// consumer is missing (removed by hand, or with its stream), which touches only the streams this
// installation claimed and on them only the consumers it made (HOOKLINE_INSTALLATION); and each
// consumer's lag (webhook_stream_pending_messages, and status.deliveries.pending of the
// subscription through `pendingOf`). A consumer still draining a removed event type
// (stream/type-removal.ts) is looked at again with each lag read, to narrow its filter once
// through. Keys come from the subscription cache, through a work queue of this term (one worker
// per key, retries with backoff).
import { JetStreamApiError, type JetStreamManager } from "@nats-io/jetstream";
import { objectKey, splitKey } from "../../kube/types.js";
import { Controller, TerminalError, type Reconciler, type Result } from "../../runtime/controller.js";
import type { LeaderRunnable } from "../../runtime/manager.js";
import { WorkQueue } from "../../runtime/queue.js";
import { ConsumerSpecError, deleteConsumer, ensureConsumer, listConsumers, madeBy, orphanedConsumers, type HooklineConsumer, type SubscriptionIdentity } from "../../jetstream/consumers.js";
import type { StreamConnection } from "../../jetstream/jetstream.js";
import { ownedBy, streamOwner } from "../../jetstream/layout.js";
import { SubjectError } from "../../jetstream/subjects.js";
import type { StreamUpkeepDeps } from "./namespace-streams.js";

/** HOOKLINE_INSTALLATION (`installation`): consumers are made with it, and only those made with it are deleted. */
export interface ConsumerSyncDeps extends StreamUpkeepDeps {
  /** A deleted subscription's shared endpoint state goes with its consumer. */
  forget: (uid: string) => Promise<void>;
  /** The lag of a subscription changed: its status is rolled up (deliveries.pending). */
  lagChanged?: (subKey: string) => void;
}

/** Orphaned consumers are looked for this often (and at the start of a term). */
const SWEEP_MS = 60_000;
/** Consumer lag is read this often. */
const LAG_MS = 5_000;

export class ConsumerSync implements LeaderRunnable, Reconciler {
  readonly name = "stream consumers";
  private controller: Controller<string> | undefined;
  private timers: NodeJS.Timeout[] = [];
  private abort = new AbortController();
  /** The last lag read, by subscription key. */
  private readonly lag = new Map<string, number>();

  constructor(private readonly d: ConsumerSyncDeps) {}

  start(): void {
    if (this.controller) return;
    this.abort = new AbortController();
    const controller = new Controller<string>({ name: "stream-consumer", queue: new WorkQueue<string>(), reconciler: this, workers: 2, log: this.d.log, metrics: this.d.metrics });
    this.controller = controller;
    for (const s of this.d.caches.subscriptions.values()) controller.queue.add(objectKey(s.metadata));
    controller.start();
    void this.sweep();
    this.timers = [setInterval(() => void this.sweep(), SWEEP_MS), setInterval(() => void this.readLag(), LAG_MS)];
    for (const t of this.timers) t.unref();
  }

  async stop(graceMs: number): Promise<void> {
    const controller = this.controller;
    if (!controller) return;
    this.controller = undefined;
    this.abort.abort();
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    this.lag.clear();
    await controller.stop(graceMs);
  }

  /** A subscription changed in the cache: its consumer follows a change of its spec (not of its status). */
  subscriptionChanged(subKey: string, specChanged: boolean): void {
    if (specChanged) this.controller?.queue.add(subKey);
  }

  /** The subscription's events not acknowledged yet, as last read (0 before the first read). */
  pendingOf(subKey: string): number {
    return this.lag.get(subKey) ?? 0;
  }

  private jsm(signal: AbortSignal): Promise<JetStreamManager> {
    return this.d.link.connected(signal).then((c) => c.jetstreamManager());
  }

  async reconcile(key: string, signal: AbortSignal): Promise<Result | void> {
    // Waiting for NATS (unreachable, refused) is nothing to finish: a stop ends it at once, not after the drain's grace.
    const conn = await this.d.link.connected(AbortSignal.any([signal, this.abort.signal]));
    const jsm = await conn.jetstreamManager();
    const stream = this.d.link.streamOf(splitKey(key).namespace);
    const sub = this.d.caches.subscription(key);
    if (!sub || sub.metadata.deletionTimestamp || !sub.metadata.uid) {
      const { namespace, name } = splitKey(key);
      for (const c of await this.ownConsumersOf(jsm, stream)) if (c.namespace === namespace && c.name === name) await this.remove(jsm, stream, c, "the subscription was deleted");
      return;
    }
    // An invalid spec keeps the consumer it had: its events are held until it is fixed.
    const policy = this.d.caches.policy(sub);
    if (!policy) return;
    const identity: SubscriptionIdentity = { namespace: sub.metadata.namespace!, name: sub.metadata.name, uid: sub.metadata.uid };
    try {
      await this.d.link.ensureStream(identity.namespace, signal);
      const r = await ensureConsumer(jsm, stream, identity, { eventTypes: policy.eventTypes, maxInFlight: policy.ordering ? 1 : policy.maxInFlight, timeoutMs: policy.timeoutMs }, this.d.installation);
      if (r.action !== "unchanged") this.d.log.info({ subscription: key, consumer: r.name, action: r.action }, `stream consumer ${r.action}`);
    } catch (err) {
      if (err instanceof ConsumerSpecError || err instanceof SubjectError) throw new TerminalError(`subscription ${key} has no stream consumer: ${err.message}`);
      throw err;
    }
  }

  private async remove(jsm: JetStreamManager, stream: string, c: HooklineConsumer, why: string): Promise<void> {
    if (await deleteConsumer(jsm, stream, c.consumer)) this.d.log.info({ subscription: `${c.namespace}/${c.name}`, consumer: c.consumer, why }, "stream consumer deleted");
    await this.d.forget(c.uid).catch(() => undefined);
  }

  /** Deletes the consumers whose subscription (namespace, name and uid) no longer exists. */
  private async sweep(): Promise<void> {
    try {
      const conn = await this.d.link.connected(this.abort.signal);
      const jsm = await conn.jetstreamManager();
      // Only the streams this installation claimed (HOOKLINE_INSTALLATION), and on them only the consumers it made.
      const all = await this.allConsumers(conn, jsm);
      const live: SubscriptionIdentity[] = [];
      for (const s of this.d.caches.subscriptions.values()) {
        if (s.metadata.uid && !s.metadata.deletionTimestamp) live.push({ namespace: s.metadata.namespace!, name: s.metadata.name, uid: s.metadata.uid });
      }
      for (const c of orphanedConsumers(all, live, this.d.namespaces, this.d.installation)) await this.remove(jsm, this.d.link.streamOf(c.namespace), c, "its subscription no longer exists");
      // A consumer removed by hand (nats consumer rm), or with its stream, is made again.
      const have = new Set(all.map((c) => `${c.namespace}/${c.name}/${c.uid}`));
      for (const s of live) if (!have.has(`${s.namespace}/${s.name}/${s.uid}`)) this.controller?.queue.add(`${s.namespace}/${s.name}`);
    } catch (err) {
      if (!this.abort.signal.aborted) this.d.log.warn({ err: (err as Error).message }, "stream mode: the sweep of orphaned consumers failed; next time");
    }
  }

  /** Each consumer's lag: not yet delivered plus delivered and not acknowledged. */
  private async readLag(): Promise<void> {
    if (!this.d.link.isConnected()) return;
    try {
      const conn = await this.d.link.connected(this.abort.signal);
      const all = await this.allConsumers(conn, await this.jsm(this.abort.signal));
      for (const c of all) {
        const key = `${c.namespace}/${c.name}`;
        const sub = this.d.caches.subscription(key);
        if (!sub || sub.metadata.uid !== c.uid) continue;
        const pending = c.pending + c.ackPending;
        if (c.draining) this.controller?.queue.add(key);
        this.d.metrics.setStreamPending(c.namespace, c.name, pending);
        if (this.lag.get(key) !== pending) {
          this.lag.set(key, pending);
          this.d.lagChanged?.(key);
        }
      }
    } catch (err) {
      if (!this.abort.signal.aborted) this.d.log.debug({ err: (err as Error).message }, "stream mode: consumer lag not read this time");
    }
  }

  /** This installation's consumers of a namespace's stream: none when the stream does not exist (yet) or another installation claimed it. */
  private async ownConsumersOf(jsm: JetStreamManager, stream: string): Promise<HooklineConsumer[]> {
    const info = await ifStreamExists(() => jsm.streams.info(stream));
    if (!info || !ownedBy(streamOwner(info), this.d.installation)) return [];
    return ((await ifStreamExists(() => listConsumers(jsm, stream))) ?? []).filter((c) => madeBy(c, this.d.installation));
  }

  /** This installation's consumers of every namespace stream it claimed (those that have any). */
  private async allConsumers(conn: StreamConnection, jsm: JetStreamManager): Promise<HooklineConsumer[]> {
    const out: HooklineConsumer[] = [];
    for (const ns of await conn.namespaceStreams()) {
      if (ns.consumers === 0 || !ownedBy(ns.owner, this.d.installation)) continue;
      out.push(...((await ifStreamExists(() => listConsumers(jsm, ns.stream))) ?? []).filter((c) => madeBy(c, this.d.installation)));
    }
    return out;
  }
}

const STREAM_NOT_FOUND = 10059;

/** What `read` returns; undefined when the stream does not exist (yet, or any more). */
async function ifStreamExists<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (err) {
    if (err instanceof JetStreamApiError && err.code === STREAM_NOT_FOUND) return undefined;
    throw err;
  }
}
