// Runs `hookline operator` as a real child process (what a pod runs), captures its JSON log
// lines, and lets tests send real signals and wait on log lines and the exit.
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { inject } from "vitest";
import { freePorts, saysPortTaken } from "../../src/cluster/ports.js";
import { LOOPBACK } from "./operator.js";

const BIN = fileURLToPath(new URL("../../bin/hookline.js", import.meta.url));

export interface OperatorProcess {
  child: ChildProcess;
  name: string;
  lines: Array<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  /** Resolves with the first log line matching `pred` (already seen or future). */
  waitForLog(pred: (l: Record<string, unknown>) => boolean, timeoutMs?: number, what?: string): Promise<Record<string, unknown>>;
  kill(signal: NodeJS.Signals): void;
  metrics(): Promise<string>;
  metricsPort: number;
  healthPort: number;
}

/** The operator exited before the line waited for; `lines` are every log line it wrote. */
export class OperatorExitedError extends Error {
  override readonly name = "OperatorExitedError";
  constructor(
    message: string,
    readonly lines: Array<Record<string, unknown>>,
  ) {
    super(message);
  }

  /** It could not listen on a port it was given: another process took it after freePorts chose it. */
  get portTaken(): boolean {
    return this.lines.some((l) => saysPortTaken(JSON.stringify(l)));
  }
}

interface BaseOptions {
  name: string;
  namespaces: string[];
  env?: Record<string, string>;
  kubeconfig?: string;
  nodeArgs?: string[];
}
type Ports = { metricsPort: number; healthPort: number };

/** Both ports or neither: without them the helper picks free ones, and new ones if another process takes one first. */
export type SpawnOptions = BaseOptions & (Ports | { metricsPort?: undefined; healthPort?: undefined });

/** Starts an operator and waits for "caches synced". */
export async function spawnOperator(opts: SpawnOptions): Promise<OperatorProcess> {
  if (opts.metricsPort !== undefined) return spawnOnce(opts);
  for (let attempt = 1; ; attempt++) {
    const [metricsPort, healthPort] = await freePorts(2);
    try {
      return await spawnOnce({ ...opts, metricsPort: metricsPort!, healthPort: healthPort! });
    } catch (err) {
      // freePorts leaves a moment between choosing a port and the operator binding it: on a busy
      // machine another process may take it. That alone is tried again, with new ports.
      if (!(err instanceof OperatorExitedError && err.portTaken) || attempt >= 3) throw err;
    }
  }
}

async function spawnOnce(opts: BaseOptions & Ports): Promise<OperatorProcess> {
  const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), BIN, "operator", "--kubeconfig", opts.kubeconfig ?? inject("kubeconfig")], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      WATCH_NAMESPACES: opts.namespaces.join(","),
      WEBHOOK_ALLOWED_NETWORKS: LOOPBACK,
      METRICS_PORT: String(opts.metricsPort),
      HEALTH_PORT: String(opts.healthPort),
      POD_NAME: opts.name,
      LOG_LEVEL: "info",
      ...opts.env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: Array<Record<string, unknown>> = [];
  const waiters: Array<() => void> = [];
  let buf = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    buf += chunk;
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      try {
        lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        lines.push({ msg: line });
      }
      for (const w of waiters.splice(0)) w();
    }
  });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  // Set before the waiters wake (not in a then() of `exited`, which runs after them): a waiter
  // woken by the exit must see it, or it sleeps out its whole timeout (30 s by default).
  let done: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.once("exit", (code, signal) => {
      done = { code, signal };
      for (const w of waiters.splice(0)) w();
      resolve({ code, signal, at: Date.now() });
    }),
  );
  const waitForLog = async (pred: (l: Record<string, unknown>) => boolean, timeoutMs = 30_000, what = "a log line") => {
    const deadline = performance.now() + timeoutMs; // monotonic, as waitFor's
    for (;;) {
      const found = lines.find(pred);
      if (found) return found;
      // Its exit and last lines: "operator failed to start" (a port taken, the API server
      // unreachable...) is a log line on stdout, not stderr.
      if (done) throw new OperatorExitedError(`${opts.name} exited (code ${done.code}, signal ${done.signal}) before ${what}; last lines: ${JSON.stringify(lines.slice(-5))} stderr: ${stderr.slice(-2000)}`, lines);
      const left = deadline - performance.now();
      if (left <= 0) throw new Error(`${opts.name}: no ${what} within ${timeoutMs} ms; last lines: ${JSON.stringify(lines.slice(-5))} stderr: ${stderr.slice(-1000)}`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  };
  const p: OperatorProcess = {
    child,
    name: opts.name,
    lines,
    exited,
    waitForLog,
    kill: (signal) => child.kill(signal),
    metricsPort: opts.metricsPort,
    healthPort: opts.healthPort,
    metrics: async () => {
      try {
        return await (await fetch(`http://127.0.0.1:${opts.metricsPort}/metrics`, { signal: AbortSignal.timeout(METRICS_TIMEOUT_MS) })).text();
      } catch (err) {
        // What the process was doing: a busy loop and a stopped or exited process look alike here.
        throw new Error(`${opts.name}: GET /metrics failed (${(err as Error).message}); ${done ? `exited (code ${done.code}, signal ${done.signal})` : await cpuNow(child.pid!)}; last lines: ${JSON.stringify(lines.slice(-5))} stderr: ${stderr.slice(-1000)}`, { cause: err });
      }
    },
  };
  await waitForLog((l) => l.msg === "caches synced", 30_000, "caches synced");
  return p;
}

/** A scrape answers in milliseconds; one that has not in this long will not. */
const METRICS_TIMEOUT_MS = 60_000;

/** A process's state and the CPU it used over the next second, from /proc. */
async function cpuNow(pid: number): Promise<string> {
  const read = () => {
    try {
      // Fields after the command's closing parenthesis: state is the 1st, utime and stime the 12th and 13th.
      const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
      return { state: f[0]!, ticks: Number(f[11]) + Number(f[12]) };
    } catch {
      return undefined;
    }
  };
  const a = read();
  await new Promise((r) => setTimeout(r, 1_000));
  const b = read();
  if (!a || !b) return "its /proc entry is gone";
  return `process state ${b.state}, ${b.ticks - a.ticks} CPU ticks (of about 100 a second) in the last second`;
}

/** The value of one metric sample in Prometheus text, or 0. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const ls = m[2] ?? "";
    if (Object.entries(labels).every(([k, v]) => ls.includes(`${k}="${v}"`))) total += Number(m[3]);
  }
  return total;
}
