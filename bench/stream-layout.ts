// `npx tsx bench/stream-layout.ts [--quick]` (issue 27, docs/adr/0013-one-stream-per-namespace.md):
// what one JetStream stream per namespace costs nats-server, against the one stream for every
// namespace of earlier versions, with 10 and 100 namespaces (two subscriptions' consumers each,
// as the operator makes them). For each layout and count, on a fresh nats-server (R1, file
// storage, this machine):
//   setup      streams and consumers made, then nats-server's RSS (/proc) after 5 s;
//   idle       nats-server's CPU over 10 s with nothing published;
//   publish    `count` events of 1 KiB, round-robin over the namespaces, 32 in flight, each
//              waiting for JetStream's acknowledgement: latency percentiles, events/s, and
//              nats-server's CPU per 1,000 events.
// Nothing is consumed (interest retention keeps every event: both consumers want it). The
// numbers go into the ADR; nothing is asserted.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AckPolicy, DeliverPolicy, DiscardPolicy, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import { ensureNatsServer } from "../src/cluster/build.js";
import { launchNatsServer, stopNatsGroup } from "../src/cluster/nats.js";
import { consumerConfig } from "../src/jetstream/consumers.js";
import { STREAM_NAME, StreamConnection } from "../src/jetstream/jetstream.js";
import { MAX_MESSAGE_BYTES, encodeMessage } from "../src/jetstream/message.js";
import { namespaceStreamName } from "../src/jetstream/layout.js";
import { now, percentiles, pool, procCpuSeconds, procMemory, round, sleep, type Percentiles } from "./lib/util.js";

const quick = process.argv.includes("--quick");
const COUNT = quick ? 2_000 : 10_000;
const CONCURRENCY = 32;
const DATA = { pad: "x".repeat(1_000) };

interface Row {
  layout: "one stream" | "one per namespace";
  namespaces: number;
  streams: number;
  consumers: number;
  rssMiB: number;
  idleCpuPercent: number;
  publishMs: Percentiles;
  eventsPerSecond: number;
  serverCpuMsPer1000: number;
}

async function measure(layout: Row["layout"], namespaces: number, binary: string): Promise<Row> {
  const dir = mkdtempSync(join(tmpdir(), "hookline-stream-layout-"));
  const nats = await launchNatsServer({ binary, dir });
  try {
    const conn = await StreamConnection.connect({ url: nats.url, source: "bench", name: "hookline stream-layout bench" });
    try {
      const jsm = await conn.jetstreamManager();
      const names = Array.from({ length: namespaces }, (_, i) => `tenant-${String(i).padStart(3, "0")}`);
      if (layout === "one stream") {
        await jsm.streams.add({ name: STREAM_NAME, subjects: ["hookline.>"], retention: RetentionPolicy.Interest, storage: StorageType.File, discard: DiscardPolicy.New, max_msg_size: MAX_MESSAGE_BYTES });
      } else {
        for (const ns of names) await conn.ensureStream(ns);
      }
      for (const ns of names) {
        const stream = layout === "one stream" ? STREAM_NAME : namespaceStreamName(STREAM_NAME, ns);
        for (const sub of ["a", "b"]) {
          const cfg = consumerConfig({ namespace: ns, name: sub, uid: `${ns}-${sub}` }, { eventTypes: undefined, maxInFlight: 100, timeoutMs: 10_000 });
          await jsm.consumers.add(stream, { ...cfg, ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.New });
        }
      }
      await sleep(5_000);
      const rss = procMemory(nats.pid)?.rss ?? NaN;
      const idle0 = procCpuSeconds(nats.pid);
      await sleep(10_000);
      const idleCpu = procCpuSeconds(nats.pid) - idle0;

      const latencies: number[] = [];
      const cpu0 = procCpuSeconds(nats.pid);
      const t0 = now();
      await pool(COUNT, CONCURRENCY, async (i) => {
        const ns = names[i % names.length]!;
        const msg = encodeMessage({ id: `evt-${i}`, type: "order.paid", namespace: ns, timestamp: new Date().toISOString(), data: DATA });
        const s = now();
        await conn.publish(msg);
        latencies.push(now() - s);
      });
      const seconds = (now() - t0) / 1000;
      const cpu = procCpuSeconds(nats.pid) - cpu0;
      return {
        layout,
        namespaces,
        streams: layout === "one stream" ? 1 : namespaces,
        consumers: 2 * namespaces,
        rssMiB: round(rss / 1048576, 1),
        idleCpuPercent: round((idleCpu / 10) * 100, 2),
        publishMs: percentiles(latencies),
        eventsPerSecond: round(COUNT / seconds, 0),
        serverCpuMsPer1000: round((cpu * 1000 * 1000) / COUNT, 0),
      };
    } finally {
      await conn.close();
    }
  } finally {
    await stopNatsGroup(nats.pgid, dir);
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const { binary } = await ensureNatsServer({ env: process.env });
  const rows: Row[] = [];
  for (const namespaces of [10, 100]) {
    for (const layout of ["one stream", "one per namespace"] as const) {
      const row = await measure(layout, namespaces, binary);
      rows.push(row);
      process.stderr.write(`${JSON.stringify(row)}\n`);
    }
  }
  const lines = [
    `${COUNT} events of 1 KiB per run, ${CONCURRENCY} publishes in flight; nats-server R1, file storage`,
    "",
    "| layout | namespaces | streams | consumers | nats-server RSS | idle CPU | publish p50 / p99 | events/s | nats-server CPU per 1,000 events |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ...rows.map((r) => `| ${r.layout} | ${r.namespaces} | ${r.streams} | ${r.consumers} | ${r.rssMiB} MiB | ${r.idleCpuPercent} % | ${r.publishMs.p50} / ${r.publishMs.p99} ms | ${r.eventsPerSecond} | ${r.serverCpuMsPer1000} ms |`),
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
}

await main();
