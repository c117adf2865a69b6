// Builds (once) and locates etcd, kube-apiserver and kube-controller-manager by running
// hack/build-control-plane.sh, and nats-server (stream mode) by running hack/build-nats.sh; both
// cache the binaries outside the repo keyed by version. The test-only tools (helm, the
// OpenTelemetry Collector, Prometheus) use the same runner (test/helpers/tools.ts).
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const BUILD_SCRIPT = "hack/build-control-plane.sh";
/** Exit code of the build script when `go` is not on PATH. */
export const EXIT_GO_MISSING = 3;

export interface EnsureBinariesOptions {
  /** Cache root (HOOKLINE_CACHE_DIR); the script defaults to ${XDG_CACHE_HOME:-~/.cache}/hookline. */
  cacheDir?: string;
  /** Called with every progress line the script prints on stderr. */
  onProgress?: (line: string) => void;
  /** Environment of the script (PATH must find bash and go). Inherited when omitted. */
  env?: NodeJS.ProcessEnv;
}

export class GoMissingError extends Error {
  override readonly name = "GoMissingError";
}

/**
 * The package root: the nearest ancestor of this module holding hack/build-control-plane.sh.
 * Works from src/cluster (tsx, vitest) and from dist/cluster (after tsc) alike.
 */
export function packageRoot(from: string = dirname(fileURLToPath(import.meta.url))): string {
  let dir = from;
  for (;;) {
    if (existsSync(join(dir, BUILD_SCRIPT))) return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`cannot find ${BUILD_SCRIPT} above ${from}`);
    dir = parent;
  }
}

const TAIL_LINES = 30;
const BINARIES = ["etcd", "kube-apiserver", "kube-controller-manager"] as const;

function hasBinaries(binDir: string): boolean {
  return BINARIES.every((b) => existsSync(join(binDir, b)));
}

export interface ScriptRun {
  code: number;
  stdout: string;
  /** The last TAIL_LINES lines the script printed on stderr. */
  tail: string;
}

/** Runs one of the hack/build-*.sh scripts with HOOKLINE_CACHE_DIR applied, streaming its progress. */
export async function runBuildScript(relative: string, opts: EnsureBinariesOptions): Promise<ScriptRun> {
  const script = join(packageRoot(), relative);
  let args = [script];
  const env: NodeJS.ProcessEnv | undefined = opts.env ? { ...opts.env } : undefined;
  if (opts.cacheDir !== undefined) {
    if (env) env.HOOKLINE_CACHE_DIR = opts.cacheDir;
    // No explicit env: inherit ours and set the one variable in the shell.
    else args = ["-c", 'export HOOKLINE_CACHE_DIR="$1"; exec bash "$2"', "build", opts.cacheDir, script];
  }

  const child = spawn("bash", args, { env, stdio: ["ignore", "pipe", "pipe"] });
  const stderrTail: string[] = [];
  let stdout = "";
  let pending = "";
  const onLine = (line: string): void => {
    stderrTail.push(line);
    if (stderrTail.length > TAIL_LINES) stderrTail.shift();
    opts.onProgress?.(line);
  };
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    pending += chunk;
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    for (const line of lines) onLine(line);
  });

  const code = await new Promise<number>((resolve, reject) => {
    child.once("error", (err) => reject(new Error(`cannot run bash ${script}: ${err.message}`)));
    child.once("close", (c, signal) => resolve(c ?? (signal ? 128 : 1)));
  });
  if (pending) onLine(pending);
  return { code, stdout, tail: stderrTail.join("\n") };
}

/** Runs the build script (a no-op when the binaries are cached) and returns their directory. */
export async function ensureBinaries(opts: EnsureBinariesOptions = {}): Promise<{ binDir: string }> {
  const { code, stdout, tail } = await runBuildScript(BUILD_SCRIPT, opts);
  if (code === EXIT_GO_MISSING) {
    // The script checks for Go before it looks for cached binaries, yet its own hint says
    // prebuilt binaries in the bin dir are enough: honour that here.
    const binDir = /put a prebuilt .* in (\S+)\s*$/m.exec(tail)?.[1];
    if (binDir && hasBinaries(binDir)) return { binDir };
    throw new GoMissingError(
      `Go is not installed: it is needed once to build etcd, kube-apiserver and kube-controller-manager ` +
        `from the Go module proxy. Install Go >= 1.24 (https://go.dev/dl) and retry` +
        (binDir ? `, or put prebuilt binaries in ${binDir}.` : "."),
    );
  }
  if (code !== 0) {
    throw new Error(`building the control plane failed (${BUILD_SCRIPT} exited with ${code}); last output:\n${tail}`);
  }
  const binDir = stdout.trim().split("\n").pop()?.trim() ?? "";
  if (!binDir) throw new Error(`${BUILD_SCRIPT} printed no bin directory; last output:\n${tail}`);
  if (!hasBinaries(binDir)) throw new Error(`${BUILD_SCRIPT} reported ${binDir}, but binaries are missing there`);
  return { binDir };
}

export const NATS_BUILD_SCRIPT = "hack/build-nats.sh";

/**
 * Runs hack/build-nats.sh (a no-op when nats-server is cached) and returns the binary's path.
 * Throws GoMissingError, naming where a prebuilt binary may go, when Go is not installed.
 */
export async function ensureNatsServer(opts: EnsureBinariesOptions = {}): Promise<{ binary: string }> {
  const { code, stdout, tail } = await runBuildScript(NATS_BUILD_SCRIPT, opts);
  if (code === EXIT_GO_MISSING) {
    const binary = /put a prebuilt nats-server \S+ at (\S+)\s*$/m.exec(tail)?.[1];
    throw new GoMissingError(
      `Go is not installed: it is needed once to build nats-server from the Go module proxy. Install Go >= 1.24 (https://go.dev/dl) and retry` +
        (binary ? `, or put a prebuilt nats-server at ${binary}.` : "."),
    );
  }
  if (code !== 0) throw new Error(`building nats-server failed (${NATS_BUILD_SCRIPT} exited with ${code}); last output:\n${tail}`);
  const binary = stdout.trim().split("\n").pop()?.trim() ?? "";
  if (!binary || !existsSync(binary)) throw new Error(`${NATS_BUILD_SCRIPT} reported "${binary}", but there is no nats-server there; last output:\n${tail}`);
  return { binary };
}
