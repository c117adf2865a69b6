// `hookline demo`: the whole product in about a minute, with no cluster. It starts the embedded
// control plane (etcd + kube-apiserver), the operator in this process, and three local
// receivers for three customers: acme fails twice then recovers, globex answers 410 Gone,
// initech is down (a closed port). It subscribes them with a fast retry policy, publishes one
// order.paid event through the fan-out, prints each request as it happens and each delivery's
// final phase, then the kubectl commands to look at and replay what failed.
import { createWriteStream, existsSync, rmSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { parseArgs } from "node:util";
import { KubeConfig } from "@kubernetes/client-node";
import { API_VERSION, SUBSCRIPTION, isTerminalPhase } from "../api/names.js";
import { ensureBinaries } from "../cluster/build.js";
import { readState, runningControlPlane, startControlPlane, stopControlPlane, type ControlPlaneInfo } from "../cluster/control-plane.js";
import { loadConfig } from "../config/config.js";
import { secretBytes, signStandardWebhooks } from "../core/signing.js";
import { DELIVERIES, SUBSCRIPTIONS } from "../delivery/objects.js";
import { KubeClient } from "../kube/client.js";
import { collectionPath, CORE, objectPath } from "../kube/types.js";
import { createLogger } from "../observability/logger.js";
import { Metrics } from "../observability/metrics.js";
import { publish, type PublishResult } from "../publish/fanout.js";
import { installCrds } from "./crds.js";
import { Operator } from "./operator.js";

const USAGE = `usage: hookline demo [--keep] [--dir DIR]

Shows Hookline end to end in about a minute, with no cluster: starts a local etcd +
kube-apiserver (built once from Go modules and cached), the operator, and three local
receivers; subscribes them, publishes one order.paid event and prints every request, each
delivery's outcome and the kubectl commands to inspect and replay the failures.

  --keep      leave the control plane running afterwards (in DIR) to try those commands
  --dir DIR   where the kept control plane lives (default .hookline/demo); without --keep
              a temporary directory is used and removed
`;

const NAMESPACE = "shop";
const EVENT_ID = "evt-1001";
const SECRET = "whsec_ZGVtby1zaWduaW5nLXNlY3JldC0xMjM0NTY3OA==";
const FAST_RETRY = { maxAttempts: 4, initialBackoff: "200ms", multiplier: 2, maxBackoff: "2s", jitterPercent: 0 };
const DEFAULT_KEEP_DIR = ".hookline/demo";
const DEADLINE_MS = 60_000;
/** Lines wait this long so the down customer's attempts (read from status) print in time order. */
const REORDER_MS = 400;

type Print = (line: string) => void;

interface Customer {
  name: string;
  eventTypes: string[];
  story: string;
  url: string;
}

interface Attempt {
  number: number;
  startedAt: string;
  responseStatus?: number;
  error?: string;
}

interface DeliveryStatus {
  phase?: string;
  attempts?: number;
  history?: Attempt[];
  deadLetter?: { reason: string; message?: string };
  discard?: { reason: string; message?: string };
}

interface SubscriptionStatus {
  deliveries?: { pending?: number; succeeded?: number; deadLettered?: number };
  health?: { state?: string; reason?: string; consecutiveFailures?: number };
}

const offset = (ms: number) => `+${(Math.max(0, ms) / 1000).toFixed(2)}s`.padStart(7);

/** Lines stamped with when they happened, printed in that order once REORDER_MS old. */
class Timeline {
  private pending: Array<{ at: number; seq: number; line: string }> = [];
  private seq = 0;
  origin = Date.now();

  constructor(private readonly print: Print) {}

  add(at: number, text: string): void {
    this.pending.push({ at, seq: this.seq++, line: `  ${offset(at - this.origin)}  ${text}` });
  }

  flush(all = false): void {
    const cutoff = Date.now() - REORDER_MS;
    const due = this.pending.filter((p) => all || p.at <= cutoff).sort((a, b) => a.at - b.at || a.seq - b.seq);
    this.pending = this.pending.filter((p) => !due.includes(p));
    for (const p of due) this.print(p.line);
  }
}

/** A receiver answering `reply(n)` to its n-th request; each request goes on the timeline. */
async function receiver(name: string, reply: (n: number) => number, timeline: Timeline): Promise<Server> {
  let n = 0;
  const server = createServer((req, res) => {
    const at = Date.now();
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const status = reply(++n);
      const body = Buffer.concat(chunks).toString("utf8");
      const expected = signStandardWebhooks({
        id: String(req.headers["webhook-id"] ?? ""),
        timestampSeconds: Number(req.headers["webhook-timestamp"]),
        body,
        secrets: [secretBytes(SECRET)],
      })["webhook-signature"];
      const signature = req.headers["webhook-signature"] === expected ? "signature ok" : "BAD SIGNATURE";
      timeline.add(at, `${name.padEnd(8)} attempt ${n}  -> answered ${status}  (${signature})`);
      res.writeHead(status, { "content-type": "text/plain" }).end(status < 300 ? "thanks\n" : "no\n");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return server;
}

const urlOf = (s: Server, path: string) => `http://127.0.0.1:${(s.address() as AddressInfo).port}${path}`;

/** A port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

const closeServer = (s: Server) =>
  new Promise<void>((r) => {
    s.closeAllConnections();
    s.close(() => r());
  });

async function startCluster(dir: string, binDir: string, attach: boolean): Promise<ControlPlaneInfo> {
  return startControlPlane({
    dir,
    binDir,
    attachToParent: attach,
    beforeControllerManager: async (cp) => {
      const kc = new KubeConfig();
      kc.loadFromFile(cp.kubeconfig);
      const c = await KubeClient.create(kc);
      await installCrds(c);
      await c.destroy();
    },
  });
}

async function startOperator(kubeconfig: string, logFile: string): Promise<Operator> {
  const config = loadConfig({
    WATCH_NAMESPACES: NAMESPACE,
    WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8,::1/128",
    METRICS_PORT: "0",
    HEALTH_PORT: "0",
    LEADER_ELECT: "false",
    WEBHOOK_DRAIN_TIMEOUT_MS: "2000",
    LOG_LEVEL: "debug",
  });
  const log = createLogger({ level: config.logLevel, destination: createWriteStream(logFile) });
  const op = new Operator({ config, kubeconfig, log, metrics: new Metrics({ defaultMetrics: false }), statusIntervalMs: 500 });
  await op.start();
  return op;
}

async function subscribe(client: KubeClient, customers: Customer[], print: Print): Promise<void> {
  await client.request({ method: "POST", path: collectionPath(CORE.namespaces), body: { apiVersion: "v1", kind: "Namespace", metadata: { name: NAMESPACE } } });
  await client.request({
    method: "POST",
    path: collectionPath(CORE.secrets, NAMESPACE),
    body: { apiVersion: "v1", kind: "Secret", metadata: { name: "signing", namespace: NAMESPACE }, type: "Opaque", stringData: { secret: SECRET } },
  });
  print(`Three customers subscribe in namespace ${NAMESPACE} (signed; retry: 4 attempts, backoff 200ms doubling):`);
  for (const c of customers) {
    await client.request({
      method: "POST",
      path: collectionPath(SUBSCRIPTIONS, NAMESPACE),
      body: {
        apiVersion: API_VERSION,
        kind: SUBSCRIPTION.kind,
        metadata: { name: c.name, namespace: NAMESPACE },
        spec: { url: c.url, eventTypes: c.eventTypes, secretRef: { name: "signing" }, timeout: "2s", retry: FAST_RETRY },
      },
    });
    print(`  ${c.name.padEnd(8)} ${JSON.stringify(c.eventTypes).padEnd(14)} ${c.url.padEnd(38)} ${c.story}`);
  }
}

/**
 * Polls the deliveries until all are finished, putting the down customer's attempts (it has no
 * receiver to see them) on the timeline from its status history. Returns the final statuses.
 */
async function follow(client: KubeClient, result: PublishResult, down: string, timeline: Timeline, signal: AbortSignal): Promise<Map<string, DeliveryStatus>> {
  const final = new Map<string, DeliveryStatus>();
  let downSeen = 0;
  const deadline = Date.now() + DEADLINE_MS;
  while (final.size < result.deliveries.length) {
    if (signal.aborted) throw new Error("interrupted");
    if (Date.now() > deadline) throw new Error(`the deliveries did not finish within ${DEADLINE_MS / 1000}s`);
    for (const d of result.deliveries.filter((x) => !final.has(x.subscription))) {
      const got = await client.request<{ status?: DeliveryStatus }>({ method: "GET", path: objectPath(DELIVERIES, NAMESPACE, d.name) });
      const status = got.status ?? {};
      if (d.subscription === down) {
        for (const a of (status.history ?? []).filter((h) => h.number > downSeen)) {
          downSeen = Math.max(downSeen, a.number);
          timeline.add(Date.parse(a.startedAt), `${down.padEnd(8)} attempt ${a.number}  -> ${a.error ?? `HTTP ${a.responseStatus}`}  (from its status: no one answered)`);
        }
      }
      if (isTerminalPhase(status.phase)) final.set(d.subscription, status);
    }
    timeline.flush();
    if (final.size < result.deliveries.length) await delay(100);
  }
  timeline.flush(true);
  return final;
}

/** Waits (briefly) for the subscriptions' status rollup, so a kept cluster shows the outcome. */
async function endpoints(client: KubeClient, customers: Customer[]): Promise<Map<string, SubscriptionStatus>> {
  const out = new Map<string, SubscriptionStatus>();
  const deadline = Date.now() + 5_000;
  for (;;) {
    for (const c of customers) {
      const got = await client.request<{ status?: SubscriptionStatus }>({ method: "GET", path: objectPath(SUBSCRIPTIONS, NAMESPACE, c.name) });
      out.set(c.name, got.status ?? {});
    }
    const settled = [...out.values()].every((s) => s.deliveries?.pending === 0 && (s.deliveries.succeeded ?? 0) + (s.deliveries.deadLettered ?? 0) > 0);
    if (settled || Date.now() > deadline) return out;
    await delay(200);
  }
}

function describe(s: DeliveryStatus): string {
  const attempts = `after ${s.attempts ?? 0} attempt${s.attempts === 1 ? "" : "s"}`;
  if (s.phase === "Succeeded") return attempts;
  if (s.deadLetter) return `${s.deadLetter.reason} ${attempts}${s.deadLetter.message ? ` (${s.deadLetter.message})` : ""}`;
  if (s.discard) return `${s.discard.reason}${s.discard.message ? ` (${s.discard.message})` : ""}`;
  return "";
}

function printOutcome(print: Print, customers: Customer[], result: PublishResult, final: Map<string, DeliveryStatus>, subs: Map<string, SubscriptionStatus>, elapsedMs: number): void {
  const nameOf = new Map(result.deliveries.map((d) => [d.subscription, d.name]));
  print("");
  print(`Deliveries, ${(elapsedMs / 1000).toFixed(1)}s after publishing (kubectl get whdel -n ${NAMESPACE}):`);
  for (const c of customers) {
    const s = final.get(c.name)!;
    print(`  ${c.name.padEnd(8)} ${nameOf.get(c.name)!.padEnd(18)} ${(s.phase ?? "").padEnd(13)} ${describe(s)}`);
  }
  print("");
  print(`Endpoints (kubectl get whsub -n ${NAMESPACE}):`);
  for (const c of customers) {
    const h = subs.get(c.name)?.health;
    const detail = h?.state === "Disabled" ? `reason ${h.reason ?? "?"}: new deliveries wait; it is probed until it answers again` : h?.consecutiveFailures ? `${h.consecutiveFailures} consecutive failures` : "";
    print(`  ${c.name.padEnd(8)} ${(h?.state ?? "unknown").padEnd(10)} ${detail}`.trimEnd());
  }
}

function printNextSteps(print: Print, opts: { keep: boolean; dir: string; keptDir: string; failed: Array<{ subscription: string; name: string }> }): void {
  const rel = (p: string) => {
    const r = relative(process.cwd(), p);
    return r && !r.startsWith("..") ? r : p;
  };
  const dir = rel(opts.keep ? opts.dir : opts.keptDir);
  print("");
  print(opts.keep ? `The control plane is still running in ${dir}. Inspect and replay:` : `To try these yourself, run \`hookline demo --keep\` (the control plane then stays up in ${dir}):`);
  print(`  export KUBECONFIG=${dir}/kubeconfig`);
  print(`  kubectl get hookline -n ${NAMESPACE}`);
  print(`  kubectl get whdel -n ${NAMESPACE} --field-selector status.phase=DeadLettered`);
  for (const f of opts.failed) print(`  kubectl describe whdel -n ${NAMESPACE} ${f.name}`);
  print(`  hookline dev --dir ${dir}      # in another shell: the operator again, to act on replays`);
  const [one, ...rest] = opts.failed;
  if (one) print(`  kubectl annotate whdel -n ${NAMESPACE} ${one.name} hookline.dev/replay="endpoint fixed, INC-42"`);
  for (const f of rest) print(`  kubectl annotate whsub -n ${NAMESPACE} ${f.subscription} hookline.dev/replay-dead-letters="${f.subscription} takes webhooks again"`);
  print(`  hookline publish -n ${NAMESPACE} -t order.paid --id evt-1002 -d '{"order": 1002}'`);
  print(`  hookline cluster down --dir ${dir}`);
}

export async function demoCommand(args: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({ args, options: { keep: { type: "boolean" }, dir: { type: "string" }, help: { type: "boolean", short: "h" } }, allowPositionals: false }));
  } catch (err) {
    process.stderr.write(`hookline demo: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const keep = values.keep ?? false;
  const print: Print = (line) => process.stdout.write(`${line}\n`);
  const note: Print = (line) => process.stderr.write(`[demo] ${line}\n`);
  const keptDir = resolve(values.dir ?? DEFAULT_KEEP_DIR);
  if (keep && runningControlPlane(keptDir)) {
    process.stderr.write(`hookline demo: a control plane is already running in ${keptDir} (an earlier --keep); stop it first: hookline cluster down --dir ${keptDir}\n`);
    return 1;
  }
  const { binDir } = await ensureBinaries({ env: process.env, onProgress: (l) => !/binaries present/.test(l) && note(l) });
  const dir = keep ? keptDir : await mkdtemp(join(tmpdir(), "hookline-demo-"));
  // A kept directory of an earlier demo: start from an empty etcd, not the earlier events.
  if (keep && readState(dir) && existsSync(join(dir, "etcd"))) rmSync(join(dir, "etcd"), { recursive: true, force: true });

  const timeline = new Timeline(print);
  const servers: Server[] = [];
  let op: Operator | undefined;
  let client: KubeClient | undefined;
  const interrupted = new AbortController();
  const onSignal = () => interrupted.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    const started = Date.now();
    note(`starting a local control plane in ${dir} ...`);
    const info = await startCluster(dir, binDir, !keep);
    const kc = new KubeConfig();
    kc.loadFromFile(info.kubeconfig);
    client = await KubeClient.create(kc);
    note(`kube-apiserver ${info.version} at ${info.server}, CRDs installed, in ${((Date.now() - started) / 1000).toFixed(1)}s`);

    const acme = await receiver("acme", (n) => (n <= 2 ? 503 : 200), timeline);
    const globex = await receiver("globex", () => 410, timeline);
    servers.push(acme, globex);
    const customers: Customer[] = [
      { name: "acme", eventTypes: ["order.*"], story: "fails twice (503), then recovers", url: urlOf(acme, "/webhooks") },
      { name: "globex", eventTypes: ["order.paid"], story: "answers 410 Gone: wants no more webhooks", url: urlOf(globex, "/hooks/orders") },
      { name: "initech", eventTypes: ["*"], story: "is down: nothing listens on its port", url: `http://127.0.0.1:${await closedPort()}/events` },
    ];
    const logFile = join(dir, "operator.log");
    op = await startOperator(info.kubeconfig, logFile);
    note(`operator running${keep ? ` (log: ${logFile})` : ""}`);

    print("");
    await subscribe(client, customers, print);
    print("");
    const data = { order: 1001, customer: "c_42", total: "42.00", currency: "EUR" };
    timeline.origin = Date.now();
    const result = await publish(client, { namespace: NAMESPACE, type: "order.paid", id: EVENT_ID, data });
    print(`  ${offset(0)}  published order.paid ${EVENT_ID} ${JSON.stringify(data)}`);
    print(`           fan-out: ${result.deliveries.map((d) => `${d.name} (${d.result})`).join(", ")}`);
    const final = await follow(client, result, "initech", timeline, interrupted.signal);
    const elapsed = Date.now() - timeline.origin;
    printOutcome(print, customers, result, final, await endpoints(client, customers), elapsed);
    // The one to replay first is the one that failed for lack of an answer (Exhausted).
    const failed = result.deliveries
      .filter((d) => final.get(d.subscription)?.phase !== "Succeeded")
      .sort((a, b) => Number(final.get(b.subscription)?.deadLetter?.reason === "Exhausted") - Number(final.get(a.subscription)?.deadLetter?.reason === "Exhausted"));
    printNextSteps(print, { keep, dir, keptDir, failed });
    return 0;
  } catch (err) {
    timeline.flush(true);
    process.stderr.write(`hookline demo: ${(err as Error).message}${keep ? ` (operator log: ${join(dir, "operator.log")})` : ""}\n`);
    return interrupted.signal.aborted ? 130 : 1;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await op?.stop().catch(() => undefined);
    await client?.destroy().catch(() => undefined);
    await Promise.all(servers.map(closeServer));
    if (!keep) {
      note("stopping the control plane ...");
      await stopControlPlane(dir).catch(() => undefined);
      await rm(dir, { recursive: true, force: true }).catch(() => undefined);
    }
  }
}
