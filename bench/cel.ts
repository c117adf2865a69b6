// The cost of spec.filter and spec.transform per event (npm run bench:cel): the work each adds
// on the paths that run them, timed in this process with the typical expressions of
// docs/publishing.md on a 1 KiB payload, then set against the operator's CPU per delivery of the
// latest benchmark results (bench/results/latest.json, latest-stream.json): the fraction of a
// delivery's CPU, which on a CPU-bound replica is the fraction of throughput they cost.
//   stream filter: JSON.parse of the message's data + the filter (subscription-stream.ts filteredOut)
//   CR filter:     the fan-out's selectSubscriptions with the filter, less without it
//   transform:     transformBody on the standard body (delivery/engine/attempt.ts)
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { applyFilter } from "../src/core/filter.js";
import { transformBody } from "../src/delivery/engine/attempt.js";
import { webhookBody } from "../src/delivery/payload.js";
import { selectSubscriptions, type SubscriptionLike } from "../src/publish/fanout.js";

const FILTER = 'data.amount.value > 1000 && data.currency == "EUR"';
const TRANSFORM = '{"text": "Order " + string(data.order) + " paid: " + string(data.amount.value) + " " + data.amount.currency}';
const ROOT = join(import.meta.dirname, "..");

const data = { order: 1001, amount: { value: 4200, currency: "EUR" }, currency: "EUR", customer: { id: "c-42", name: "Zoë Ünal" }, pad: "x".repeat(850) };
const dataText = JSON.stringify(data);
const body = { id: "evt-1001", type: "order.paid", body: webhookBody("evt-1001", "order.paid", "2026-12-05T05:00:00Z", dataText) };

/** Microseconds per call of `fn`, the median of 7 rounds of `n` calls after a warm-up. */
function usPer(fn: () => unknown, n = 20_000): number {
  for (let i = 0; i < n; i++) fn();
  const rounds: number[] = [];
  for (let r = 0; r < 7; r++) {
    const t = process.cpuUsage();
    for (let i = 0; i < n; i++) fn();
    const u = process.cpuUsage(t);
    rounds.push((u.user + u.system) / n);
  }
  return rounds.sort((a, b) => a - b)[3]!;
}

const event = { id: "evt-1001", type: "order.paid", namespace: "shop", data };
const plain: SubscriptionLike[] = [{ metadata: { name: "acme", namespace: "shop" }, spec: { url: "https://x" } }];
const filtered: SubscriptionLike[] = [{ metadata: { name: "acme", namespace: "shop" }, spec: { url: "https://x", filter: FILTER } }];

const check = applyFilter(FILTER, event);
const t = transformBody(TRANSFORM, body, "shop");
if (check.kind !== "matched" || !t.ok) throw new Error("the typical filter and transform do not work on the benchmark's event");

const streamFilter = usPer(() => applyFilter(FILTER, { ...event, data: JSON.parse(dataText) as unknown }));
const crFilter = usPer(() => selectSubscriptions(filtered, "shop", "order.paid", { id: "evt-1001", data })) - usPer(() => selectSubscriptions(plain, "shop", "order.paid", { id: "evt-1001", data }));
const transform = usPer(() => transformBody(TRANSFORM, body, "shop"));

const read = (file: string): Record<string, unknown> | undefined => {
  try {
    return JSON.parse(readFileSync(join(ROOT, "bench/results", file), "utf8")) as Record<string, unknown>;
  } catch {
    return undefined;
  }
};
const stream = read("latest-stream.json") as { stream?: { measured?: { cpuSecondsPer1000?: number } }; git?: { commit?: string } } | undefined;
const cr = read("latest.json") as { throughput?: { cpuSecondsPer1000?: number }; git?: { commit?: string } } | undefined;
const streamUs = (stream?.stream?.measured?.cpuSecondsPer1000 ?? NaN) * 1000;
const crUs = (cr?.throughput?.cpuSecondsPer1000 ?? NaN) * 1000;
const pct = (us: number, of: number) => (Number.isFinite(of) ? `${((100 * us) / of).toFixed(1)}%` : "n/a");

console.log(`node ${process.version}; 1 KiB payload; filter ${FILTER}; transform ${TRANSFORM}`);
console.log("| path | CPU µs per event | of the operator's CPU per delivery (stream / CR mode) |");
console.log("| --- | --- | --- |");
console.log(`| stream mode: parse the data + filter | ${streamFilter.toFixed(1)} | ${pct(streamFilter, streamUs)} of ${streamUs.toFixed(0)} µs (latest-stream.json, ${stream?.git?.commit ?? "?"}) |`);
console.log(`| CR mode: the fan-out's filter | ${crFilter.toFixed(1)} | ${pct(crFilter, crUs)} of ${crUs.toFixed(0)} µs (latest.json, ${cr?.git?.commit ?? "?"}) |`);
console.log(`| transform, per attempt (both modes) | ${transform.toFixed(1)} | ${pct(transform, streamUs)} / ${pct(transform, crUs)} |`);
