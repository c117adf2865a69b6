// The capacity phase (`npm run bench -- --capacity`): how many bytes of etcd a WebhookDelivery
// takes, by payload size and phase, before and after compaction + defragmentation. No operator
// runs: the deliveries are created directly (finished ones with the status Hookline writes after
// a first attempt answered 200), so what is measured is the store, not the delivery engine.
// See docs/capacity.md for what the numbers mean and how to use them.
import { readState } from "../src/cluster/control-plane.js";
import type { KubeClient } from "../src/kube/client.js";
import { createFinished, createPending } from "./lib/producer.js";
import { round, sample, sleep } from "./lib/util.js";

export interface CapacityEnv {
  cpDir: string;
  admin: KubeClient;
  /** A client with enough connections for `concurrency`. */
  producer: KubeClient;
  concurrency: number;
  /** Sets up a namespace with one subscription named `sub-0` (paused for pending sets). */
  setup: (ns: string, paused: boolean) => Promise<void>;
  url: (ns: string) => string;
  say: (line: string) => void;
  check: (ok: boolean, message: string) => void;
}

/** What etcd and the API server report about the database's size. */
export interface StoreSize {
  /** etcd_mvcc_db_total_size_in_bytes: the file, including free pages. */
  dbTotalBytes: number;
  /** etcd_mvcc_db_total_size_in_use_in_bytes: the pages holding data. */
  dbInUseBytes: number;
  /** apiserver_storage_size_bytes (the API server polls etcd; may lag by its poll interval). */
  apiserverStorageBytes: number;
  /** etcd's current revision. */
  revision: number;
}

export const CAPACITY_SETS = [
  { payloadBytes: 1024, count: 1000 },
  { payloadBytes: 16 * 1024, count: 1000 },
  { payloadBytes: 256 * 1024, count: 200 },
] as const;

const etcdUrl = (cpDir: string): string => {
  const st = readState(cpDir);
  if (!st?.ports.etcd) throw new Error(`no etcd port in ${cpDir}/state.json`);
  return `http://127.0.0.1:${st.ports.etcd}`;
};

async function etcdPost<T>(base: string, path: string, body: unknown): Promise<T> {
  const res = await fetch(`${base}${path}`, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } });
  if (!res.ok) throw new Error(`etcd ${path}: HTTP ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

async function revision(base: string): Promise<number> {
  // A range over one key that need not exist: the header carries the current revision.
  const r = await etcdPost<{ header?: { revision?: string } }>(base, "/v3/kv/range", { key: Buffer.from("/capacity-probe").toString("base64") });
  return Number(r.header?.revision ?? 0);
}

async function apiserverText(admin: KubeClient): Promise<string> {
  const res = await admin.stream({ method: "GET", path: "/metrics", accept: "text/plain", timeoutMs: 30_000 });
  const chunks: Buffer[] = [];
  for await (const chunk of res.body) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

export async function storeSize(env: Pick<CapacityEnv, "cpDir" | "admin">): Promise<StoreSize> {
  const base = etcdUrl(env.cpDir);
  const text = await (await fetch(`${base}/metrics`)).text();
  return {
    dbTotalBytes: sample(text, "etcd_mvcc_db_total_size_in_bytes"),
    dbInUseBytes: sample(text, "etcd_mvcc_db_total_size_in_use_in_bytes"),
    apiserverStorageBytes: sample(await apiserverText(env.admin), "apiserver_storage_size_bytes"),
    revision: await revision(base),
  };
}

/** Compacts etcd to its current revision (old versions of every key dropped) and defragments it. */
export async function compactAndDefrag(cpDir: string): Promise<void> {
  const base = etcdUrl(cpDir);
  const rev = await revision(base);
  await etcdPost(base, "/v3/kv/compaction", { revision: String(rev), physical: true }).catch((err: Error) => {
    // The API server compacts on its own every few minutes: "already compacted" is fine.
    if (!/compacted/.test(err.message)) throw err;
  });
  await etcdPost(base, "/v3/maintenance/defragment", {});
}

/**
 * apiserver_storage_size_bytes is refreshed by a poll in the API server: wait (up to `ms`) until
 * it shows etcd's current file size, so the two columns describe the same moment.
 */
async function settled(env: CapacityEnv, ms = 70_000): Promise<StoreSize> {
  const deadline = Date.now() + ms;
  for (;;) {
    const s = await storeSize(env);
    if (s.apiserverStorageBytes === s.dbTotalBytes || Date.now() > deadline) return s;
    await sleep(1_000);
  }
}

const per1000 = (delta: number, count: number) => round((delta / count) * 1000, 0);

export async function capacityPhase(env: CapacityEnv): Promise<Record<string, unknown>> {
  const rows: Array<Record<string, unknown>> = [];
  for (const set of CAPACITY_SETS) {
    for (const kind of ["pending", "finished"] as const) {
      const ns = `bench-capacity-${kind}-${set.payloadBytes / 1024}k`;
      await env.setup(ns, kind === "pending");
      await compactAndDefrag(env.cpDir);
      const base = await settled(env);
      env.say(`capacity: ${set.count} ${kind} deliveries of ${set.payloadBytes / 1024} KiB (etcd ${round(base.dbTotalBytes / 2 ** 20, 1)} MiB, in use ${round(base.dbInUseBytes / 2 ** 20, 1)} MiB)`);
      const concurrency = set.payloadBytes > 64 * 1024 ? 4 : env.concurrency;
      const made =
        kind === "pending"
          ? await createPending({ client: env.producer, namespace: ns, count: set.count, concurrency, payloadBytes: set.payloadBytes, subscription: "sub-0" })
          : await createFinished({ client: env.producer, namespace: ns, count: set.count, concurrency, payloadBytes: set.payloadBytes, url: env.url(ns), subscriptions: 1 });
      env.check(made.errors === 0, `capacity: ${made.errors} ${kind} deliveries of ${set.payloadBytes} B could not be created`);
      const written = await settled(env);
      await compactAndDefrag(env.cpDir);
      const compacted = await settled(env);
      const row = {
        kind,
        payloadBytes: set.payloadBytes,
        count: set.count,
        revisions: written.revision - base.revision,
        // Per 1,000 deliveries, in bytes.
        dbTotalPer1000: per1000(written.dbTotalBytes - base.dbTotalBytes, set.count),
        dbInUsePer1000: per1000(written.dbInUseBytes - base.dbInUseBytes, set.count),
        apiserverStoragePer1000: per1000(written.apiserverStorageBytes - base.apiserverStorageBytes, set.count),
        compactedDbTotalPer1000: per1000(compacted.dbTotalBytes - base.dbTotalBytes, set.count),
        compactedDbInUsePer1000: per1000(compacted.dbInUseBytes - base.dbInUseBytes, set.count),
        compactedApiserverStoragePer1000: per1000(compacted.apiserverStorageBytes - base.apiserverStorageBytes, set.count),
        createSeconds: round(made.seconds, 1),
        base,
        written,
        compacted,
      };
      env.say(
        `capacity: ${kind} ${set.payloadBytes / 1024} KiB: per delivery ${round(row.dbTotalPer1000 / 1000, 0)} B of db file (${round(row.dbInUsePer1000 / 1000, 0)} B in use) before compaction; ${round(row.compactedDbTotalPer1000 / 1000, 0)} B (${round(row.compactedDbInUsePer1000 / 1000, 0)} B in use) after compaction + defrag`,
      );
      rows.push(row);
    }
  }
  return { rows };
}

export function capacityRows(c: { rows: Array<Record<string, number | string>> }): Array<[string, string]> {
  const kb = (x: unknown) => (typeof x === "number" ? `${round(x / 1000 / 1024, 1)}` : String(x));
  return c.rows.map((r) => [
    `etcd KiB per delivery, ${r.kind} ${Number(r.payloadBytes) / 1024} KiB payload (${r.count} created): db file / in use; after compaction + defrag; apiserver_storage_size_bytes after`,
    `${kb(r.dbTotalPer1000)} / ${kb(r.dbInUsePer1000)}; **${kb(r.compactedDbTotalPer1000)} / ${kb(r.compactedDbInUsePer1000)}**; ${kb(r.compactedApiserverStoragePer1000)}`,
  ]);
}
