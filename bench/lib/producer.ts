// The producer: creates WebhookDeliveries as fast as the API server accepts them (bounded
// concurrency) or at a fixed rate, and records for each one when its create was sent and when
// it returned. Also the raw API ceiling (create + one status merge-patch of a plain custom
// resource of the same size) and the finished deliveries of the memory-at-scale phase.
import { ApiError, CONTENT_TYPE, type KubeClient } from "../../src/kube/client.js";
import { collectionPath, objectPath } from "../../src/kube/types.js";
import { BENCH_ITEMS, delivery, payload, succeededStatus } from "./objects.js";
import { createWithRetry, DELIVERIES } from "./kube.js";
import { now, percentiles, pool, sleep, type Percentiles } from "./util.js";

export interface Created {
  name: string;
  sentAt: number;
  returnedAt: number;
}

export interface ProduceResult {
  created: Created[];
  errors: string[];
  retries: number;
  firstSentAt: number;
  lastReturnedAt: number;
  /** Creates per second, first sent to last returned. */
  createRate: number;
  createLatencyMs: Percentiles;
}

export interface ProduceOptions {
  client: KubeClient;
  namespace: string;
  /** Delivery names are `${prefix}-${seq}`; the name is the event id too. */
  prefix: string;
  count: number;
  concurrency: number;
  payloadBytes: number;
  /** Subscription of delivery i. */
  subscriptionOf: (i: number) => string;
  /** Creates per second; omitted: as fast as the API server accepts them. */
  rate?: number;
}

export async function produce(o: ProduceOptions): Promise<ProduceResult> {
  const created: Created[] = [];
  const errors: string[] = [];
  const stats = { retries: 0 };
  const path = collectionPath(DELIVERIES, o.namespace);
  const one = async (i: number) => {
    const name = `${o.prefix}-${String(i).padStart(6, "0")}`;
    const sentAt = now();
    try {
      await createWithRetry(o.client, path, delivery(o.namespace, name, o.subscriptionOf(i), payload(i, sentAt, o.payloadBytes)), stats);
    } catch (err) {
      errors.push(`${name}: ${(err as Error).message}`);
      return;
    }
    created.push({ name, sentAt, returnedAt: now() });
  };
  const t0 = now();
  if (o.rate === undefined) {
    await pool(o.count, o.concurrency, one);
  } else {
    // Open loop at a fixed rate; at most `concurrency` creates in flight.
    const inFlight = new Set<Promise<void>>();
    for (let i = 0; i < o.count; i++) {
      const due = t0 + (i * 1000) / o.rate;
      const wait = due - now();
      if (wait > 0) await sleep(wait);
      while (inFlight.size >= o.concurrency) await Promise.race(inFlight);
      const p = one(i).finally(() => inFlight.delete(p));
      inFlight.add(p);
    }
    await Promise.all(inFlight);
  }
  const firstSentAt = Math.min(...created.map((c) => c.sentAt));
  const lastReturnedAt = Math.max(...created.map((c) => c.returnedAt));
  return {
    created,
    errors,
    retries: stats.retries,
    firstSentAt,
    lastReturnedAt,
    createRate: created.length / ((lastReturnedAt - firstSentAt) / 1000),
    createLatencyMs: percentiles(created.map((c) => c.returnedAt - c.sentAt)),
  };
}

export interface ApiCeilingResult {
  items: number;
  seconds: number;
  /** Items (create + status patch) per second. */
  itemsPerSecond: number;
  writesPerSecond: number;
  createLatencyMs: Percentiles;
  patchLatencyMs: Percentiles;
  errors: number;
  retries: number;
  statusBytes: number;
  specBytes: number;
}

/**
 * The raw API ceiling: `count` BenchItems, each created with a delivery's spec and then given
 * Hookline's Succeeded status in one merge-patch of /status carrying the resourceVersion (as
 * Hookline's status writer does), `concurrency` items in flight.
 */
export async function apiCeiling(o: { client: KubeClient; namespace: string; count: number; concurrency: number; payloadBytes: number; url: string; warmup: number; beforeMeasure?: () => Promise<void> }): Promise<ApiCeilingResult> {
  const creates: number[] = [];
  const patches: number[] = [];
  const stats = { retries: 0 };
  let errors = 0;
  const status = succeededStatus(o.url);
  let prefix = "warm";
  // Warm-up, not counted: a freshly started API server is slower for its first seconds, and
  // Hookline's phases run on a warm one.
  await pool(o.warmup, o.concurrency, (i) => item(i));
  creates.length = 0;
  patches.length = 0;
  stats.retries = 0;
  errors = 0;
  prefix = "item";
  await o.beforeMeasure?.();
  const t0 = now();
  await pool(o.count, o.concurrency, (i) => item(i));
  async function item(i: number): Promise<void> {
    const name = `${prefix}-${String(i).padStart(6, "0")}`;
    const d = delivery(o.namespace, name, `sub-${i % 10}`, payload(i, now(), o.payloadBytes));
    const body = { apiVersion: `${BENCH_ITEMS.group}/${BENCH_ITEMS.version}`, kind: "BenchItem", metadata: d.metadata, spec: d.spec };
    try {
      const c0 = now();
      const obj =
        (await createWithRetry<{ metadata: { resourceVersion: string } }>(o.client, collectionPath(BENCH_ITEMS, o.namespace), body, stats)) ??
        (await o.client.request<{ metadata: { resourceVersion: string } }>({ method: "GET", path: objectPath(BENCH_ITEMS, o.namespace, name) }));
      const c1 = now();
      creates.push(c1 - c0);
      await o.client.request({
        method: "PATCH",
        path: objectPath(BENCH_ITEMS, o.namespace, name, "status"),
        query: { fieldManager: "hookline" },
        contentType: CONTENT_TYPE.merge,
        body: { metadata: { resourceVersion: obj.metadata.resourceVersion }, status: { ...status, finishedAt: new Date().toISOString() } },
      });
      patches.push(now() - c1);
    } catch {
      errors++;
    }
  }
  const seconds = (now() - t0) / 1000;
  const items = o.count - errors;
  return {
    items,
    seconds,
    itemsPerSecond: items / seconds,
    writesPerSecond: (2 * items) / seconds,
    createLatencyMs: percentiles(creates),
    patchLatencyMs: percentiles(patches),
    errors,
    retries: stats.retries,
    statusBytes: JSON.stringify(status).length,
    specBytes: JSON.stringify(delivery(o.namespace, "item-000000", "sub-0", payload(0, now(), o.payloadBytes)).spec).length,
  };
}

/**
 * Creates `count` deliveries that are already finished (create, then a status patch with the
 * Succeeded status Hookline writes), with no operator running. Returns the seconds it took.
 */
export async function createFinished(o: { client: KubeClient; namespace: string; count: number; concurrency: number; payloadBytes: number; url: string; subscriptions: number }): Promise<{ seconds: number; errors: number }> {
  const status = succeededStatus(o.url);
  let errors = 0;
  const t0 = now();
  await pool(o.count, o.concurrency, async (i) => {
    const name = `f-${String(i).padStart(6, "0")}`;
    try {
      const obj =
        (await createWithRetry<{ metadata: { resourceVersion: string } }>(
          o.client,
          collectionPath(DELIVERIES, o.namespace),
          delivery(o.namespace, name, `sub-${i % o.subscriptions}`, payload(i, now(), o.payloadBytes)),
        )) ?? (await o.client.request<{ metadata: { resourceVersion: string } }>({ method: "GET", path: objectPath(DELIVERIES, o.namespace, name) }));
      for (let attempt = 0; ; attempt++) {
        try {
          await o.client.request({
            method: "PATCH",
            path: objectPath(DELIVERIES, o.namespace, name, "status"),
            query: { fieldManager: "hookline" },
            contentType: CONTENT_TYPE.merge,
            body: { metadata: { resourceVersion: obj.metadata.resourceVersion }, status },
          });
          break;
        } catch (err) {
          if (attempt >= 5 || (err instanceof ApiError && err.status < 500 && err.status !== 429)) throw err;
          await sleep(100);
        }
      }
    } catch {
      errors++;
    }
  });
  return { seconds: (now() - t0) / 1000, errors };
}

/** Pending deliveries of one (paused) subscription, `payloadBytes` each: the pending-memory phase. */
export async function createPending(o: { client: KubeClient; namespace: string; count: number; concurrency: number; payloadBytes: number; subscription: string; prefix?: string }): Promise<{ seconds: number; errors: number }> {
  let errors = 0;
  const t0 = now();
  await pool(o.count, o.concurrency, async (i) => {
    const name = `${o.prefix ?? "p"}-${String(i).padStart(6, "0")}`;
    const ok = await createWithRetry(o.client, collectionPath(DELIVERIES, o.namespace), delivery(o.namespace, name, o.subscription, payload(i, now(), o.payloadBytes))).then(
      () => true,
      () => false,
    );
    if (!ok) errors++;
  });
  return { seconds: (now() - t0) / 1000, errors };
}
