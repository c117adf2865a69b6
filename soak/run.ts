// `npm run soak`: a seeded fault-injection soak (issue 13). Its own control plane, two operator
// replicas with leader election, two scripted receivers, all real processes; a seeded workload and
// fault schedule; eight invariants checked over the whole history. Exit 1 on any violation.
//   npm run soak -- [--seed N] [--duration 30m] [--quick] [--no-faults] [--keep] [--mode stream [--nats-nodes 3]]
// --mode stream soaks stream mode instead (soak/stream.ts): events through JetStream, nats-server
// and operator crashes, its own invariants; --nats-nodes 3 on a three-node JetStream cluster
// with its node faults (soak/lib/nats-faults.ts).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { Watchdog } from "../bench/lib/procs.js";
import { DELIVERIES, SUBSCRIPTIONS } from "../bench/lib/kube.js";
import { samples, sleep } from "../bench/lib/util.js";
import { ensureBinaries } from "../src/cluster/build.js";
import { startControlPlane, stopControlPlane } from "../src/cluster/control-plane.js";
import { installCrds } from "../src/cli/crds.js";
import { KubeClient } from "../src/kube/client.js";
import { collectionPath, type KubeObject } from "../src/kube/types.js";
import { parseArgs } from "./lib/args.js";
import { nextBehaviour } from "./lib/behaviour.js";
import { stopProcess } from "./lib/cluster.js";
import { schedule, type PlannedFault } from "./lib/faults.js";
import { History, isTerminal, type Fault } from "./lib/history.js";
import { leaderTerms, leaseLosses, overlappingTerms, readLeadership } from "./lib/leases.js";
import { checkAtEnd, metricsDisagreements, OverdueChecker, rollupLossWindows, type Disagreement } from "./lib/invariants.js";
import { MEMORY_BUDGET_BYTES, OPERATOR_ENV, Operators } from "./lib/operators.js";
import { ReceiverProcess } from "./lib/receivers.js";
import { render } from "./lib/report.js";
import { Rng } from "./lib/rng.js";
import { applySubscription, ensureNamespace, planSubscription, Workload, type SubPlan } from "./lib/workload.js";
import { NOISY_NS, NoisyTenant } from "./lib/noisy-tenant.js";
import { Watcher } from "./lib/watch.js";
import { streamSoak } from "./stream.js";

const args = parseArgs(process.argv.slice(2));
const started = Date.now();
const say = (line: string): void => console.log(`[soak ${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s] ${line}`);
const cleanups: Array<{ what: string; run: () => unknown }> = [];
let cleaning: Promise<void> | undefined;

function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    for (const c of cleanups.reverse()) {
      try {
        await c.run();
      } catch (err) {
        console.error(`cleanup of ${c.what} failed: ${(err as Error).message}`);
      }
    }
  })();
  return cleaning;
}

for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.once(sig, () => {
    say(`${sig}: stopping every child process`);
    void cleanup().finally(() => process.exit(130));
  });
}

const replayCommand = `npm run soak -- --seed ${args.seed}${args.quick ? " --quick" : ` --duration ${Math.round(args.durationMs / 1000)}s`}${args.faults ? "" : " --no-faults"}${args.mode === "stream" ? " --mode stream" : ""}${args.natsNodes > 1 ? ` --nats-nodes ${args.natsNodes}` : ""}`;

async function adminClient(kubeconfig: string): Promise<KubeClient> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  return KubeClient.create(kc, { connections: 16, userAgent: "hookline-soak" });
}

async function apiReady(client: KubeClient, timeoutMs: number): Promise<boolean> {
  for (const until = Date.now() + timeoutMs; Date.now() < until; await sleep(200)) {
    // /version answers JSON (/readyz answers "ok", which the JSON client cannot parse).
    const ok = await client.request({ method: "GET", path: "/version", timeoutMs: 2_000 }).then(
      () => true,
      () => false,
    );
    if (ok) return true;
  }
  return false;
}

async function main(): Promise<number> {
  say(`seed ${args.seed}${args.seedGiven ? "" : " (random)"}; ${args.mode === "stream" ? `stream mode${args.natsNodes > 1 ? ` on ${args.natsNodes} nats-server nodes` : ""}, ` : ""}${args.quick ? "quick" : "full"} run, ${Math.round(args.durationMs / 1000)} s of workload${args.faults ? " with faults" : ", no faults"}`);
  const rng = new Rng(args.seed);
  const tmp = await mkdtemp(join(tmpdir(), "hookline-soak-"));
  let keep = args.keep;
  cleanups.push({ what: "temp dir", run: async () => (keep ? say(`kept ${tmp}`) : rm(tmp, { recursive: true, force: true })) });
  const watchdog = new Watchdog(join(tmp, "children.json"));
  cleanups.push({ what: "watchdog", run: () => watchdog.stop() });

  const { binDir } = await ensureBinaries({ env: process.env, onProgress: (l) => (/binaries present/.test(l) ? undefined : say(l)) });
  const cpDir = join(tmp, "cluster");
  cleanups.push({ what: "control plane", run: () => stopControlPlane(cpDir) });
  const cp = await startControlPlane({
    dir: cpDir,
    binDir,
    attachToParent: true,
    env: process.env,
    beforeControllerManager: async (info) => {
      const c = await adminClient(info.kubeconfig);
      try {
        await installCrds(c);
      } finally {
        await c.destroy();
      }
    },
  });
  say(`control plane ${cp.version} at ${cp.server}`);
  const client = await adminClient(cp.kubeconfig);
  cleanups.push({ what: "admin client", run: () => client.destroy() });

  if (args.mode === "stream") {
    const code = await streamSoak({
      seed: args.seed,
      quick: args.quick,
      faults: args.faults,
      durationMs: args.durationMs,
      natsNodes: args.natsNodes,
      rng,
      tmp,
      kubeconfig: cp.kubeconfig,
      client,
      watchdog,
      say,
      onCleanup: (what, run) => cleanups.push({ what, run }),
      replay: replayCommand,
    });
    if (code !== 0) keep = true;
    return code;
  }

  // Receivers.
  const receivers = [0, 1].map((i) => new ReceiverProcess(`r${i}`, join(tmp, `receiver-${i}.jsonl`), (pid, alive) => (alive ? watchdog.add(pid) : watchdog.remove(pid))));
  for (const r of receivers) await r.start();
  cleanups.push({ what: "receivers", run: () => Promise.all(receivers.map((r) => r.stop())) });
  const url = (i: number, path: string): string => receivers[i]!.url(path);

  // History first, so it sees every object from its creation.
  const history = new History();
  history.onViolation = (v) => say(`VIOLATION [${v.invariant}] ${v.key}: ${v.message}`);
  // The noisy tenant (the tenant mix, lib/noisy-tenant.ts) is not one the invariants are about.
  const ours = (o: { metadata: { namespace?: string } }) => o.metadata.namespace !== NOISY_NS;
  history.ignoreEndpoints = (endpoint) => endpoint.startsWith(`${NOISY_NS}.`);
  const watchers = [new Watcher(client, SUBSCRIPTIONS, (t, o) => ours(o) && history.onSubscription(t, o)), new Watcher(client, DELIVERIES, (t, o) => ours(o) && history.onDelivery(t, o))];
  await Promise.all(watchers.map((w) => w.start()));
  cleanups.push({ what: "watches", run: () => Promise.all(watchers.map((w) => w.stop())) });

  // Subscriptions.
  const wrng = rng.fork("workload");
  const namespaces = ["soak-a", "soak-b"];
  for (const ns of namespaces) await ensureNamespace(client, ns);
  const subCount = args.quick ? wrng.int(6, 10) : wrng.int(10, 16);
  const plans: SubPlan[] = [];
  for (let i = 0; i < subCount; i++) plans.push(planSubscription(wrng, namespaces[i % 2]!, `sub-${i}`, receivers.length, url));
  for (const p of plans) await applySubscription(client, p);
  const noisy = new NoisyTenant(client, receivers[0]!);
  await noisy.setup();
  say(`${plans.length} subscriptions (${plans.filter((p) => p.spec.paused).length} paused, ${plans.filter((p) => p.scheme === "HMACSHA256Hex").length} HMACSHA256Hex, ${plans.filter((p) => p.secret.usesPrevious).length} with previousKey)`);

  // Operators.
  const operators = new Operators(cp.kubeconfig, tmp, watchdog);
  cleanups.push({ what: "operators", run: () => operators.stopAll() });
  await operators.start();
  const leader = await operators.waitForLeader(client, 60_000);
  if (!leader) throw new Error("no operator became leader within 60 s (logs in the temp dir)");
  say(`operators started; leader ${leader.proc.opts.name}`);

  const workload = new Workload(client, wrng, plans, history, args.quick, url, say);
  const overdue = new OverdueChecker(history);
  const tail = (): void => receivers.forEach((r) => history.tailReceiverLog(r.name, r.logFile));
  const budgetFlagged = new Set<string>();
  const monitor = setInterval(() => {
    tail();
    overdue.check(Date.now());
    for (const m of operators.sampleMemory()) {
      if (m.rss > MEMORY_BUDGET_BYTES && !budgetFlagged.has(m.name)) {
        budgetFlagged.add(m.name);
        history.violate(7, m.name, `RSS ${(m.rss / 2 ** 20).toFixed(0)} MiB above the budget of ${MEMORY_BUDGET_BYTES / 2 ** 20} MiB`);
      }
    }
  }, 2_000);
  cleanups.push({ what: "monitor", run: () => clearInterval(monitor) });

  // The workload, behaviour and fault loops run side by side until the deadline.
  const brng = rng.fork("behaviour");
  const frng = rng.fork("faults");
  const planned = args.faults ? schedule(frng, args.durationMs, args.quick) : [];
  say(`fault schedule: ${planned.map((f) => `${f.kind}@${(f.at / 1000).toFixed(0)}s`).join(", ") || "none"}`);
  const t0 = Date.now();
  const deadline = t0 + args.durationMs;
  const endpoints = plans.map((p) => `${p.ns}.${p.name}`);
  const stepMs = args.quick ? 220 : 400;

  const workloadLoop = (async () => {
    for (let next = Date.now(); Date.now() < deadline; next += stepMs) {
      await workload.step();
      await sleep(Math.max(0, next + stepMs - Date.now()));
    }
  })();
  const behaviourLoop = (async () => {
    while (Date.now() < deadline) {
      const ep = brng.pick(endpoints);
      const b = nextBehaviour(brng);
      for (const r of receivers) await r.set(ep, b);
      await sleep(brng.int(1_000, 4_000));
    }
  })();
  const faultLoop = (async () => {
    for (const f of planned) {
      const wait = t0 + f.at - Date.now();
      if (wait > 0) await sleep(wait);
      if (Date.now() > deadline) break;
      await inject(f, { history, operators, receivers, client, cpDir, say, noisy, actionsPerSecond: 1000 / stepMs });
    }
  })();
  await Promise.all([workloadLoop, behaviourLoop, faultLoop]);

  // Settle: no more faults, every endpoint healthy, every subscription unpaused.
  say(`settle: receivers answer 200, subscriptions unpaused; waiting for every delivery to finish`);
  for (const r of receivers) await r.setAll({ kind: "ok", status: 200 });
  for (const ep of endpoints) for (const r of receivers) await r.set(ep, { kind: "ok", status: 200 });
  await workload.unpauseAll();
  const settleUntil = Date.now() + (args.quick ? 60_000 : 180_000);
  let pending = Infinity;
  while (Date.now() < settleUntil) {
    pending = [...history.deliveries.values()].filter((d) => !isTerminal(d.states.at(-1)?.phase) && !d.states.at(-1)?.deleted).length;
    if (pending === 0) break;
    await sleep(1_000);
  }
  say(`settled: ${pending === Infinity ? "?" : pending} deliveries still pending`);
  await sleep(2_000);
  tail();
  overdue.check(Date.now());
  clearInterval(monitor);

  // Failovers the faults did not cause (a Lease not renewed in time on a loaded machine).
  const leadership = readLeadership(tmp);
  const losses = leaseLosses(leadership);
  history.faults.push(...losses);
  if (losses.length) say(`${losses.length} leadership loss(es) the faults did not cause (Lease not renewed in time): counted as failovers`);
  // Invariant 8: one leader at a time, from the operators' own logs.
  for (const { term, during } of overlappingTerms(leaderTerms(leadership, Number(OPERATOR_ENV.LEADER_ELECTION_RENEW_DEADLINE_MS)))) {
    const at = (t: number) => new Date(t).toISOString();
    history.violate(8, term.who, `became leader at ${at(term.from)} while ${during.who} led (from ${at(during.from)} to ${at(during.to)}, ${during.end})`);
  }
  checkAtEnd(history, { plans: new Map(plans.map((p) => [`${p.ns}/${p.name}`, p])) });
  const leaderCrashes = rollupLossWindows(history.faults);
  const disagreements = await metricsCheck(client, operators, leaderCrashes);
  for (const d of disagreements) history.violate(7, d.key, d.message);

  const phases: Record<string, number> = {};
  for (const d of history.deliveries.values()) {
    const p = d.states.at(-1)?.phase ?? "none";
    phases[p] = (phases[p] ?? 0) + 1;
  }
  const faultCounts: Record<string, number> = {};
  for (const f of history.faults) faultCounts[f.kind] = (faultCounts[f.kind] ?? 0) + 1;
  if (history.violations.length > 0) keep = true;
  console.log(
    render(history, {
      seed: args.seed,
      replay: replayCommand,
      elapsedS: (Date.now() - started) / 1000,
      workload: { ...workload.counts, operatorStarts: operators.starts, watchReconnects: watchers.reduce((s, w) => s + w.reconnects, 0) },
      faults: faultCounts,
      requests: history.requests.size,
      phases,
      peakRssMiB: Math.max(0, ...operators.peakRss.values()) / 2 ** 20,
      tmp,
    }),
  );
  return history.violations.length > 0 ? 1 : 0;
}

/** Invariant 7's second half, retried for 30 s so metrics and status may catch up. */
async function metricsCheck(client: KubeClient, operators: Operators, leaderCrashes: Array<[number, number]>): Promise<Disagreement[]> {
  let last: Disagreement[] = [];
  for (const until = Date.now() + 30_000; Date.now() < until; await sleep(2_000)) {
    const leader = await operators.leader(client);
    if (!leader) continue;
    try {
      const text = await leader.proc.metrics();
      const subs = await client.request<{ items: KubeObject<any, any>[] }>({ method: "GET", path: collectionPath(SUBSCRIPTIONS) });
      const dels = await client.request<{ items: KubeObject<any, any>[] }>({ method: "GET", path: collectionPath(DELIVERIES) });
      last = metricsDisagreements(subs.items, dels.items, (name) => samples(text, name), leaderCrashes);
      if (last.length === 0) return [];
    } catch (err) {
      last = [{ key: "metrics", message: `cannot compare metrics: ${(err as Error).message}` }];
    }
  }
  return last;
}

interface FaultEnv {
  history: History;
  operators: Operators;
  receivers: ReceiverProcess[];
  client: KubeClient;
  cpDir: string;
  say: (line: string) => void;
  noisy: NoisyTenant;
  /** The workload's rate: the noisy tenant floods at ten times it. */
  actionsPerSecond: number;
}

async function inject(f: PlannedFault, env: FaultEnv): Promise<void> {
  const { operators, client } = env;
  if (f.kind === "noisy-tenant") {
    // Not a fault window: no invariant of the other tenants is relaxed while it floods.
    const rate = Math.round(env.actionsPerSecond * 10);
    env.say(`tenant mix: ${NOISY_NS} floods at ${rate} deliveries/s for 12 s`);
    const before = { created: env.noisy.created, refused: env.noisy.refused };
    await env.noisy.flood(12_000, rate);
    env.say(`tenant mix over: ${NOISY_NS} created ${env.noisy.created - before.created} deliveries (${env.noisy.refused - before.refused} refused by the API server)`);
    return;
  }
  const record: Fault = { kind: f.kind, target: "", start: Date.now() };
  const begin = (target: string): void => {
    record.target = target;
    record.start = Date.now();
    env.history.faults.push(record);
    env.say(`fault: ${f.kind} ${target}`);
  };
  try {
    switch (f.kind) {
      case "leader-sigkill":
      case "leader-sigterm":
      case "standby-sigkill": {
        const leader = await operators.waitForLeader(client, 30_000);
        const slot = f.kind === "standby-sigkill" ? operators.slots.find((s) => s !== leader) : leader;
        if (!slot) return env.say(`fault ${f.kind} skipped: no ${f.kind === "standby-sigkill" ? "standby" : "leader"}`);
        begin(slot.proc.opts.name);
        if (f.kind === "leader-sigterm") await slot.proc.stop(15_000);
        else {
          slot.proc.child.kill("SIGKILL");
          await slot.proc.stop(5_000);
        }
        await sleep(Math.min(f.downMs, 4_000));
        await operators.restart(slot);
        await operators.waitForLeader(client, 60_000);
        break;
      }
      case "leader-sigstop": {
        // Frozen past the Lease (4 s): a standby takes over; then the old leader runs again.
        const leader = await operators.waitForLeader(client, 30_000);
        if (!leader) return env.say(`fault ${f.kind} skipped: no leader`);
        begin(leader.proc.opts.name);
        leader.proc.child.kill("SIGSTOP");
        await sleep(4_000 + f.downMs);
        leader.proc.child.kill("SIGCONT");
        await operators.waitForLeader(client, 60_000);
        break;
      }
      case "receiver-restart":
        begin(env.receivers[f.receiver]!.name);
        await env.receivers[f.receiver]!.restart(Math.min(f.downMs, 4_000) - 2_000);
        break;
      case "apiserver-restart":
      case "etcd-restart": {
        const name = f.kind === "apiserver-restart" ? "kube-apiserver" : "etcd";
        begin(name);
        const restart = await stopProcess(env.cpDir, name);
        await sleep(f.downMs);
        await restart();
        if (!(await apiReady(client, 60_000))) env.say(`the API server is not ready 60 s after the ${name} restart`);
        break;
      }
      case "lease-lost":
        return; // observed, never injected (leases.ts)
    }
  } finally {
    record.end = Date.now();
    if (record.target) env.say(`fault over: ${f.kind} (${((record.end - record.start) / 1000).toFixed(1)} s)`);
  }
}

main()
  .then(async (code) => {
    await cleanup();
    process.exit(code);
  })
  .catch(async (err: unknown) => {
    console.error(`soak failed (harness error, not an invariant): ${(err as Error).stack ?? String(err)}`);
    await cleanup();
    process.exit(2);
  });
