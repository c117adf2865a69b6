// A real Prometheus (built from the Go module proxy by hack/build-prometheus.sh in the global
// setup) for the dashboard and alert tests: its own temp dir, config and free port on 127.0.0.1;
// never port 9090.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePorts } from "../../src/cluster/ports.js";
import { waitFor } from "./cluster.js";
import { exec, type ExecResult } from "./exec.js";
import { testTools } from "./tools.js";

/** Directory of prometheus and promtool, as the global setup built them. */
export function prometheusBinDir(): string {
  return testTools().prometheusBinDir;
}

export function promtool(args: string[]): Promise<ExecResult> {
  return exec(join(prometheusBinDir(), "promtool"), args, { timeoutMs: 60_000 });
}

export interface PromSample {
  metric: Record<string, string>;
  value: [number, string];
}

export interface PromAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: "pending" | "firing" | "inactive";
}

export class Prometheus {
  private constructor(
    readonly url: string,
    private readonly child: ChildProcess,
    private readonly dir: string,
    readonly log: () => string,
  ) {}

  /**
   * Starts Prometheus scraping `targets` (host:port) every `scrapeInterval` with static labels,
   * evaluating `rules` (rule files' text) every `evaluationInterval`. `https`: scrape over HTTPS,
   * trusting `ca` (PEM), sending `token` as a bearer token (METRICS_AUTH=kubernetes).
   */
  static async start(o: { targets: string[]; labels?: Record<string, string>; honorLabels?: boolean; rules?: string[]; scrapeInterval?: string; evaluationInterval?: string; https?: { ca: string; token: string } }): Promise<Prometheus> {
    const dir = await mkdtemp(join(tmpdir(), "hookline-prom-"));
    const ruleFiles: string[] = [];
    for (const [i, text] of (o.rules ?? []).entries()) {
      const f = join(dir, `rules-${i}.yaml`);
      await writeFile(f, text);
      ruleFiles.push(f);
    }
    let secure = {};
    if (o.https) {
      await writeFile(join(dir, "ca.crt"), o.https.ca);
      await writeFile(join(dir, "token"), o.https.token);
      secure = { scheme: "https", tls_config: { ca_file: join(dir, "ca.crt") }, authorization: { type: "Bearer", credentials_file: join(dir, "token") } };
    }
    const config = {
      global: { scrape_interval: o.scrapeInterval ?? "1s", scrape_timeout: "1s", evaluation_interval: o.evaluationInterval ?? "1s" },
      rule_files: ruleFiles,
      scrape_configs: [
        {
          job_name: o.labels?.job ?? "hookline",
          honor_labels: o.honorLabels ?? true,
          ...secure,
          static_configs: [{ targets: o.targets, labels: Object.fromEntries(Object.entries(o.labels ?? {}).filter(([k]) => k !== "job")) }],
        },
      ],
    };
    await writeFile(join(dir, "prometheus.yml"), JSON.stringify(config, null, 2));
    const [port] = await freePorts(1);
    let out = "";
    const child = spawn(
      join(prometheusBinDir(), "prometheus"),
      [
        `--config.file=${join(dir, "prometheus.yml")}`,
        `--storage.tsdb.path=${join(dir, "data")}`,
        `--web.listen-address=127.0.0.1:${port}`,
        "--storage.tsdb.retention.time=1h",
        "--log.level=warn",
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    // setEncoding decodes across chunks (a chunk can end inside a multi-byte character).
    child.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
    child.stderr.setEncoding("utf8").on("data", (c: string) => (out += c));
    const prom = new Prometheus(`http://127.0.0.1:${port}`, child, dir, () => out);
    let exited = false;
    child.once("exit", () => (exited = true));
    await waitFor(
      async () => {
        if (exited) throw new Error(`prometheus exited: ${out}`);
        const r = await fetch(`${prom.url}/-/ready`);
        return r.ok;
      },
      { description: "prometheus ready", timeoutMs: 30_000 },
    ).catch((err: Error) => {
      child.kill("SIGKILL");
      throw new Error(`${err.message}\n${out}`);
    });
    return prom;
  }

  private async api<T>(path: string, params: Record<string, string> = {}): Promise<T> {
    const r = await fetch(`${this.url}/api/v1/${path}?${new URLSearchParams(params).toString()}`);
    const body = (await r.json()) as { status: string; data: T; error?: string };
    if (body.status !== "success") throw new Error(`prometheus ${path} ${JSON.stringify(params)}: ${body.error}`);
    return body.data;
  }

  /** An instant query's samples. */
  async query(expr: string): Promise<PromSample[]> {
    const data = await this.api<{ resultType: string; result: PromSample[] }>("query", { query: expr });
    if (data.resultType !== "vector") throw new Error(`expected a vector from ${expr}, got ${data.resultType}`);
    return data.result;
  }

  async alerts(): Promise<PromAlert[]> {
    return (await this.api<{ alerts: PromAlert[] }>("alerts")).alerts;
  }

  /** Each active target's health and last scrape error. */
  async targets(): Promise<Array<{ health: string; lastError: string }>> {
    return (await this.api<{ activeTargets: Array<{ health: string; lastError: string }> }>("targets")).activeTargets;
  }

  async targetsUp(): Promise<boolean> {
    const data = await this.api<{ activeTargets: Array<{ health: string }> }>("targets");
    return data.activeTargets.length > 0 && data.activeTargets.every((t) => t.health === "up");
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) {
      const gone = new Promise((r) => this.child.once("exit", r));
      this.child.kill("SIGTERM");
      await gone;
    }
    await rm(this.dir, { recursive: true, force: true });
  }
}
