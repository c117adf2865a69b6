// The leader's view of the namespaces' streams (one per namespace: src/stream/layout.ts): what
// each holds against its quota and how old its oldest event is (webhook_stream_namespace_usage,
// webhook_stream_oldest_message_timestamp_seconds, read every few seconds), and the removal of
// a stream left with no subscription, no consumer and no event (a namespace whose
// subscriptions are all gone: made again with the next one). The streams themselves are made
// by the consumer sync (before a subscription's consumer) and the HTTP door.
import type { Logger } from "pino";
import type { Metrics } from "../../observability/metrics.js";
import type { LeaderRunnable } from "../../runtime/manager.js";
import type { Caches } from "../caches.js";
import type { StreamLink } from "./link.js";

export interface NamespaceStreamsDeps {
  link: StreamLink;
  caches: Caches;
  /** WATCH_NAMESPACES: the streams of other namespaces belong to another operator. */
  namespaces: readonly string[];
  metrics: Metrics;
  log: Logger;
}

/** Usage is read this often (the consumers' lag too: consumer-sync.ts). */
const USAGE_MS = 5_000;
/** Unused streams are looked for this often. */
const SWEEP_MS = 60_000;

export class NamespaceStreams implements LeaderRunnable {
  readonly name = "stream namespaces";
  private timers: NodeJS.Timeout[] = [];
  private abort = new AbortController();
  /** Namespaces whose series are exported, to remove those whose stream went. */
  private readonly seen = new Set<string>();

  constructor(private readonly d: NamespaceStreamsDeps) {}

  start(): void {
    if (this.timers.length > 0) return;
    this.abort = new AbortController();
    this.timers = [setInterval(() => void this.read(), USAGE_MS), setInterval(() => void this.sweep(), SWEEP_MS)];
    for (const t of this.timers) t.unref();
    void this.read();
  }

  stop(): Promise<void> {
    this.abort.abort();
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    this.seen.clear();
    return Promise.resolve();
  }

  private served(namespace: string): boolean {
    return this.d.namespaces.length === 0 || this.d.namespaces.includes(namespace);
  }

  private async read(): Promise<void> {
    if (!this.d.link.isConnected()) return;
    try {
      const conn = await this.d.link.connected(this.abort.signal);
      const now = new Set<string>();
      for (const ns of await conn.namespaceStreams()) {
        if (!this.served(ns.namespace)) continue;
        now.add(ns.namespace);
        this.d.metrics.streamLimits.setNamespace(ns.namespace, { messages: ns.messages, bytes: ns.bytes, oldestAt: ns.oldestAt });
      }
      for (const ns of this.seen) if (!now.has(ns)) this.d.metrics.streamLimits.forgetNamespace(ns);
      this.seen.clear();
      for (const ns of now) this.seen.add(ns);
    } catch (err) {
      if (!this.abort.signal.aborted) this.d.log.debug({ err: (err as Error).message }, "stream mode: namespace streams not read this time");
    }
  }

  /** Deletes the streams of served namespaces with no subscription, consumer or event left, each read twice to be sure. */
  private async sweep(): Promise<void> {
    try {
      const conn = await this.d.link.connected(this.abort.signal);
      const unused = (list: Awaited<ReturnType<typeof conn.namespaceStreams>>) =>
        list.filter((ns) => this.served(ns.namespace) && ns.messages === 0 && ns.consumers === 0 && !this.hasSubscriptions(ns.namespace)).map((ns) => ns.stream);
      const first = new Set(unused(await conn.namespaceStreams()));
      if (first.size === 0) return;
      for (const ns of await conn.namespaceStreams()) {
        if (!first.has(ns.stream) || !unused([ns]).length) continue;
        if (await conn.deleteStream(ns.stream)) this.d.log.info({ namespace: ns.namespace, stream: ns.stream }, "stream mode: namespace stream deleted (no subscription, consumer or event left)");
      }
    } catch (err) {
      if (!this.abort.signal.aborted) this.d.log.warn({ err: (err as Error).message }, "stream mode: the sweep of unused namespace streams failed; next time");
    }
  }

  private hasSubscriptions(namespace: string): boolean {
    for (const s of this.d.caches.subscriptions.values()) if (s.metadata.namespace === namespace) return true;
    return false;
  }
}
