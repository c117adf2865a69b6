// Kubernetes plumbing for the benchmark on Hookline's own REST client (src/kube/client.ts):
// create with retry (the producer must not lose a delivery to a 429), and a watch on one
// namespace's deliveries that records when each one's phase became Succeeded.
import { KubeConfig } from "@kubernetes/client-node";
import { DELIVERY, GROUP, SUBSCRIPTION, VERSION } from "../../src/api/names.js";
import { ApiError, KubeClient } from "../../src/kube/client.js";
import { LineSplitter } from "../../src/kube/lines.js";
import { collectionPath, type ResourceType } from "../../src/kube/types.js";
import { now, sleep } from "./util.js";

export const DELIVERIES: ResourceType = { group: GROUP, version: VERSION, plural: DELIVERY.plural };
export const SUBSCRIPTIONS: ResourceType = { group: GROUP, version: VERSION, plural: SUBSCRIPTION.plural };
export const NAMESPACES: ResourceType = { group: "", version: "v1", plural: "namespaces" };
export const SECRETS: ResourceType = { group: "", version: "v1", plural: "secrets" };

export async function kubeClient(kubeconfig: string, connections: number): Promise<KubeClient> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  return KubeClient.create(kc, { connections, userAgent: "hookline-bench" });
}

const retryable = (err: unknown): boolean => !(err instanceof ApiError) || err.status === 429 || err.status >= 500;

/**
 * POSTs `body`; retries 429, 5xx and transport errors up to 10 times. Undefined when a retry
 * finds the object already there (an earlier try went through but its answer was lost).
 */
export async function createWithRetry<T>(client: KubeClient, path: string, body: unknown, stats?: { retries: number }): Promise<T | undefined> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await client.request<T>({ method: "POST", path, body });
    } catch (err) {
      if (attempt > 0 && err instanceof ApiError && err.isAlreadyExists) return undefined;
      if (attempt >= 10 || !retryable(err)) throw err;
      if (stats) stats.retries++;
      await sleep(Math.min(1_000, 25 * 2 ** attempt));
    }
  }
}

/** Creates each object unless it exists. */
export async function ensure(client: KubeClient, type: ResourceType, objs: Array<{ metadata: { name: string; namespace?: string } }>): Promise<void> {
  for (const obj of objs) {
    try {
      await createWithRetry(client, collectionPath(type, obj.metadata.namespace), obj);
    } catch (err) {
      if (!(err instanceof ApiError && err.isAlreadyExists)) throw err;
    }
  }
}

/** Waits until every named subscription reports Ready=True. */
export async function waitSubscriptionsReady(client: KubeClient, ns: string, names: string[], timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const list = await client.request<{ items: Array<{ metadata: { name: string }; status?: { conditions?: Array<{ type: string; status: string }> } }> }>({
      method: "GET",
      path: collectionPath(SUBSCRIPTIONS, ns),
    });
    const ready = new Set(list.items.filter((s) => s.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True")).map((s) => s.metadata.name));
    if (names.every((n) => ready.has(n))) return;
    if (Date.now() > deadline) throw new Error(`subscriptions in ${ns} not Ready within ${timeoutMs} ms: ${names.filter((n) => !ready.has(n)).join(", ")}`);
    await sleep(200);
  }
}

/** Sum of status.deliveries.succeeded over the subscriptions of `ns` (the operator's rollup). */
export async function rollupSucceeded(client: KubeClient, ns: string): Promise<number> {
  const list = await client.request<{ items: Array<{ status?: { deliveries?: { succeeded?: number } } }> }>({ method: "GET", path: collectionPath(SUBSCRIPTIONS, ns) });
  return list.items.reduce((n, s) => n + (s.status?.deliveries?.succeeded ?? 0), 0);
}

/** Non-terminal deliveries left in `ns` (paginated list with a field selector). */
export async function countNotSucceeded(client: KubeClient, ns: string): Promise<{ count: number; phases: Record<string, number> }> {
  const phases: Record<string, number> = {};
  let cont: string | undefined;
  let count = 0;
  do {
    const page = await client.request<{ metadata: { continue?: string }; items: Array<{ status?: { phase?: string } }> }>({
      method: "GET",
      path: collectionPath(DELIVERIES, ns),
      query: { fieldSelector: "status.phase!=Succeeded", limit: 500, continue: cont },
    });
    for (const d of page.items) {
      const p = d.status?.phase ?? "(none)";
      phases[p] = (phases[p] ?? 0) + 1;
      count++;
    }
    cont = page.metadata.continue || undefined;
  } while (cont);
  return { count, phases };
}

interface WatchEvent {
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  object: { metadata?: { name?: string; resourceVersion?: string }; status?: { phase?: string }; code?: number; message?: string };
}

/**
 * Deliveries in a final phase. Watching only these (an object entering the selection arrives as
 * ADDED) costs the API server two events per delivery instead of one per write.
 */
const FINISHED_SELECTOR = "status.phase!=,status.phase!=Pending,status.phase!=Retrying";

/**
 * Watches the finished deliveries of one namespace from "now" and records, per name, when its
 * phase was first seen Succeeded (or another final phase) and when it was deleted. With
 * `everyPhase` it watches every delivery of the namespace: with retention.succeeded 0s the
 * operator deletes a delivered event without writing Succeeded, so its delete (never having
 * been seen final) is when it was delivered.
 */
export class DeliveryWatch {
  readonly succeededAt = new Map<string, number>();
  readonly failed = new Map<string, string>();
  readonly deletedAt = new Map<string, number>();
  private readonly abort = new AbortController();
  private running: Promise<void> | undefined;
  private waiters: Array<() => void> = [];
  private rv: string | undefined;
  error: Error | undefined;
  restarts = 0;
  /** Watches opened after the first (the server ended one, or it failed). */
  reopened = 0;

  constructor(
    private readonly client: KubeClient,
    private readonly ns: string,
    private readonly opts: { everyPhase?: boolean } = {},
  ) {}

  private get selector(): string | undefined {
    return this.opts.everyPhase ? undefined : FINISHED_SELECTOR;
  }

  async start(): Promise<void> {
    const list = await this.client.request<{ metadata: { resourceVersion: string } }>({ method: "GET", path: collectionPath(DELIVERIES, this.ns), query: { limit: 1, fieldSelector: this.selector } });
    this.rv = list.metadata.resourceVersion;
    this.running = this.loop();
  }

  private async loop(): Promise<void> {
    let opened = 0;
    while (!this.abort.signal.aborted) {
      if (opened++ > 0) this.reopened++;
      try {
        const res = await this.client.stream({
          method: "GET",
          path: collectionPath(DELIVERIES, this.ns),
          query: { watch: 1, resourceVersion: this.rv, allowWatchBookmarks: true, timeoutSeconds: 3600, fieldSelector: this.selector },
          signal: this.abort.signal,
        });
        // Bytes are decoded a whole line at a time: a chunk can end inside a multi-byte character.
        const lines = new LineSplitter();
        for await (const chunk of res.body) for (const line of lines.push(chunk)) this.onEvent(JSON.parse(line.toString("utf8")) as WatchEvent);
      } catch (err) {
        if (this.abort.signal.aborted) return;
        this.restarts++;
        if (this.restarts > 20) {
          this.error = err as Error;
          for (const w of this.waiters.splice(0)) w();
          return;
        }
        await sleep(200);
      }
    }
  }

  private onEvent(e: WatchEvent): void {
    if (e.type === "ERROR") throw new Error(`watch error ${e.object.code}: ${e.object.message}`);
    const t = now();
    if (e.object.metadata?.resourceVersion) this.rv = e.object.metadata.resourceVersion;
    if (e.type === "BOOKMARK") return;
    const name = e.object.metadata?.name;
    if (!name) return;
    const phase = e.object.status?.phase;
    if (e.type === "DELETED") {
      if (!this.deletedAt.has(name)) this.deletedAt.set(name, t);
      // Deleted before it was ever final: delivered (retention.succeeded 0s, no Succeeded write).
      if (this.opts.everyPhase && !this.failed.has(name) && !this.succeededAt.has(name) && phase !== "DeadLettered" && phase !== "Discarded") this.succeededAt.set(name, t);
    }
    if (phase === "Succeeded" && !this.succeededAt.has(name)) this.succeededAt.set(name, t);
    else if ((phase === "DeadLettered" || phase === "Discarded") && !this.failed.has(name)) this.failed.set(name, phase);
    for (const w of this.waiters.splice(0)) w();
  }

  /** Resolves when `pred()` holds; false on timeout. */
  async until(pred: () => boolean, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!pred()) {
      if (this.error) throw this.error;
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await new Promise<void>((r) => {
        const t = setTimeout(r, Math.min(left, 1_000));
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
    return true;
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.running?.catch(() => undefined);
  }
}
