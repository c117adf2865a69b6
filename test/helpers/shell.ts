// One bash session that a test types documented commands into, one at a time, as a user does in
// a terminal: `export` and `cd` carry over, a command ending in `&` keeps running in the
// background (its output joins the session's transcript), and each command's own output and
// exit code are returned. Standard error goes where standard output goes, in the order they
// were written, as a terminal shows them. The session runs in its own process group, which the reaper kills if
// the test worker dies; close() kills it and everything it started.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnReaper } from "../../src/cluster/reaper.js";

export interface CommandResult {
  code: number;
  /** Standard output and error as written. */
  output: string;
}

export class ShellSession {
  private readonly child: ChildProcessWithoutNullStreams;
  private stdout = "";
  /** Everything the session printed on stdout, background jobs included. */
  transcript = "";
  private readonly stateDir: string;
  private readonly reaper: number;
  private exited = false;

  constructor(opts: { cwd: string; env: NodeJS.ProcessEnv }) {
    this.stateDir = mkdtempSync(join(tmpdir(), "hookline-shell-"));
    // The state dir in argv marks the group as ours for the reaper (it checks members' cmdlines).
    this.child = spawn("bash", ["--noprofile", "--norc", "-s", this.stateDir], { cwd: opts.cwd, env: opts.env, detached: true, stdio: ["pipe", "pipe", "pipe"] });
    this.child.stdout.setEncoding("utf8").on("data", (c: string) => {
      this.stdout += c;
      this.transcript += c;
    });
    this.child.stderr.setEncoding("utf8").on("data", (c: string) => (this.stdout += c));
    this.child.once("exit", () => (this.exited = true));
    const state = join(this.stateDir, "state.json");
    writeFileSync(state, JSON.stringify({ pgids: { shell: this.child.pid } }));
    this.reaper = spawnReaper(process.pid, state);
    this.child.stdin.write("exec 2>&1\n");
  }

  /** Types `command` and waits for its prompt to come back (its exit code). */
  async run(command: string, opts: { timeoutMs?: number } = {}): Promise<CommandResult> {
    if (this.exited) throw new Error("the shell session has exited");
    const mark = `__hookline_done_${randomBytes(6).toString("hex")}`;
    const start = this.stdout.length;
    // Once the command returned, a marker line with its exit code.
    this.child.stdin.write(`${command}\n__rc=$?; printf '\\n${mark} %d\\n' "$__rc"\n`);
    const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
    const done = new RegExp(`\\n${mark} (\\d+)\\n`);
    for (;;) {
      const m = done.exec(this.stdout.slice(start));
      if (m) {
        this.transcript = this.transcript.replace(done, "\n");
        return { code: Number(m[1]), output: this.stdout.slice(start, start + m.index) };
      }
      if (this.exited) throw new Error(`the shell exited while running: ${command}\noutput: ${this.stdout.slice(start)}`);
      if (Date.now() > deadline) throw new Error(`timed out after ${opts.timeoutMs ?? 60_000} ms: ${command}\noutput: ${this.stdout.slice(start).slice(-3000)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** The session's environment as it is now (after the commands' exports). */
  async env(): Promise<NodeJS.ProcessEnv> {
    const r = await this.run("env -0");
    const env: NodeJS.ProcessEnv = {};
    for (const entry of r.output.split("\0")) {
      const eq = entry.indexOf("=");
      if (eq > 0) env[entry.slice(0, eq).replace(/^\n/, "")] = entry.slice(eq + 1);
    }
    return env;
  }

  close(): void {
    try {
      process.kill(-this.child.pid!, "SIGKILL");
    } catch {
      // already gone
    }
    try {
      process.kill(this.reaper, "SIGKILL");
    } catch {
      // already gone
    }
    rmSync(this.stateDir, { recursive: true, force: true });
  }
}
