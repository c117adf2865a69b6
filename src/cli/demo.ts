// `hookline demo`: the whole product in about a minute, with no cluster. It plays the three-
// customer case study on the embedded control plane (etcd + kube-apiserver) with the operator in
// this process and three local receivers: acme answers 503, 503, then 200; globex answers 410
// Gone; initech answers 500 to all six attempts, the gaps doubling (50, 100, 200, 400, 800 ms).
// It publishes one order.paid event through the fan-out, prints each customer's requests with
// their gaps as the operator recorded them, the end state (delivered; dead-lettered Gone with
// the endpoint disabled; dead-lettered Exhausted), then replays initech's dead letter once it
// is back, and prints the kubectl commands to look around.
import { createWriteStream, existsSync, rmSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { STATUS_CODES, createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { parseDuration } from "../api/duration.js";
import { ANNOTATIONS, API_VERSION, SUBSCRIPTION, isTerminalPhase } from "../api/names.js";
import { ensureBinaries } from "../cluster/build.js";
import { readState, runningControlPlane, startControlPlane, stopControlPlane, type ControlPlaneInfo } from "../cluster/control-plane.js";
import { loadConfig } from "../config/config.js";
import { backoffDelay } from "../core/attempt/backoff.js";
import { secretBytes, signStandardWebhooks } from "../core/request/signing.js";
import { DELIVERIES, SUBSCRIPTIONS } from "../delivery/objects.js";
import { KubeClient } from "../kube/client.js";
import { loadKubeconfig } from "../kube/kubeconfig.js";
import { collectionPath, CORE, objectPath } from "../kube/types.js";
import { createLogger } from "../observability/logger.js";
import { Metrics } from "../observability/metrics.js";
import { publish } from "../publish/fanout.js";
import type { PublishResult } from "../publish/result.js";
import { installCrds } from "./crds.js";
import { Operator } from "./operator.js";

const NAMESPACE = "shop";
const EVENT_ID = "evt-1001";
const SECRET = "whsec_ZGVtby1zaWduaW5nLXNlY3JldC0xMjM0NTY3OA==";
/** The case study's schedule: 6 attempts, 50 ms doubling up to 1 s, no jitter (so the gaps are exact). */
const RETRY = { maxAttempts: 6, initialBackoff: "50ms", multiplier: 2, maxBackoff: "1s", jitterPercent: 0 };
/** Above initech's six failures, so the breaker lets all six through (the default opens at 5). */
const BREAKER = { failureThreshold: 10 };
const REPLAY_REASON = "initech is back, INC-42";
const DEADLINE_MS = 60_000;

type Print = (line: string) => void;

interface Customer {
  name: string;
  eventTypes: string[];
  story: string;
  url: string;
  path: string;
  server: DemoReceiver;
}

interface Attempt {
  number: number;
  startedAt: string;
  durationMs?: number;
  responseStatus?: number;
  error?: string;
  replay?: boolean;
}

interface DeliveryStatus {
  phase?: string;
  attempts?: number;
  history?: Attempt[];
  deadLetter?: { reason: string; message?: string };
  discard?: { reason: string; message?: string };
  lastReplay?: { reason?: string; result?: string };
}

interface SubscriptionStatus {
  deliveries?: { pending?: number; succeeded?: number; deadLettered?: number };
  health?: { state?: string; reason?: string; consecutiveFailures?: number };
}

/** What one receiver saw: per request, whether the signature verified and which webhook-id it carried. */
interface DemoReceiver {
  server: Server;
  seen: Array<{ signatureOk: boolean; webhookId: string }>;
}

/** A receiver answering `reply(n)` to its n-th request, checking each signature as a customer would. */
async function receiver(reply: (n: number) => number): Promise<DemoReceiver> {
  const r: DemoReceiver = { server: createServer(), seen: [] };
  r.server.on("request", (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const status = reply(r.seen.length + 1);
      const webhookId = String(req.headers["webhook-id"] ?? "");
      const expected = signStandardWebhooks({ id: webhookId, timestampSeconds: Number(req.headers["webhook-timestamp"]), body: Buffer.concat(chunks), secrets: [secretBytes(SECRET)] })["webhook-signature"];
      r.seen.push({ signatureOk: req.headers["webhook-signature"] === expected, webhookId });
      res.writeHead(status, { "content-type": "text/plain" }).end(status < 300 ? "thanks\n" : "no\n");
    });
  });
  await new Promise<void>((done) => r.server.listen(0, "127.0.0.1", done));
  return r;
}

const urlOf = (s: Server, path: string) => `http://127.0.0.1:${(s.address() as AddressInfo).port}${path}`;

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
      const c = await KubeClient.create((await loadKubeconfig({ file: cp.kubeconfig, env: process.env })).credentials);
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
  print(`Three customers subscribe in namespace ${NAMESPACE} (signed; retry: ${RETRY.maxAttempts} attempts, backoff ${RETRY.initialBackoff} doubling up to ${RETRY.maxBackoff}, no jitter):`);
  for (const c of customers) {
    await client.request({
      method: "POST",
      path: collectionPath(SUBSCRIPTIONS, NAMESPACE),
      body: {
        apiVersion: API_VERSION,
        kind: SUBSCRIPTION.kind,
        metadata: { name: c.name, namespace: NAMESPACE },
        spec: { url: c.url, eventTypes: c.eventTypes, secretRef: { name: "signing" }, timeout: "2s", retry: RETRY, circuitBreaker: BREAKER },
      },
    });
    print(`  ${c.name.padEnd(8)} ${JSON.stringify(c.eventTypes).padEnd(14)} ${c.url.padEnd(38)} ${c.story}`);
  }
}

/** The delay the engine waits after `failures` failed attempts of RETRY (no jitter: exact). */
const scheduled = (failures: number) => backoffDelay(failures, { initialBackoffMs: parseDuration(RETRY.initialBackoff), multiplier: RETRY.multiplier, maxBackoffMs: parseDuration(RETRY.maxBackoff), jitterPercent: RETRY.jitterPercent }, () => 0.5);

const ms = (n: number) => `${Math.round(n)}ms`;
const answer = (a: Attempt) => (a.responseStatus ? `${a.responseStatus} ${STATUS_CODES[a.responseStatus] ?? ""}`.trimEnd() : (a.error ?? "no answer"));

/**
 * One request as the operator recorded it in status.history: when it started (from the first
 * one), the gap since the one before (at least the scheduled backoff: the next attempt is due
 * that long after the previous one ended), and the answer.
 */
function requestLine(c: Customer, a: Attempt, first: Attempt, previous: Attempt | undefined): string {
  const at = `+${((Date.parse(a.startedAt) - Date.parse(first.startedAt)) / 1000).toFixed(3)}s`;
  const gap = a.replay ? "replay".padEnd(19) : previous ? `gap ${ms(Date.parse(a.startedAt) - Date.parse(previous.startedAt)).padStart(6)} >= ${ms(scheduled(previous.number)).padStart(5)}` : "".padEnd(19);
  return `  ${c.path.padEnd(14)} request ${a.number} for ${EVENT_ID} at ${at.padStart(7)}  ${gap}  -> ${answer(a)}`;
}

function outcomeLine(s: DeliveryStatus, subs: SubscriptionStatus | undefined): string {
  const n = s.attempts ?? 0;
  const attempts = `after ${n} attempt${n === 1 ? "" : "s"}`;
  if (s.phase === "Succeeded") return `  => Succeeded ${attempts}`;
  if (s.deadLetter) {
    const disabled = subs?.health?.state === "Disabled" ? `; the endpoint is Disabled (reason ${subs.health.reason ?? "?"})` : "";
    return `  => DeadLettered (${s.deadLetter.reason}) ${attempts}${disabled}`;
  }
  if (s.discard) return `  => Discarded (${s.discard.reason})`;
  return `  => ${s.phase ?? "?"}`;
}

async function getDelivery(client: KubeClient, name: string): Promise<{ metadata: { annotations?: Record<string, string> }; status?: DeliveryStatus }> {
  return client.request({ method: "GET", path: objectPath(DELIVERIES, NAMESPACE, name) });
}

async function getSubscription(client: KubeClient, name: string): Promise<SubscriptionStatus> {
  return (await client.request<{ status?: SubscriptionStatus }>({ method: "GET", path: objectPath(SUBSCRIPTIONS, NAMESPACE, name) })).status ?? {};
}

/** Polls until `check` returns a value, or throws after the demo's deadline. */
async function until<T>(what: string, check: () => Promise<T | undefined>, signal: AbortSignal, timeoutMs = DEADLINE_MS): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (signal.aborted) throw new Error("interrupted");
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs / 1000}s`);
    await delay(100);
  }
}

/** Each customer's delivery, once finished: its requests with their gaps, and its outcome. */
async function follow(client: KubeClient, customers: Customer[], result: PublishResult, print: Print, signal: AbortSignal): Promise<Map<string, DeliveryStatus>> {
  const final = new Map<string, DeliveryStatus>();
  const nameOf = new Map(result.deliveries.map((d) => [d.subscription, d.name]));
  for (const c of customers) {
    const name = nameOf.get(c.name)!;
    const s = await until(`the delivery ${name} finishing`, async () => {
      const st = (await getDelivery(client, name)).status ?? {};
      return isTerminalPhase(st.phase) ? st : undefined;
    }, signal);
    final.set(c.name, s);
    // Health is rolled up a moment after the delivery finishes: wait for Gone to disable it.
    const disabled = async () => {
      const st = await getSubscription(client, c.name);
      return st.health?.state === "Disabled" ? st : undefined;
    };
    const subs = s.deadLetter?.reason === "Gone" ? await until(`${c.name}'s endpoint being disabled`, disabled, signal, 10_000) : undefined;
    const history = s.history ?? [];
    print(`${name}:`);
    history.forEach((a, i) => print(requestLine(c, a, history[0]!, history[i - 1])));
    print(outcomeLine(s, subs));
  }
  return final;
}

function printSignatures(print: Print, customers: Customer[]): void {
  const all = customers.flatMap((c) => c.server.seen);
  const ids = [...new Set(all.map((r) => r.webhookId))];
  const bad = all.filter((r) => !r.signatureOk).length;
  print(`All ${all.length} requests carried webhook-id ${ids.join(", ")} (the same on every attempt) and ${bad ? `${bad} had a BAD SIGNATURE` : "a signature each receiver verified"}.`);
}

/** Waits (briefly) for the subscriptions' status rollup, so a kept cluster shows the outcome. */
async function endpoints(client: KubeClient, customers: Customer[]): Promise<Map<string, SubscriptionStatus>> {
  const out = new Map<string, SubscriptionStatus>();
  const deadline = Date.now() + 5_000;
  for (;;) {
    for (const c of customers) out.set(c.name, await getSubscription(client, c.name));
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

/** Initech is back: one replay of its dead letter, through the annotation any user would set. */
async function replayBack(client: KubeClient, c: Customer, name: string, print: Print, signal: AbortSignal): Promise<DeliveryStatus> {
  print("");
  print(`${c.name[0]!.toUpperCase()}${c.name.slice(1)} is back (it answers 200 now). Replay its dead letter, as you would:`);
  print(`  $ kubectl annotate whdel -n ${NAMESPACE} ${name} ${ANNOTATIONS.replay}="${REPLAY_REASON}"`);
  await client.request({ method: "PATCH", path: objectPath(DELIVERIES, NAMESPACE, name), contentType: "application/merge-patch+json", body: { metadata: { annotations: { [ANNOTATIONS.replay]: REPLAY_REASON } } } });
  const s = await until(`the replay of ${name}`, async () => {
    const d = await getDelivery(client, name);
    return d.metadata.annotations?.[ANNOTATIONS.replay] === undefined && d.status?.lastReplay?.reason === REPLAY_REASON ? d.status : undefined;
  }, signal);
  const history = s.history ?? [];
  const replayed = history.filter((a) => a.replay);
  for (const a of replayed) print(requestLine(c, a, history[0]!, undefined));
  print(s.phase === "Succeeded" ? `  => Succeeded by the replay (${ANNOTATIONS.replay} removed; status.lastReplay records it)` : `  => ${s.phase ?? "?"}: the replay failed (${s.lastReplay?.result ?? "?"})`);
  return s;
}

function printNextSteps(print: Print, opts: { keep: boolean; dir: string; keptDir: string; failed: Array<{ subscription: string; name: string }>; replayed: string }): void {
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
  print(`  kubectl describe whdel -n ${NAMESPACE} ${opts.replayed}      # six failures, then the replay`);
  for (const f of opts.failed) print(`  kubectl describe whdel -n ${NAMESPACE} ${f.name}`);
  print(`  hookline dev --dir ${dir}      # in another shell: the operator again, to act on replays`);
  for (const f of opts.failed) print(`  kubectl annotate whsub -n ${NAMESPACE} ${f.subscription} hookline.dev/replay-dead-letters="${f.subscription} takes webhooks again"`);
  print(`  hookline publish -n ${NAMESPACE} -t order.paid --id evt-1002 -d '{"order": 1002}'`);
  print(`  hookline cluster down --dir ${dir}`);
}

/** The demo, its arguments checked (src/cli/demo-command.ts): `keptDir` is where --keep leaves the control plane. */
export async function runDemo({ keep, keptDir }: { keep: boolean; keptDir: string }): Promise<number> {
  const print: Print = (line) => process.stdout.write(`${line}\n`);
  const note: Print = (line) => process.stderr.write(`[demo] ${line}\n`);
  if (keep && runningControlPlane(keptDir)) {
    process.stderr.write(`hookline demo: a control plane is already running in ${keptDir} (an earlier --keep); stop it first: hookline cluster down --dir ${keptDir}\n`);
    return 1;
  }
  const { binDir } = await ensureBinaries({ env: process.env, onProgress: (l) => !/binaries present/.test(l) && note(l) });
  const dir = keep ? keptDir : await mkdtemp(join(tmpdir(), "hookline-demo-"));
  // A kept directory of an earlier demo: start from an empty etcd, not the earlier events.
  if (keep && readState(dir) && existsSync(join(dir, "etcd"))) rmSync(join(dir, "etcd"), { recursive: true, force: true });

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
    client = await KubeClient.create((await loadKubeconfig({ file: info.kubeconfig, env: process.env })).credentials);
    note(`kube-apiserver ${info.version} at ${info.server}, CRDs installed, in ${((Date.now() - started) / 1000).toFixed(1)}s`);

    let initechBack = false;
    const acme = await receiver((n) => (n <= 2 ? 503 : 200));
    const globex = await receiver(() => 410);
    const initech = await receiver(() => (initechBack ? 200 : 500));
    servers.push(acme.server, globex.server, initech.server);
    const customer = (name: string, eventTypes: string[], story: string, server: DemoReceiver, path: string): Customer => ({ name, eventTypes, story, server, path, url: urlOf(server.server, path) });
    const customers = [
      customer("acme", ["order.*"], "answers 503, 503, then 200", acme, "/webhooks"),
      customer("globex", ["order.paid"], "answers 410 Gone: wants no more webhooks", globex, "/hooks/orders"),
      customer("initech", ["*"], "is down: answers 500 every time", initech, "/events"),
    ];
    const logFile = join(dir, "operator.log");
    op = await startOperator(info.kubeconfig, logFile);
    note(`operator running${keep ? ` (log: ${logFile})` : ""}`);

    print("");
    await subscribe(client, customers, print);
    print("");
    const data = { order: 1001, customer: "c_42", total: "42.00", currency: "EUR" };
    const published = Date.now();
    const result = await publish(client, { namespace: NAMESPACE, type: "order.paid", id: EVENT_ID, data });
    print(`Published order.paid ${EVENT_ID} ${JSON.stringify(data)}`);
    print(`  fan-out: ${result.deliveries.map((d) => `${d.name} (${d.result})`).join(", ")}`);
    print("");
    const final = await follow(client, customers, result, print, interrupted.signal);
    const elapsed = Date.now() - published;
    printSignatures(print, customers);
    printOutcome(print, customers, result, final, await endpoints(client, customers), elapsed);

    const initechDelivery = result.deliveries.find((d) => d.subscription === "initech")!.name;
    initechBack = true;
    const replayed = await replayBack(client, customers[2]!, initechDelivery, print, interrupted.signal);
    const failed = result.deliveries.filter((d) => d.subscription !== "initech" && final.get(d.subscription)?.phase !== "Succeeded");
    printNextSteps(print, { keep, dir, keptDir, failed, replayed: initechDelivery });
    return replayed.phase === "Succeeded" ? 0 : 1;
  } catch (err) {
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
