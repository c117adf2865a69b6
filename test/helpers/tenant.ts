// A tenant measured from a process of its own (test/helpers/tenant-process.ts): its producer and
// its webhook endpoint, stamping when an event was sent and when its webhook arrived. See that
// file for why the measuring tenant does not share the test's process.
import { spawn, type ChildProcess } from "node:child_process";
import { setPriority } from "node:os";
import { fileURLToPath } from "node:url";

const ENTRY = fileURLToPath(new URL("./tenant-process.ts", import.meta.url));
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

export class TenantProcess {
  private nextId = 1;
  private readonly pending = new Map<number, (msg: Record<string, unknown>) => void>();
  private stderr = "";
  static readonly NICE = -10;
  /** Whether it runs at NICE (else at the default priority). */
  niced = false;

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

  static async start(): Promise<TenantProcess> {
    const child = spawn(process.execPath, ["--import", "tsx", ENTRY], { cwd: ROOT, env: { PATH: process.env.PATH, HOME: process.env.HOME }, stdio: ["ignore", "inherit", "pipe", "ipc"] });
    let stderr = "";
    child.stderr!.setEncoding("utf8").on("data", (c: string) => (stderr = (stderr + c).slice(-4000)));
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the tenant process did not start within 60 s: ${stderr}`)), 60_000);
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`the tenant process exited (${code}): ${stderr}`));
      });
      child.on("message", (m: { ready?: boolean; port?: number }) => {
        if (m.ready && m.port) {
          clearTimeout(timer);
          resolve(m.port);
        }
      });
    });
    const t = new TenantProcess(child, port);
    try {
      setPriority(child.pid!, TenantProcess.NICE);
      t.niced = true;
    } catch {
      // Not permitted (not root): measured at the same priority as everything else.
    }
    child.stderr!.on("data", (c: string) => (t.stderr = (t.stderr + c).slice(-4000)));
    return t;
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  private call<T>(msg: object, timeoutMs: number): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the tenant process did not answer ${JSON.stringify(msg).slice(0, 200)} within ${timeoutMs} ms: ${this.stderr}`)), timeoutMs);
      this.pending.set(id, (m) => {
        clearTimeout(timer);
        if (typeof m.error === "string") reject(new Error(`the tenant process: ${m.error}`));
        else resolve(m as T);
      });
      this.child.send({ ...msg, id });
    });
  }

  /** Publishes `n` events `${prefix}${i}` at `perSecond`; when each was acknowledged. */
  async publish(opts: { nats: string; namespace: string; type: string; prefix: string; n: number; perSecond: number }): Promise<Map<string, number>> {
    const { sent } = await this.call<{ sent: Array<[string, number]> }>({ cmd: "publish", ...opts }, 120_000 + (opts.n * 1000) / opts.perSecond);
    return new Map(sent);
  }

  /** Creates `objects` at `perSecond` as the holder of `token`; when each create was answered, and how long it took. */
  async create(opts: { kubeconfig: string; token: string; objects: unknown[]; perSecond: number }): Promise<{ sent: Map<string, { at: number; answeredMs: number }>; tooMany: number }> {
    const r = await this.call<{ sent: Array<[string, number, number]>; tooMany: number }>({ cmd: "create", ...opts }, 120_000 + (opts.objects.length * 1000) / opts.perSecond);
    return { sent: new Map(r.sent.map(([name, at, answeredMs]) => [name, { at, answeredMs }])), tooMany: r.tooMany };
  }

  /** The first arrival of each webhook id under `prefix`. */
  async arrivals(prefix: string): Promise<Map<string, number>> {
    return new Map((await this.call<{ arrivals: Array<[string, number]> }>({ cmd: "arrivals", prefix }, 30_000)).arrivals);
  }

  /** Its own event-loop delay since the previous call: a stall here stamps late. */
  async stats(): Promise<{ p99: number; max: number }> {
    return (await this.call<{ eventLoopDelayMs: { p99: number; max: number } }>({ cmd: "stats" }, 30_000)).eventLoopDelayMs;
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((r) => this.child.once("exit", r));
    this.child.disconnect();
    await exited;
  }
}
