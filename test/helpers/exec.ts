// Runs a command and collects its output. Never rejects on a non-zero exit: callers assert on
// `code`. Free of vitest imports so the global setup (main process) can use it too.
import { spawn } from "node:child_process";

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface ExecOptions {
  input?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Kills the command after this long (default 120 s) and reports code 124. */
  timeoutMs?: number;
}

export function exec(command: string, args: string[], opts: ExecOptions = {}): Promise<ExecResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: opts.env, cwd: opts.cwd, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, opts.timeoutMs ?? 120_000);
    child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
    child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${command}: ${err.message}`));
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      if (timedOut) stderr += `\n(killed after ${opts.timeoutMs ?? 120_000} ms)`;
      resolve({ code: timedOut ? 124 : (code ?? (signal ? 128 : 1)), stdout, stderr });
    });
    child.stdin.on("error", () => undefined); // the command may exit without reading its input
    child.stdin.end(opts.input ?? "");
  });
}

/** kubectl against an explicit kubeconfig. */
export function execKubectl(
  kubeconfig: string,
  args: string[],
  opts: Omit<ExecOptions, "env"> = {},
): Promise<ExecResult> {
  return exec("kubectl", ["--kubeconfig", kubeconfig, ...args], opts);
}
