// Runs the real operator in the test process against the shared control plane, watching only
// the test's namespaces, with its own metrics registry and a captured log.
import { Writable } from "node:stream";
import { inject } from "vitest";
import { Operator } from "../../src/cli/operator.js";
import { loadConfig } from "../../src/config/config.js";
import { LineSplitter } from "../../src/kube/lines.js";
import { createLogger } from "../../src/observability/logger.js";
import { Metrics } from "../../src/observability/metrics.js";

export interface TestOperator {
  op: Operator;
  /** Every log line so far (JSON). */
  logs: string[];
  stop(): Promise<void>;
  /** Kubernetes API requests by verb so far, optionally for one resource (e.g. "webhookdeliveries/status"). */
  apiRequests(resource?: string): Promise<Record<string, number>>;
  metric(name: string, labels?: Record<string, string>): Promise<number>;
}

export const LOOPBACK = "127.0.0.0/8,::1/128";

export async function startOperator(opts: { namespaces: string[]; env?: Record<string, string>; statusIntervalMs?: number; kubeconfig?: string }): Promise<TestOperator> {
  const config = loadConfig({
    WATCH_NAMESPACES: opts.namespaces.join(","),
    WEBHOOK_ALLOWED_NETWORKS: LOOPBACK,
    METRICS_PORT: "0",
    HEALTH_PORT: "0",
    LEADER_ELECT: "false",
    LOG_LEVEL: "debug",
    ...opts.env,
  });
  const logs: string[] = [];
  // A write can end inside a line (and inside a multi-byte character): lines are split as bytes.
  const lines = new LineSplitter();
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of lines.push(chunk)) logs.push(line.toString("utf8"));
      cb();
    },
  });
  const log = createLogger({ level: config.logLevel, destination: sink });
  const metrics = new Metrics({ defaultMetrics: false });
  const op = new Operator({ config, kubeconfig: opts.kubeconfig ?? inject("kubeconfig"), log, metrics, ...(opts.statusIntervalMs ? { statusIntervalMs: opts.statusIntervalMs } : {}) });
  await op.start();
  return {
    op,
    logs,
    stop: () => op.stop(),
    apiRequests: (resource) => metrics.apiRequestCounts(resource ? (l) => l.resource === resource : undefined),
    metric: async (name, labels = {}) => {
      const m = metrics.registry.getSingleMetric(name);
      if (!m) throw new Error(`no metric ${name}`);
      const values = (await m.get()).values.filter((v) => Object.entries(labels).every(([k, val]) => (v.labels as Record<string, unknown>)[k] === val));
      return values.reduce((s, v) => s + v.value, 0);
    },
  };
}

/**
 * An in-process operator that campaigns for a Lease in `namespace` with short timings (4 s lease,
 * 3 s renew deadline): tests of leadership changes start two and hand the Lease between them.
 */
export function startCandidate(namespace: string, name: string, o: { leaseName: string; retryPeriodMs?: number; statusIntervalMs?: number }): Promise<TestOperator> {
  return startOperator({
    namespaces: [namespace],
    env: {
      LEADER_ELECT: "true",
      POD_NAME: name,
      LEADER_ELECTION_NAMESPACE: namespace,
      LEADER_ELECTION_LEASE_NAME: o.leaseName,
      LEADER_ELECTION_LEASE_DURATION_MS: "4000",
      LEADER_ELECTION_RENEW_DEADLINE_MS: "3000",
      LEADER_ELECTION_RETRY_PERIOD_MS: String(o.retryPeriodMs ?? 500),
    },
    statusIntervalMs: o.statusIntervalMs ?? 200,
  });
}
