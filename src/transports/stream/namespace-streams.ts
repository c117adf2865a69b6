// The leader's view of the namespaces' streams (one per namespace: src/jetstream/layout.ts): what
// each holds against its quota and how old its oldest event is (webhook_stream_namespace_usage,
// webhook_stream_oldest_message_timestamp_seconds, read every few seconds), and the removal of
// a stream left with no subscription, no consumer and no event (a namespace whose
// subscriptions are all gone: made again with the next one). Only the streams this
// installation claimed (HOOKLINE_INSTALLATION) are counted or removed: another installation's are
// never touched. The streams themselves are made by the consumer sync (before a subscription's
// consumer) and the HTTP door.
import type { Logger } from "pino";
import type { NamespaceStream } from "../../jetstream/jetstream.js";
import type { Metrics } from "../../observability/metrics.js";
import type { LeaderRunnable } from "../../runtime/manager.js";
import { ownedBy } from "../../jetstream/layout.js";
import type { Caches } from "../../delivery/caches.js";
import type { StreamLink } from "./link.js";

/** What the leader's upkeep of streams and of consumers (consumer-sync.ts) both take. */
export interface StreamUpkeepDeps {
  link: StreamLink;
  caches: Caches;
  /** WATCH_NAMESPACES: the streams and consumers of other namespaces belong to another operator. */
  namespaces: readonly string[];
  /** HOOKLINE_INSTALLATION: only the streams it claimed, and the consumers made with it, are this operator's. */
  installation?: string;
  metrics: Metrics;
  log: Logger;
}

export type NamespaceStreamsDeps = StreamUpkeepDeps;

/** Usage is read this often (the consumers' lag too: consumer-sync.ts). */
const USAGE_MS = 5_000;
/** Unused streams are looked for this often (and at the start of a term). */
const SWEEP_MS = 60_000;

/** Whose streams an operator looks after: WATCH_NAMESPACES (empty: all) and HOOKLINE_INSTALLATION. */
export interface StreamScope {
  namespaces: readonly string[];
  installation?: string;
}

/** A namespace this operator serves, on a stream its installation claimed (a stream nobody or another installation claimed is not its own). Pure. */
export function inScope(ns: Pick<NamespaceStream, "namespace" | "owner">, scope: StreamScope): boolean {
  return (scope.namespaces.length === 0 || scope.namespaces.includes(ns.namespace)) && ownedBy(ns.owner, scope.installation);
}

/** The streams to remove: in scope, with no message, no consumer and no subscription of their namespace. Pure. */
export function unusedStreams(streams: readonly NamespaceStream[], scope: StreamScope, hasSubscriptions: (namespace: string) => boolean): NamespaceStream[] {
  return streams.filter((ns) => inScope(ns, scope) && ns.messages === 0 && ns.consumers === 0 && !hasSubscriptions(ns.namespace));
}

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
    void this.sweep();
  }

  stop(): Promise<void> {
    this.abort.abort();
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    this.seen.clear();
    return Promise.resolve();
  }

  private async read(): Promise<void> {
    if (!this.d.link.isConnected()) return;
    try {
      const conn = await this.d.link.connected(this.abort.signal);
      const now = new Set<string>();
      for (const ns of await conn.namespaceStreams()) {
        if (!inScope(ns, this.d)) continue;
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
      const unused = (list: readonly NamespaceStream[]) => unusedStreams(list, this.d, (ns) => this.hasSubscriptions(ns)).map((ns) => ns.stream);
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
