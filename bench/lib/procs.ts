// The benchmark's child processes: the receiver (IPC), the operator (`node bin/hookline.js
// operator`, optionally with --cpu-prof), the HTTP ceiling, and a detached watchdog that kills
// all of them if the benchmark itself is killed (SIGKILL leaves no chance to clean up).
import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { WebSocket } from "undici";
import { now, procMemory, sleep, socketsTo } from "./util.js";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const BIN = join(ROOT, "bin", "hookline.js");

/** Runs a TypeScript file of bench/ with tsx in a new Node process. */
export function spawnTs(file: string, args: string[], opts: { ipc?: boolean } = {}): ChildProcess {
  return spawn(process.execPath, ["--import", "tsx", join(ROOT, "bench", file), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: "production" },
    stdio: opts.ipc ? ["ignore", "pipe", "pipe", "ipc"] : ["ignore", "pipe", "pipe"],
  });
}

function exitOf(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
export async function stopChild(child: ChildProcess, graceMs = 10_000): Promise<{ code: number | null; signal: NodeJS.Signals | null; killed: boolean }> {
  const exited = exitOf(child);
  if (child.exitCode !== null || child.signalCode !== null) return { ...(await exited), killed: false };
  child.kill("SIGTERM");
  const timer = new Promise<"timeout">((r) => setTimeout(() => r("timeout"), graceMs).unref());
  if ((await Promise.race([exited, timer])) === "timeout") {
    child.kill("SIGKILL");
    return { ...(await exited), killed: true };
  }
  return { ...(await exited), killed: false };
}

// ---------------------------------------------------------------------------------------------
// watchdog

const WATCHDOG_SOURCE = String.raw`
const fs = require("node:fs");
const parent = Number(process.argv[1]);
const file = process.argv[2];
const alive = (pid) => { try { const s = fs.readFileSync("/proc/" + pid + "/stat", "utf8"); const st = s.slice(s.lastIndexOf(")") + 2)[0]; return st !== "Z" && st !== "X"; } catch { try { process.kill(pid, 0); return true; } catch { return false; } } };
const tick = setInterval(() => {
  if (alive(parent)) return;
  clearInterval(tick);
  let pids = [];
  try { pids = JSON.parse(fs.readFileSync(file, "utf8")); } catch {}
  for (const p of pids) { try { process.kill(p, "SIGKILL"); } catch {} }
  process.exit(0);
}, 500);
`;

/** Kills the registered children when this process dies, even by SIGKILL. */
export class Watchdog {
  private readonly pids = new Set<number>();
  private readonly proc: ChildProcess;

  constructor(private readonly file: string) {
    writeFileSync(file, "[]");
    this.proc = spawn(process.execPath, ["-e", WATCHDOG_SOURCE, String(process.pid), file], { detached: true, stdio: "ignore" });
    this.proc.unref();
  }

  add(pid: number | undefined): void {
    if (pid === undefined) return;
    this.pids.add(pid);
    writeFileSync(this.file, JSON.stringify([...this.pids]));
  }

  remove(pid: number | undefined): void {
    if (pid === undefined) return;
    this.pids.delete(pid);
    writeFileSync(this.file, JSON.stringify([...this.pids]));
  }

  stop(): void {
    try {
      this.proc.kill("SIGKILL");
    } catch {
      /* gone */
    }
  }
}

// ---------------------------------------------------------------------------------------------
// receiver

export class ReceiverProcess {
  private nextId = 1;
  private readonly pending = new Map<number, (msg: Record<string, unknown>) => void>();

  private constructor(
    readonly child: ChildProcess,
    readonly port: number,
  ) {
    child.on("message", (msg: Record<string, unknown>) => {
      const id = msg.id as number | undefined;
      if (id === undefined) return;
      this.pending.get(id)?.(msg);
      this.pending.delete(id);
    });
  }

  static async start(marker: string): Promise<ReceiverProcess> {
    const child = spawnTs("receiver.ts", [marker], { ipc: true });
    let stderr = "";
    child.stderr!.setEncoding("utf8").on("data", (c: string) => (stderr += c));
    child.stdout!.resume();
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`receiver did not start within 30 s: ${stderr.slice(-2000)}`)), 30_000);
      child.once("exit", (code) => reject(new Error(`receiver exited (${code}): ${stderr.slice(-2000)}`)));
      child.on("message", (m: { ready?: boolean; port?: number }) => {
        if (m.ready && m.port) {
          clearTimeout(timer);
          resolve(m.port);
        }
      });
    });
    return new ReceiverProcess(child, port);
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  private call<T>(msg: object): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`receiver did not answer ${JSON.stringify(msg)}`)), 30_000);
      this.pending.set(id, (m) => {
        clearTimeout(timer);
        resolve(m as T);
      });
      this.child.send({ ...msg, id });
    });
  }

  /** First arrival time and count per webhook id starting with `prefix`. */
  async arrivals(prefix: string): Promise<Map<string, { at: number; count: number }>> {
    const r = await this.call<{ arrivals: Array<[string, number, number]> }>({ cmd: "arrivals", prefix });
    return new Map(r.arrivals.map(([id, at, count]) => [id, { at, count }]));
  }

  /** How many distinct webhook ids starting with `prefix` arrived (cheap: nothing is copied). */
  async count(prefix: string): Promise<number> {
    return (await this.call<{ count: number }>({ cmd: "count", prefix })).count;
  }

  stats(): Promise<{ ok: number; hang: number; hangingOpen: number; ceiling: number; other: number; eventLoopDelayMs: { p99: number; max: number } }> {
    return this.call({ cmd: "stats" });
  }

  /** Answers the hanging requests under `prefix` (default: all of /hang/), and later ones at once. */
  release(prefix?: string): Promise<unknown> {
    return this.call({ cmd: "release", ...(prefix ? { prefix } : {}) });
  }

  async stop(): Promise<void> {
    if (this.child.connected) this.child.disconnect();
    await stopChild(this.child, 3_000);
  }
}

// ---------------------------------------------------------------------------------------------
// operator

export interface OperatorStart {
  name: string;
  kubeconfig: string;
  logFile: string;
  metricsPort: number;
  healthPort: number;
  env: Record<string, string>;
  /** Directory for --cpu-prof output; no profiling when undefined. */
  cpuProfDir?: string;
  /** Opens the inspector on this port (for forceGc). */
  inspectPort?: number;
}

/** How the per-attempt log line begins its message field (pino: `"msg":"webhook_attempt"`). */
const ATTEMPT_LINE = '"msg":"webhook_attempt"';

export class OperatorProcess {
  /** Parsed log lines (JSON) with the time they arrived. */
  readonly lines: Array<{ at: number; line: Record<string, unknown> }> = [];
  /** When each `webhook_attempt` line arrived (not parsed, not kept). */
  private readonly attemptLines: number[] = [];
  private waiters: Array<() => void> = [];
  private exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private stderr = "";
  readonly startedAt = now();
  /** RSS samples while `sample` runs. */
  private sampler: NodeJS.Timeout | undefined;
  peakRss = 0;
  /** Connections to the API server seen while `sample` runs (a lower bound: polled). */
  readonly apiConnections = new Set<string>();

  private constructor(
    readonly child: ChildProcess,
    readonly opts: OperatorStart,
  ) {
    const log = createWriteStream(opts.logFile, { flags: "a" });
    let buf = "";
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      log.write(chunk);
      buf += chunk;
      let nl: number;
      let from = 0;
      const at = now();
      while ((nl = buf.indexOf("\n", from)) >= 0) {
        const text = buf.slice(from, nl);
        from = nl + 1;
        // The per-attempt line is only counted: parsing and keeping one per delivery took this
        // process (which also publishes and measures) a tenth to a third of a core, on the two
        // cores the operator runs on. Every other line is parsed, for waitForLog.
        if (text.includes(ATTEMPT_LINE)) {
          this.attemptLines.push(at);
          continue;
        }
        try {
          this.lines.push({ at, line: JSON.parse(text) as Record<string, unknown> });
        } catch {
          this.lines.push({ at, line: { msg: text } });
        }
      }
      buf = buf.slice(from);
      for (const w of this.waiters.splice(0)) w();
    });
    child.stderr!.setEncoding("utf8").on("data", (c: string) => {
      log.write(c);
      this.stderr = (this.stderr + c).slice(-4000);
    });
    child.once("exit", (code, signal) => {
      this.exitInfo = { code, signal };
      this.stopSampling();
      log.end();
      for (const w of this.waiters.splice(0)) w();
    });
  }

  static start(opts: OperatorStart): OperatorProcess {
    const flags = [
      ...(opts.cpuProfDir ? ["--cpu-prof", `--cpu-prof-dir=${opts.cpuProfDir}`, `--cpu-prof-name=${opts.name}.cpuprofile`] : []),
      ...(opts.inspectPort ? [`--inspect=127.0.0.1:${opts.inspectPort}`] : []),
    ];
    const child = spawn(process.execPath, [...flags, BIN, "operator", "--kubeconfig", opts.kubeconfig], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        POD_NAME: opts.name,
        LEADER_ELECT: "true",
        WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8",
        METRICS_PORT: String(opts.metricsPort),
        HEALTH_PORT: String(opts.healthPort),
        LOG_LEVEL: "info",
        ...opts.env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    return new OperatorProcess(child, opts);
  }

  get pid(): number {
    return this.child.pid!;
  }

  get exited(): boolean {
    return this.exitInfo !== undefined;
  }

  /** The first log line matching `pred` (already seen or future); its arrival time too. */
  async waitForLog(pred: (l: Record<string, unknown>) => boolean, timeoutMs: number, what: string): Promise<{ at: number; line: Record<string, unknown> }> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.lines.find((l) => pred(l.line));
      if (found) return found;
      if (this.exitInfo) throw new Error(`operator ${this.opts.name} exited (${JSON.stringify(this.exitInfo)}) before ${what}; stderr: ${this.stderr.slice(-2000)}; log: ${this.opts.logFile}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`operator ${this.opts.name}: no ${what} within ${timeoutMs} ms; last lines: ${JSON.stringify(this.lines.slice(-5).map((l) => l.line))}; log: ${this.opts.logFile}`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  /** Started, caches synced, leader, /readyz 200. Returns when each happened (ms since spawn). */
  async ready(timeoutMs = 60_000): Promise<{ syncedMs: number; leaderMs: number; readyMs: number; synced: Record<string, unknown> }> {
    const synced = await this.waitForLog((l) => l.msg === "caches synced", timeoutMs, "caches synced");
    const leader = await this.waitForLog((l) => l.msg === "became leader", timeoutMs, "became leader");
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const r = await fetch(`http://127.0.0.1:${this.opts.healthPort}/readyz`).catch(() => undefined);
      if (r?.status === 200) break;
      if (Date.now() > deadline) throw new Error(`operator ${this.opts.name} not ready within ${timeoutMs} ms`);
      await sleep(50);
    }
    return { syncedMs: synced.at - this.startedAt, leaderMs: leader.at - this.startedAt, readyMs: now() - this.startedAt, synced: synced.line };
  }

  async metrics(): Promise<string> {
    const r = await fetch(`http://127.0.0.1:${this.opts.metricsPort}/metrics`);
    return r.text();
  }

  memory(): { rss: number; hwm: number } | undefined {
    return procMemory(this.pid);
  }

  /**
   * Samples VmRSS into peakRss (VmHWM covers the whole life; this a window) and the sockets to
   * the API server at `apiPort` into apiConnections, every `everyMs`.
   */
  sample(apiPort: number, everyMs = 50): void {
    this.stopSampling();
    this.peakRss = this.memory()?.rss ?? 0;
    this.apiConnections.clear();
    const tick = () => {
      const m = this.memory();
      if (m && m.rss > this.peakRss) this.peakRss = m.rss;
      for (const inode of socketsTo(this.pid, apiPort)) this.apiConnections.add(inode);
    };
    tick();
    this.sampler = setInterval(tick, everyMs);
  }

  stopSampling(): void {
    if (this.sampler) clearInterval(this.sampler);
    this.sampler = undefined;
  }

  /** SIGTERM (drain, release the Lease, write the CPU profile), SIGKILL after graceMs. */
  async stop(graceMs = 30_000): Promise<{ code: number | null; signal: NodeJS.Signals | null; killed: boolean; ms: number }> {
    const t0 = now();
    const r = await stopChild(this.child, graceMs);
    return { ...r, ms: now() - t0 };
  }

  /**
   * A full garbage collection in the operator through its inspector (HeapProfiler.collectGarbage),
   * then V8's heap usage: what the live objects cost, without the garbage a start leaves behind.
   */
  async forceGc(): Promise<{ usedBytes: number; totalBytes: number }> {
    if (!this.opts.inspectPort) throw new Error("the operator was started without an inspector port");
    const list = (await (await fetch(`http://127.0.0.1:${this.opts.inspectPort}/json/list`)).json()) as Array<{ webSocketDebuggerUrl: string }>;
    const ws = new WebSocket(list[0]!.webSocketDebuggerUrl);
    const pending = new Map<number, (result: Record<string, unknown>) => void>();
    ws.addEventListener("message", (e) => {
      const msg = JSON.parse(String(e.data)) as { id?: number; result?: Record<string, unknown> };
      if (msg.id !== undefined) pending.get(msg.id)?.(msg.result ?? {});
    });
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener("open", () => resolve(), { once: true });
      ws.addEventListener("error", () => reject(new Error("cannot connect to the operator's inspector")), { once: true });
    });
    let id = 0;
    const call = (method: string) =>
      new Promise<Record<string, unknown>>((resolve, reject) => {
        const n = ++id;
        const timer = setTimeout(() => reject(new Error(`inspector: no answer to ${method}`)), 30_000);
        pending.set(n, (r) => {
          clearTimeout(timer);
          resolve(r);
        });
        ws.send(JSON.stringify({ id: n, method }));
      });
    try {
      await call("HeapProfiler.collectGarbage");
      const usage = await call("Runtime.getHeapUsage");
      return { usedBytes: Number(usage.usedSize), totalBytes: Number(usage.totalSize) };
    } finally {
      ws.close();
    }
  }

  logLinesSince(at: number): number {
    return this.lines.filter((l) => l.at >= at).length + this.attemptLines.filter((t) => t >= at).length;
  }
}
