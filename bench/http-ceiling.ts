// The raw HTTP ceiling, a separate process: POSTs `count` webhook bodies of the benchmark's size,
// signed as Hookline signs them (Standard Webhooks, src/core/request/signing.ts), with one undici Agent
// configured like Hookline's sender (keep-alive, no pipelining), `concurrency` in flight, to the
// same receiver. Prints one JSON line: {count, seconds, perSecond, latencyMs, errors, cpuSecondsPer1000}.
// cpuSecondsPer1000 is the CPU the counted POSTs cost, per 1,000: this client's, the receiver's
// (when its pid is given), everything else's, and the whole machine's (/proc/stat): what a bare
// signed POST costs on this machine, to set the stream benchmark's per-delivery costs against.
// argv[2]: JSON {url, count, concurrency, payloadBytes, warmup, receiverPid?}; argv[3]: a marker (ignored).
import { Agent } from "undici";
import { secretBytes, signStandardWebhooks } from "../src/core/request/signing.js";
import { payload, SIGNING_SECRET, webhookBody } from "./lib/objects.js";
import { machineBusySeconds, now, percentiles, pool, procCpuSeconds, round } from "./lib/util.js";

interface Args {
  url: string;
  count: number;
  concurrency: number;
  payloadBytes: number;
  warmup: number;
  receiverPid?: number;
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
  const cpu0 = { client: process.cpuUsage(), receiver: procCpuSeconds(args.receiverPid), machine: machineBusySeconds() };
  const t0 = now();
  await pool(args.count, args.concurrency, async (i) => {
    latencies[i] = await post(i, "ceil");
  });
  const seconds = (now() - t0) / 1000;
  const used = process.cpuUsage(cpu0.client);
  const client = (used.user + used.system) / 1e6;
  const receiver = procCpuSeconds(args.receiverPid) - cpu0.receiver;
  const machine = machineBusySeconds() - cpu0.machine;
  const per1000 = (x: number) => round((x / args.count) * 1000, 3);
  const cpuSecondsPer1000 = { client: per1000(client), receiver: per1000(receiver), rest: per1000(machine - client - (Number.isNaN(receiver) ? 0 : receiver)), machine: per1000(machine) };
  await agent.close();
  process.stdout.write(`${JSON.stringify({ count: args.count, seconds, perSecond: args.count / seconds, latencyMs: percentiles(latencies), errors, cpuSecondsPer1000 })}\n`);
}

main().catch((err: Error) => {
  process.stderr.write(`http-ceiling: ${err.stack ?? err.message}\n`);
  process.exit(1);
});
