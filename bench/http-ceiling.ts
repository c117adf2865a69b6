// The raw HTTP ceiling, a separate process: POSTs `count` webhook bodies of the benchmark's size,
// signed as Hookline signs them (Standard Webhooks, src/core/request/signing.ts), with one undici Agent
// configured like Hookline's sender (keep-alive, no pipelining), `concurrency` in flight, to the
// same receiver. Prints one JSON line: {count, seconds, perSecond, latencyMs, errors}.
// argv[2]: JSON {url, count, concurrency, payloadBytes, warmup}; argv[3]: a marker (ignored).
import { Agent } from "undici";
import { secretBytes, signStandardWebhooks } from "../src/core/request/signing.js";
import { payload, SIGNING_SECRET, webhookBody } from "./lib/objects.js";
import { now, percentiles, pool } from "./lib/util.js";

interface Args {
  url: string;
  count: number;
  concurrency: number;
  payloadBytes: number;
  warmup: number;
}

const args = JSON.parse(process.argv[2] ?? "{}") as Args;
const key = secretBytes(SIGNING_SECRET);
const agent = new Agent({ connections: args.concurrency, keepAliveTimeout: 4_000, keepAliveMaxTimeout: 60_000, pipelining: 1 });
const origin = new URL(args.url).origin;
const basePath = new URL(args.url).pathname.replace(/\/$/, "");
let errors = 0;

async function post(i: number, tag: string): Promise<number> {
  const started = now();
  const id = `${tag}-${i}`;
  const body = webhookBody(id, payload(i, started, args.payloadBytes));
  const headers = {
    "content-type": "application/json",
    "user-agent": "hookline-bench-ceiling",
    ...signStandardWebhooks({ id, timestampSeconds: Math.floor(started / 1000), body, secrets: [key] }),
  };
  try {
    const res = await agent.request({ origin, path: `${basePath}/${i % 10}`, method: "POST", headers, body, headersTimeout: 10_000, bodyTimeout: 10_000 });
    await res.body.dump({ limit: 4096 });
    if (res.statusCode !== 200) errors++;
  } catch {
    errors++;
  }
  return now() - started;
}

async function main(): Promise<void> {
  await pool(args.warmup, args.concurrency, async (i) => void (await post(i, "warm")));
  errors = 0;
  const latencies: number[] = new Array<number>(args.count);
  const t0 = now();
  await pool(args.count, args.concurrency, async (i) => {
    latencies[i] = await post(i, "ceil");
  });
  const seconds = (now() - t0) / 1000;
  await agent.close();
  process.stdout.write(`${JSON.stringify({ count: args.count, seconds, perSecond: args.count / seconds, latencyMs: percentiles(latencies), errors })}\n`);
}

main().catch((err: Error) => {
  process.stderr.write(`http-ceiling: ${err.stack ?? err.message}\n`);
  process.exit(1);
});
