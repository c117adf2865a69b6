// The parent's side of the scripted receivers (soak/receiver.ts): start, set behaviours, restart
// on the same port (a fault), stop. Each receiver appends to its own log file.
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { ROOT, stopChild } from "../../bench/lib/procs.js";
import type { Behaviour } from "./behaviour.js";

export class ReceiverProcess {
  private child!: ChildProcess;
  private nextId = 1;
  private readonly pending = new Map<number, () => void>();
  port = 0;
  /** Set while the parent stops or restarts it: that exit is expected. */
  private stopping = false;
  /** Behaviours set so far, re-sent after a restart. */
  private readonly behaviours = new Map<string, Behaviour>();

  constructor(
    readonly name: string,
    readonly logFile: string,
    private readonly onPid: (pid: number | undefined, alive: boolean) => void,
  ) {}

  async start(): Promise<void> {
    const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, "soak", "receiver.ts"), this.logFile, String(this.port)], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: "production" },
      stdio: ["ignore", "ignore", "pipe", "ipc"],
    });
    this.child = child;
    this.stopping = false;
    this.onPid(child.pid, true);
    let stderr = "";
    child.stderr!.setEncoding("utf8").on("data", (c: string) => (stderr = (stderr + c).slice(-4000)));
    child.on("message", (m: { id?: number }) => {
      if (m.id === undefined) return;
      this.pending.get(m.id)?.();
      this.pending.delete(m.id);
    });
    // A receiver that dies on its own (not stopped or restarted by a fault) is said at once:
    // every later request to it fails, which would otherwise read as the operator's loss.
    child.once("exit", (code, signal) => {
      if (this.child === child && !this.stopping) console.error(`[soak] receiver ${this.name} exited on its own (${signal ?? code}): ${stderr.trim().slice(-1000)}`);
    });
    this.port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`receiver ${this.name} did not start within 30 s: ${stderr}`)), 30_000);
      child.once("exit", (code) => reject(new Error(`receiver ${this.name} exited (${code}): ${stderr}`)));
      child.on("message", (m: { ready?: boolean; port?: number }) => {
        if (m.ready && m.port) {
          clearTimeout(timer);
          resolve(m.port);
        }
      });
    });
    for (const [endpoint, behaviour] of this.behaviours) await this.call({ cmd: "set", endpoint, behaviour });
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  private call(msg: object): Promise<void> {
    if (!this.child.connected) return Promise.resolve();
    const id = this.nextId++;
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        resolve();
      }, 10_000);
      this.pending.set(id, () => {
        clearTimeout(timer);
        resolve();
      });
      this.child.send({ ...msg, id });
    });
  }

  async set(endpoint: string, behaviour: Behaviour): Promise<void> {
    this.behaviours.set(endpoint, behaviour);
    await this.call({ cmd: "set", endpoint, behaviour });
  }

  async setAll(behaviour: Behaviour): Promise<void> {
    for (const k of this.behaviours.keys()) this.behaviours.set(k, behaviour);
    await this.call({ cmd: "setAll", behaviour });
  }

  /** The fault: SIGKILL, then a new process on the same port after `downMs`. */
  async restart(downMs: number): Promise<void> {
    const old = this.child;
    this.stopping = true;
    old.kill("SIGKILL");
    await stopChild(old, 1_000);
    this.onPid(old.pid, false);
    await new Promise((r) => setTimeout(r, downMs));
    await this.start();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.child.connected) this.child.disconnect();
    await stopChild(this.child, 3_000);
    this.onPid(this.child.pid, false);
  }
}
