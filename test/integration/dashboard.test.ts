// The Grafana dashboard and the alerts against real Prometheus tools (built from the Go module
// proxy by hack/build-prometheus.sh in the global setup):
// - every PromQL expression of the rendered PrometheusRule passes `promtool check rules`, and so
//   does every dashboard panel query (wrapped as recording rules, Grafana's variables filled in);
// - a real Prometheus scrapes a running in-process operator (op.metricsPort) through a short
//   scenario (successes, failures, a breaker opening, a dead letter, a replay, a standby's
//   drain): every panel query and every template variable query returns data, and the breaker
//   alert (rendered from the chart with `for: 5s`) fires.
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { stringify } from "yaml";
import { Operator } from "../../src/cli/operator.js";
import { loadConfig } from "../../src/config/config.js";
import { createLogger } from "../../src/observability/logger.js";
import { Metrics } from "../../src/observability/metrics.js";
import { createNamespace, deleteNamespace, kubectlOk, waitFor } from "../helpers/cluster.js";
import { CHART, find, render } from "../helpers/helm.js";
import { apply, delivery, getObj, subscription } from "../helpers/kube.js";
import { LOOPBACK } from "../helpers/operator.js";
import { Prometheus, promtool } from "../helpers/prometheus.js";
import { Receiver } from "../helpers/receiver.js";

interface Target {
  refId: string;
  expr: string;
}
interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  targets?: Target[];
}
interface Dashboard {
  uid: string;
  title: string;
  panels: Panel[];
  templating: { list: Array<{ name: string; type: string; query: string | { query: string }; datasource?: { uid: string } }> };
}

const dashboard = JSON.parse(readFileSync(`${CHART}/dashboards/hookline.json`, "utf8")) as Dashboard;
const panels = dashboard.panels.filter((p) => p.type !== "row");
const JOB = "hl-hookline-metrics";

/** A panel query as Prometheus gets it from Grafana with every variable on "All". */
function fill(expr: string, rateInterval: string): string {
  return expr
    .replaceAll("$__rate_interval", rateInterval)
    .replaceAll("$__range", "1h")
    .replaceAll("$job", ".*")
    .replaceAll("$namespace", ".*")
    .replaceAll("$subscription", ".*");
}

/** Grafana's label_values(metric, label) as a PromQL query that returns the label's values. */
function variableQuery(q: string): { expr: string; label: string } {
  const m = /^label_values\((.+),\s*(\w+)\)$/.exec(q);
  if (!m) throw new Error(`not a label_values() query: ${q}`);
  return { expr: `group by (${m[2]}) (${fill(m[1]!, "1m")})`, label: m[2]! };
}

async function renderedRules(): Promise<{ groups: Array<{ name: string; rules: Array<{ alert: string; expr: string; for?: string }> }> }> {
  const { objects } = await render({ release: "hl", namespace: "hookline", valuesFiles: [`${CHART}/ci/monitoring-values.yaml`], showOnly: ["templates/prometheusrule.yaml"] });
  return find(objects, "PrometheusRule").spec;
}

describe("dashboard JSON", () => {
  it("has the panels the issue lists, each with a query on the datasource variable", () => {
    expect(dashboard.uid).toBe("hookline");
    const titles = panels.map((p) => p.title);
    for (const t of [
      /deliveries .*per second by outcome/i,
      /success ratio/i,
      /latency \(p50, p95, p99\)/i,
      /attempts .*by reason/i,
      /breaker state/i,
      /endpoint health/i,
      /dead letters held/i,
      /dead-letter operations/i,
      /in flight and queue depth/i,
      /leader/i,
      /drain/i,
    ]) {
      expect(titles.some((x) => t.test(x)), `a panel matching ${t}`).toBe(true);
    }
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const p of panels) {
      expect(p.datasource?.uid, p.title).toBe("${datasource}");
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets!) expect(t.expr, p.title).toMatch(/\w+\{/);
    }
    const latency = panels.find((p) => /latency/i.test(p.title))!;
    expect(latency.targets!.map((t) => /histogram_quantile\(([\d.]+),/.exec(t.expr)?.[1])).toEqual(["0.5", "0.95", "0.99"]);
  });

  it("has datasource, namespace and subscription variables; per-subscription panels use them", () => {
    const vars = Object.fromEntries(dashboard.templating.list.map((v) => [v.name, v]));
    expect(vars.datasource?.type).toBe("datasource");
    for (const name of ["namespace", "subscription", "job"]) {
      expect(vars[name]?.type, name).toBe("query");
      expect(vars[name]?.datasource?.uid).toBe("${datasource}");
    }
    for (const p of panels) {
      for (const t of p.targets!) {
        expect(t.expr, p.title).toContain('job=~"$job"');
        if (/webhook_(delivery|breaker|endpoint|dlq_entries|deliveries_finished)/.test(t.expr)) {
          expect(t.expr, p.title).toContain('namespace=~"$namespace"');
          expect(t.expr, p.title).toContain('subscription=~"$subscription"');
        }
      }
    }
  });
});

describe("PromQL passes promtool", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "hookline-promtool-"));
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("promtool check rules: the rendered PrometheusRule (default and test values)", async () => {
    for (const [name, valuesFiles] of [["default", []], ["monitoring", [`${CHART}/ci/monitoring-values.yaml`]]] as const) {
      const { objects } = await render({ release: "hl", namespace: "hookline", valuesFiles: [...valuesFiles], setJson: { "prometheusRule.enabled": true }, showOnly: ["templates/prometheusrule.yaml"] });
      const file = join(dir, `rules-${name}.yaml`);
      await writeFile(file, stringify(find(objects, "PrometheusRule").spec));
      const r = await promtool(["check", "rules", file]);
      expect(r.code, r.stdout + r.stderr).toBe(0);
      expect(r.stdout).toContain("SUCCESS: 12 rules found");
    }
  });

  it("promtool test rules: each alert fires when it should and not otherwise (default values)", async () => {
    const { objects } = await render({ release: "hl", namespace: "hookline", setJson: { "prometheusRule.enabled": true }, showOnly: ["templates/prometheusrule.yaml"] });
    const spec = find(objects, "PrometheusRule").spec as { groups: Array<{ rules: Array<Record<string, unknown>> }> };
    // Annotations are templates checked by the live test below; promtool would compare them verbatim.
    for (const g of spec.groups) for (const r of g.rules) delete r.annotations;
    await writeFile(join(dir, "alerts.yaml"), stringify(spec));
    const j = `job="${JOB}"`;
    const sub = (name: string, extra = "") => `{${j},namespace="shop",subscription="${name}"${extra}}`;
    const tests = {
      rule_files: ["alerts.yaml"],
      evaluation_interval: "1m",
      tests: [
        {
          interval: "1m",
          input_series: [
            // Open from 1m, a HalfOpen probe at 3m that fails (does not reset the 5m), closed at 9m.
            { series: `webhook_breaker_state${sub("acme")}`, values: "0 1 1 2 1 1 1 1 1 0 0" },
            // Opens and closes every other minute: never open for 5m in a row.
            { series: `webhook_breaker_state${sub("beta")}`, values: "0 1 0 1 0 1 0 1 0 1 0" },
            { series: `hookline_leader{${j},namespace="hookline",instance="a"}`, values: "1 1 0 0 0 0 0 0 0 0 0" },
            // One pod's last scrape saw its drain time out at 2m, then the pod was gone.
            { series: `webhook_drain_total{${j},namespace="hookline",instance="b",result="timeout"}`, values: "_ _ 1 stale" },
            // shop went over its fair share from 5m to 15m and lost dead letters; quiet never did
            // (its series born at 0); trimmed lost only Succeeded ones, which nobody replays.
            { series: `webhook_namespace_evictions_total{${j},namespace="shop",instance="a",phase="DeadLettered",limit="max_finished_deliveries"}`, values: "0x5 0+3x10 30x40" },
            { series: `webhook_namespace_evictions_total{${j},namespace="quiet",instance="a",phase="DeadLettered",limit="dlq_max_entries"}`, values: "0x60" },
            { series: `webhook_namespace_evictions_total{${j},namespace="trimmed",instance="a",phase="Succeeded",limit="max_finished_deliveries"}`, values: "0+5x60" },
            // Pod hl-0 read one renew's answer too late at 10m; hl-1 never did (its series born at 0).
            { series: `hookline_leader_late_lease_answers_total{${j},namespace="hookline",pod="hl-0",instance="a",write="renew"}`, values: "0x9 1x60" },
            { series: `hookline_leader_late_lease_answers_total{${j},namespace="hookline",pod="hl-0",instance="a",write="acquire"}`, values: "0x70" },
            { series: `hookline_leader_late_lease_answers_total{${j},namespace="hookline",pod="hl-1",instance="b",write="renew"}`, values: "0x70" },
          ],
          alert_rule_test: [
            { eval_time: "5m", alertname: "HooklineCircuitBreakerOpen", exp_alerts: [] },
            { eval_time: "7m", alertname: "HooklineCircuitBreakerOpen", exp_alerts: [{ exp_labels: { severity: "warning", namespace: "shop", subscription: "acme" } }] },
            { eval_time: "10m", alertname: "HooklineCircuitBreakerOpen", exp_alerts: [] },
            { eval_time: "5m", alertname: "HooklineNoLeader", exp_alerts: [] },
            { eval_time: "8m", alertname: "HooklineNoLeader", exp_alerts: [{ exp_labels: { severity: "critical" } }] },
            { eval_time: "1m", alertname: "HooklineDrainTimeout", exp_alerts: [] },
            { eval_time: "10m", alertname: "HooklineDrainTimeout", exp_alerts: [{ exp_labels: { severity: "warning", namespace: "hookline" } }] },
            { eval_time: "4m", alertname: "HooklineDeadLettersEvicted", exp_alerts: [] },
            { eval_time: "8m", alertname: "HooklineDeadLettersEvicted", exp_alerts: [{ exp_labels: { severity: "warning", namespace: "shop" } }] },
            // 30 minutes (the window) after the last eviction, it stops.
            { eval_time: "50m", alertname: "HooklineDeadLettersEvicted", exp_alerts: [] },
            { eval_time: "8m", alertname: "HooklineLeaseAnswersLate", exp_alerts: [] },
            { eval_time: "12m", alertname: "HooklineLeaseAnswersLate", exp_alerts: [{ exp_labels: { severity: "warning", namespace: "hookline", pod: "hl-0" } }] },
            // An hour (the window) after it, it stops.
            { eval_time: "72m", alertname: "HooklineLeaseAnswersLate", exp_alerts: [] },
          ],
        },
        {
          interval: "1m",
          input_series: [
            // acme never succeeds (ratio 0, not "no data"); beta succeeds 10 of 11 (above 0.9).
            { series: `webhook_delivery_attempts_total${sub("acme", ',status="failure",reason="http_5xx"')}`, values: "0+10x40" },
            { series: `webhook_delivery_attempts_total${sub("beta", ',status="success",reason="http_2xx"')}`, values: "0+10x40" },
            { series: `webhook_delivery_attempts_total${sub("beta", ',status="failure",reason="timeout"')}`, values: "0+1x40" },
            // acme's dead letters keep growing; beta's stay put.
            { series: `webhook_dlq_entries${sub("acme")}`, values: "0+1x40" },
            { series: `webhook_dlq_entries${sub("beta")}`, values: "3x40" },
            // No operator scraped at all: absent() makes HooklineNoLeader fire.
            // The leader reports 16,001 finished of a 20,000 budget (past 80%); the standby
            // exports the budget but no stored counts.
            { series: `webhook_deliveries_stored{${j},namespace="hookline",instance="a",phase="Succeeded"}`, values: "10000x40" },
            { series: `webhook_deliveries_stored{${j},namespace="hookline",instance="a",phase="DeadLettered"}`, values: "3000+200x40" },
            { series: `webhook_deliveries_stored{${j},namespace="hookline",instance="a",phase="Pending"}`, values: "90000x40" },
            { series: `webhook_finished_deliveries_budget{${j},namespace="hookline",instance="a"}`, values: "20000x40" },
            { series: `webhook_finished_deliveries_budget{${j},namespace="hookline",instance="b"}`, values: "20000x40" },
            // acme's oldest pending delivery was created at 0 and still waits; beta's is recent.
            { series: `webhook_subscription_oldest_pending_timestamp_seconds${sub("acme")}`, values: "0x40" },
            { series: `webhook_subscription_oldest_pending_timestamp_seconds${sub("beta")}`, values: "0+60x40" },
          ],
          alert_rule_test: [
            { eval_time: "20m", alertname: "HooklineLowSuccessRatio", exp_alerts: [{ exp_labels: { severity: "warning", namespace: "shop", subscription: "acme" } }] },
            { eval_time: "20m", alertname: "HooklineDeadLettersGrowing", exp_alerts: [{ exp_labels: { severity: "warning", namespace: "shop", subscription: "acme" } }] },
            { eval_time: "20m", alertname: "HooklineNoLeader", exp_alerts: [{ exp_labels: { severity: "critical", job: JOB } }] },
            // 13,000 + 200/min passes 16,000 at 15m; pending deliveries do not count; fires 15m later.
            { eval_time: "25m", alertname: "HooklineStorageBudgetNearlyFull", exp_alerts: [] },
            { eval_time: "32m", alertname: "HooklineStorageBudgetNearlyFull", exp_alerts: [{ exp_labels: { severity: "warning", job: JOB } }] },
            { eval_time: "10m", alertname: "HooklineBacklogAge", exp_alerts: [] },
            { eval_time: "25m", alertname: "HooklineBacklogAge", exp_alerts: [{ exp_labels: { severity: "warning", namespace: "shop", subscription: "acme" } }] },
          ],
        },
        {
          interval: "1m",
          input_series: [
            // Work pending throughout; attempts until 10m, then none.
            { series: `webhook_subscription_backlog${sub("acme")}`, values: "5x40" },
            { series: `webhook_delivery_attempts_total${sub("acme", ',status="failure",reason="http_5xx"')}`, values: "0+1x10 10x30" },
            { series: `hookline_leader{${j},namespace="hookline",instance="a"}`, values: "1x40" },
          ],
          alert_rule_test: [
            { eval_time: "12m", alertname: "HooklineOperatorStalled", exp_alerts: [] },
            { eval_time: "30m", alertname: "HooklineOperatorStalled", exp_alerts: [{ exp_labels: { severity: "critical" } }] },
          ],
        },
        {
          interval: "1m",
          input_series: [
            // Stream mode: flood's stream gains 100 events a minute against a quota of 1,000 (past
            // 80% from 9m); calm's holds 10 events and a few bytes. Every replica exports the quota.
            { series: `webhook_stream_namespace_usage{${j},namespace="flood",instance="a",quota="messages"}`, values: "0+100x40" },
            { series: `webhook_stream_namespace_usage{${j},namespace="calm",instance="a",quota="messages"}`, values: "10x40" },
            { series: `webhook_stream_namespace_usage{${j},namespace="calm",instance="a",quota="bytes"}`, values: "5000x40" },
            { series: `webhook_stream_namespace_quota{${j},namespace="hookline",instance="a",quota="messages"}`, values: "1000x40" },
            { series: `webhook_stream_namespace_quota{${j},namespace="hookline",instance="b",quota="messages"}`, values: "1000x40" },
            { series: `webhook_stream_namespace_quota{${j},namespace="hookline",instance="a",quota="bytes"}`, values: "1000000x40" },
            // flood's oldest event was stored at 0 and waits (age limit 20 min: half of it at 10m); calm's are recent.
            { series: `webhook_stream_oldest_message_timestamp_seconds{${j},namespace="flood",instance="a"}`, values: "0x40" },
            { series: `webhook_stream_oldest_message_timestamp_seconds{${j},namespace="calm",instance="a"}`, values: "0+60x40" },
            { series: `webhook_stream_max_age_seconds{${j},namespace="hookline",instance="a"}`, values: "1200x40" },
            { series: `webhook_stream_max_age_seconds{${j},namespace="hookline",instance="b"}`, values: "1200x40" },
          ],
          alert_rule_test: [
            { eval_time: "12m", alertname: "HooklineStreamQuotaNearlyFull", exp_alerts: [] },
            { eval_time: "25m", alertname: "HooklineStreamQuotaNearlyFull", exp_alerts: [{ exp_labels: { severity: "warning", namespace: "flood", quota: "messages" } }] },
            { eval_time: "15m", alertname: "HooklineStreamEventsAging", exp_alerts: [] },
            { eval_time: "25m", alertname: "HooklineStreamEventsAging", exp_alerts: [{ exp_labels: { severity: "warning", namespace: "flood" } }] },
          ],
        },
      ],
    };
    await writeFile(join(dir, "alerts.test.yaml"), stringify(tests));
    const r = await promtool(["test", "rules", join(dir, "alerts.test.yaml")]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain("SUCCESS");
  });

  it("promtool check rules: every dashboard query, as a recording rule", async () => {
    const rules = panels.flatMap((p) => p.targets!.map((t) => ({ record: `hookline:dashboard:panel_${p.id}_${t.refId}`, expr: fill(t.expr, "1m") })));
    const file = join(dir, "dashboard-rules.yaml");
    await writeFile(file, stringify({ groups: [{ name: "dashboard", rules }] }));
    const r = await promtool(["check", "rules", file]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain(`SUCCESS: ${rules.length} rules found`);
  });
});

describe("dashboard and alerts against a real Prometheus scraping the operator", () => {
  let ns: string;
  let prom: Prometheus;
  let op: Operator;
  let standby: Operator | undefined;
  const receivers: Receiver[] = [];
  const logs: string[] = [];

  function operator(name: string, metrics: Metrics): Operator {
    const sink = new Writable({
      write(chunk: Buffer, _e, cb) {
        logs.push(chunk.toString("utf8"));
        if (logs.length > 2000) logs.shift();
        cb();
      },
    });
    const config = loadConfig({
      WATCH_NAMESPACES: ns,
      WEBHOOK_ALLOWED_NETWORKS: LOOPBACK,
      METRICS_PORT: "0",
      HEALTH_PORT: "0",
      LEADER_ELECT: "true",
      LEADER_ELECTION_LEASE_NAME: "hookline-dashboard",
      LEADER_ELECTION_NAMESPACE: ns,
      POD_NAME: name,
      LOG_LEVEL: "info",
    });
    return new Operator({ config, kubeconfig: inject("kubeconfig"), log: createLogger({ level: "info", destination: sink }), metrics, statusIntervalMs: 200 });
  }

  beforeAll(async () => {
    ns = await createNamespace("dashboard");
    // One registry for the leader and a standby (as if both fed the same job), so the standby's
    // drain at shutdown is still scraped from the running leader: a real pod's last counters
    // vanish with it (see the drain panel's description).
    const metrics = new Metrics();
    op = operator("dash-leader", metrics);
    await op.start();
    await waitFor(() => op.isLeader, { description: "leader" });
    standby = operator("dash-standby", metrics);
    await standby.start();
    prom = await Prometheus.start({
      targets: [`127.0.0.1:${op.metricsPort}`],
      // What a ServiceMonitor with honorLabels gives: job = the metrics Service, namespace = the
      // operator's (kept only where the series has no namespace of its own).
      labels: { job: JOB, namespace: "hookline-system" },
      honorLabels: true,
      rules: [stringify(await renderedRules())],
    });
    await waitFor(() => prom.targetsUp(), { description: "the operator's /metrics scraped" });
  });

  afterAll(async () => {
    await prom?.stop();
    await standby?.stop();
    await op?.stop();
    await Promise.all(receivers.map((r) => r.close()));
    if (ns) await deleteNamespace(ns);
  });

  it("every panel and variable query returns data after a short scenario, and the breaker alert fires", async () => {
    const ok = await Receiver.start(() => 200);
    const down = await Receiver.start(() => 503);
    const gone = await Receiver.start(() => 410);
    let fixed = false;
    const fixable = await Receiver.start(() => (fixed ? 200 : 500));
    receivers.push(ok, down, gone, fixable);
    const retry = { initialBackoff: "50ms", multiplier: 2, maxBackoff: "1s", jitterPercent: 0 };
    await apply([
      subscription(ns, "ok", { url: ok.url(), retry: { ...retry, maxAttempts: 3 } }),
      subscription(ns, "down", { url: down.url(), retry: { ...retry, maxAttempts: 10 }, circuitBreaker: { failureThreshold: 2, cooldown: "300s", whenOpen: "Defer" } }),
      subscription(ns, "gone", { url: gone.url(), retry: { ...retry, maxAttempts: 3 } }),
      // Keeps failing once a second through the test (no breaker): a failure rate Prometheus
      // sees grow. (A series born at its final value, like down's two failures before its
      // breaker opened, has no rate: Prometheus never saw it at 0.)
      subscription(ns, "failing", { url: down.url(), retry: { initialBackoff: "1s", multiplier: 1, maxBackoff: "1s", jitterPercent: 0, maxAttempts: 50 }, circuitBreaker: { failureThreshold: 100 } }),
      subscription(ns, "fixable", { url: fixable.url(), retry: { ...retry, maxAttempts: 1 }, circuitBreaker: { failureThreshold: 100 } }),
      ...[1, 2, 3, 4, 5].map((i) => delivery(ns, `ok-${i}`, "ok")),
      ...[1, 2, 3].map((i) => delivery(ns, `down-${i}`, "down")),
      delivery(ns, "gone-1", "gone"),
      delivery(ns, "failing-1", "failing"),
      delivery(ns, "fixable-1", "fixable"),
    ]);
    const phase = (name: string, want: string) =>
      waitFor(async () => (await getObj("whdel", ns, name))?.status?.phase === want, { description: `${name} ${want}`, timeoutMs: 30_000 });
    for (let i = 1; i <= 5; i++) await phase(`ok-${i}`, "Succeeded");
    await waitFor(async () => (await getObj("whsub", ns, "down"))?.status?.breaker?.state === "Open", { description: "down's breaker Open" });
    await phase("gone-1", "DeadLettered");
    await phase("fixable-1", "DeadLettered");
    fixed = true;
    await kubectlOk(["annotate", "whdel", "fixable-1", "-n", ns, "hookline.dev/replay=endpoint fixed, INC-42"]);
    await phase("fixable-1", "Succeeded");
    // The standby shuts down (it had nothing in flight): a drain, result "drained".
    await standby!.stop();
    standby = undefined;

    // Every panel query returns at least one sample (Grafana's variables on All).
    const empty: string[] = [];
    for (const p of panels) {
      for (const t of p.targets!) {
        const expr = fill(t.expr, "1m");
        try {
          await waitFor(async () => (await prom.query(expr)).length > 0, { description: `data for "${p.title}" ${t.refId}`, timeoutMs: 20_000, intervalMs: 500 });
        } catch {
          empty.push(`${p.title} [${t.refId}]: ${expr}`);
        }
      }
    }
    expect(empty, `panel queries without data:\n${empty.join("\n")}`).toEqual([]);

    // Spot checks of what the panels show. Each waits for the scrape after the last change (1 s
    // interval; later under load), then compares exactly.
    const byLabels = async (expr: string) => Object.fromEntries((await prom.query(expr)).map((s) => [Object.values(s.metric).join("/"), Number(s.value[1])]));
    const settled = (expr: string, want: Record<string, number>) =>
      waitFor(
        async () => {
          const got = await byLabels(expr);
          if (Object.entries(want).some(([k, v]) => got[k] !== v)) throw new Error(`got ${JSON.stringify(got)}`);
          return got;
        },
        { description: `${expr} to show ${JSON.stringify(want)}`, timeoutMs: 15_000, intervalMs: 250 },
      );
    await settled(`max by (namespace, subscription) (webhook_breaker_state{job="${JOB}", namespace="${ns}"})`, { [`${ns}/down`]: 1, [`${ns}/ok`]: 0 });
    await settled(`max by (namespace, subscription) (webhook_endpoint_health{job="${JOB}", namespace="${ns}"})`, { [`${ns}/gone`]: 2 });
    const latency = await prom.query(fill(panels.find((p) => /latency/i.test(p.title))!.targets![2]!.expr, "1m"));
    expect(Number.isFinite(Number(latency[0]!.value[1]))).toBe(true);
    const drains = await settled(fill(panels.find((p) => /drain/i.test(p.title))!.targets![0]!.expr, "1m"), { drained: 1, timeout: 0 });
    expect(drains).toEqual({ drained: 1, timeout: 0 });
    await settled(`sum by (operation) (webhook_dlq_operations_total{job="${JOB}"})`, { enqueue: 2, replay: 1 });

    // Template variables: the namespace and subscription lists include this scenario's.
    for (const v of dashboard.templating.list.filter((x) => x.type === "query")) {
      const q = variableQuery(typeof v.query === "string" ? v.query : v.query.query);
      const values = (await prom.query(q.expr)).map((s) => s.metric[q.label]);
      expect(values, v.name).toContain(v.name === "namespace" ? ns : v.name === "subscription" ? "down" : JOB);
    }

    // The breaker alert fires for "down" (rendered with for: 5s), the low success ratio for
    // "failing" (no success at all: ratio 0, not "no data"); there is a leader, so
    // HooklineNoLeader does not.
    const firing = await waitFor(
      async () => {
        const alerts = await prom.alerts();
        const f = alerts.find((a) => a.labels.alertname === "HooklineCircuitBreakerOpen" && a.labels.subscription === "down" && a.labels.namespace === ns && a.state === "firing");
        return f ? alerts : undefined;
      },
      { description: "HooklineCircuitBreakerOpen firing for down", timeoutMs: 30_000, intervalMs: 500 },
    );
    const breakerAlert = firing.find((a) => a.labels.alertname === "HooklineCircuitBreakerOpen" && a.labels.subscription === "down")!;
    expect(breakerAlert.annotations.summary).toBe(`Circuit breaker of ${ns}/down has been open for 5s`);
    expect(breakerAlert.annotations.runbook_url).toMatch(/docs\/operations\.md#hooklinecircuitbreakeropen$/);
    expect(firing.some((a) => a.labels.alertname === "HooklineCircuitBreakerOpen" && a.labels.subscription === "ok")).toBe(false);
    await waitFor(async () => (await prom.alerts()).some((a) => a.labels.alertname === "HooklineLowSuccessRatio" && a.labels.subscription === "failing" && a.state === "firing"), {
      description: "HooklineLowSuccessRatio firing for failing",
      timeoutMs: 20_000,
      intervalMs: 500,
    });
    expect((await prom.alerts()).filter((a) => a.labels.alertname === "HooklineNoLeader")).toEqual([]);
  });
});
