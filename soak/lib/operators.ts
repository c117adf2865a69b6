// The two operator replicas: real `node bin/hookline.js operator` processes with leader election
// on (bench/lib/procs.ts's OperatorProcess), a fresh POD_NAME per incarnation, short lease and
// drain timings so a failover fits in a few seconds, and RSS sampling for invariant 7.
import { join } from "node:path";
import { OperatorProcess, type Watchdog } from "../../bench/lib/procs.js";
import { procMemory } from "../../bench/lib/util.js";
import { freePorts } from "../../src/cluster/ports.js";
import type { KubeClient } from "../../src/kube/client.js";
import { objectPath, CORE } from "../../src/kube/types.js";

export const OPERATOR_ENV: Record<string, string> = {
  LEADER_ELECT: "true",
  LEADER_ELECTION_LEASE_DURATION_MS: "4000",
  LEADER_ELECTION_RENEW_DEADLINE_MS: "3000",
  LEADER_ELECTION_RETRY_PERIOD_MS: "500",
  WEBHOOK_DRAIN_TIMEOUT_MS: "3000",
  WEBHOOK_HEALTH_PROBE_INTERVAL_MS: "5000",
  WEBHOOK_CB_TIMEOUT_MS: "5000",
  LOG_LEVEL: process.env.SOAK_LOG_LEVEL ?? "info",
};

/** Invariant 7's budget: the chart's memory limit (charts/hookline/values.yaml). */
export const MEMORY_BUDGET_BYTES = 512 * 1024 * 1024;

interface Slot {
  label: string;
  incarnation: number;
  proc: OperatorProcess;
}

export class Operators {
  readonly slots: Slot[] = [];
  /** Peak RSS per incarnation name. */
  readonly peakRss = new Map<string, number>();
  starts = 0;

  constructor(
    private readonly kubeconfig: string,
    private readonly dir: string,
    private readonly watchdog: Watchdog,
    /** Added to OPERATOR_ENV (stream mode: HOOKLINE_NATS_URL). */
    private readonly extraEnv: Record<string, string> = {},
  ) {}

  private async spawn(label: string, incarnation: number): Promise<OperatorProcess> {
    const [metricsPort, healthPort] = await freePorts(2);
    const name = `soak-${label}-${incarnation}`;
    const proc = OperatorProcess.start({ name, kubeconfig: this.kubeconfig, logFile: join(this.dir, `${name}.log`), metricsPort: metricsPort!, healthPort: healthPort!, env: { ...OPERATOR_ENV, ...this.extraEnv } });
    this.watchdog.add(proc.pid);
    this.starts++;
    return proc;
  }

  async start(): Promise<void> {
    for (const label of ["a", "b"]) this.slots.push({ label, incarnation: 1, proc: await this.spawn(label, 1) });
  }

  async restart(slot: Slot): Promise<void> {
    this.watchdog.remove(slot.proc.pid);
    slot.incarnation++;
    slot.proc = await this.spawn(slot.label, slot.incarnation);
  }

  /** The slot whose live process holds the Lease, if any. */
  async leader(client: KubeClient): Promise<Slot | undefined> {
    const lease = await client
      .request<{ spec?: { holderIdentity?: string } }>({ method: "GET", path: objectPath(CORE.leases, "default", "hookline-leader"), timeoutMs: 5_000 })
      .catch(() => undefined);
    const holder = lease?.spec?.holderIdentity;
    return this.slots.find((s) => s.proc.opts.name === holder && !s.proc.exited);
  }

  async waitForLeader(client: KubeClient, timeoutMs: number): Promise<Slot | undefined> {
    for (const until = Date.now() + timeoutMs; Date.now() < until; await new Promise((r) => setTimeout(r, 250))) {
      const l = await this.leader(client);
      if (l) return l;
    }
    return undefined;
  }

  sampleMemory(): Array<{ name: string; rss: number }> {
    const out: Array<{ name: string; rss: number }> = [];
    for (const s of this.slots) {
      if (s.proc.exited) continue;
      const rss = procMemory(s.proc.pid)?.rss ?? 0;
      const name = s.proc.opts.name;
      if (rss > (this.peakRss.get(name) ?? 0)) this.peakRss.set(name, rss);
      out.push({ name, rss });
    }
    return out;
  }

  async stopAll(): Promise<void> {
    await Promise.all(
      this.slots.map(async (s) => {
        await s.proc.stop(8_000).catch(() => undefined);
        this.watchdog.remove(s.proc.pid);
      }),
    );
  }
}
