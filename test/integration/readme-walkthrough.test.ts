// README.md as a stranger follows it, on this machine: the commands of its sections
// "Walkthrough", "The on-call console" and "Publishing events" are read from the README's fenced
// blocks (not copied here) and typed, as written and in order, into one bash session in a copy
// of this checkout, against the control plane and operator that the README's `npm start` starts
// there. Every command must exit 0, and what it prints must be what the README shows after it
// (times, ages, durations and random suffixes aside: test/helpers/documented.ts). At the end,
// Ctrl-C stops `npm start`, which must exit 0 and leave no process behind.
//
// What the harness does that the README leaves to the user: the copy's `npm ci` (this checkout's
// node_modules is linked in, as `npm ci` would make it), waiting for `[dev] ready` before the
// second shell, stopping the watch once the shown row appeared (Ctrl-C), and ports for the
// operator's metrics and health servers that cannot collide with a developer's own `npm start`.
import { spawn, type ChildProcess } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { networkInterfaces, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnReaper } from "../../src/cluster/reaper.js";
import { freePorts } from "../../src/cluster/ports.js";
import { groupMembers } from "../../src/cluster/procs.js";
import { waitFor } from "../helpers/cluster.js";
import { expectSameOutput, expectSameWatch, isReceiverLine, runBlock, splitReceiverLines, type BlockRun } from "../helpers/documented.js";
import { ROOT } from "../helpers/helm.js";
import { readBlocks, sectionBlocks, type Block } from "../helpers/markdown.js";
import { ShellSession } from "../helpers/shell.js";

const README = join(ROOT, "README.md");
const blocks = readBlocks(README);
const SECTIONS = ["Walkthrough", "The on-call console", "Publishing events"];

/** The environment of a new terminal: none of this test run's npm, vitest or cluster variables. */
function freshEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(npm_|VITEST|KUBECONFIG$|HOOKLINE_TEST|NODE_OPTIONS$|TEST$)/.test(k)) continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

/** A copy of this checkout as a clone would have it (no build output, no local state). */
function copyCheckout(): string {
  const dir = mkdtempSync(join(tmpdir(), "hookline-readme-"));
  const skip = new Set(["node_modules", ".git", ".hookline", "dist", "dist-release", "coverage"]);
  cpSync(ROOT, dir, { recursive: true, filter: (src) => !skip.has(src.slice(ROOT.length).split("/")[0] ?? "") });
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  return dir;
}

describe("a terminal's output, read as the README shows it", () => {
  it("a receiver line printed between curl's body and its -w newline is split off (CI saw it glued)", () => {
    const body = '{"id":"evt-1003","deliveries":[],"skipped":[]}';
    const line = 'evt-1003 {"id":"evt-1003","type":"order.paid","data":{"order":1003}}';
    expect(splitReceiverLines(`${body}${line}\n202\n`)).toBe(`${body}\n${line}\n202\n`);
    // A line of its own, and a command's JSON alone, are left as they are.
    expect(splitReceiverLines(`${line}\n${body}\n`)).toBe(`${line}\n${body}\n`);
    expect(isReceiverLine(splitReceiverLines(`${body}${line}`).split("\n")[1]!)).toBe(true);
  });
});

describe("README.md, as written: walkthrough, console, publishing", () => {
  let work: string;
  let npmStart: ChildProcess | undefined;
  let startLog = "";
  let startExit: Promise<number | null>;
  let session: ShellSession;
  let reaper: number | undefined;
  // The blocks of the three sections in order; console blocks belong to the shell block before them.
  const steps = SECTIONS.flatMap((s) => sectionBlocks(blocks, s));

  beforeAll(async () => {
    expect(steps[0]!.lang).toBe("sh");
    expect(steps[0]!.text.trim(), "the walkthrough starts with the README's first command").toBe("npm ci && npm start");
    work = copyCheckout();
    const [metrics, health] = await freePorts(2);
    // `npm start` in its own process group (Ctrl-C goes to the group, as from a terminal),
    // named by the work dir so the reaper can clean up if this worker dies.
    npmStart = spawn("bash", ["-c", "npm start; exit $?", work], {
      cwd: work,
      env: freshEnv({ METRICS_PORT: String(metrics), HEALTH_PORT: String(health) }),
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    startExit = new Promise((resolve) => npmStart!.once("exit", (code) => resolve(code)));
    npmStart.stdout!.setEncoding("utf8").on("data", (c: string) => (startLog += c));
    npmStart.stderr!.setEncoding("utf8").on("data", (c: string) => (startLog += c));
    const state = join(work, "state.json"); // the reaper knows the group by the dir in its argv
    writeFileSync(state, JSON.stringify({ pgids: { npmStart: npmStart.pid } }));
    reaper = spawnReaper(process.pid, state);
    // The first run of `npm start` builds (tsc) and starts the control plane.
    await waitFor(
      () => {
        if (npmStart!.exitCode !== null) throw new Error(`npm start exited ${npmStart!.exitCode}:\n${startLog}`);
        return /\[dev\] ready/.test(startLog);
      },
      { description: "npm start to print [dev] ready", timeoutMs: 240_000, intervalMs: 250 },
    );
    session = new ShellSession({ cwd: work, env: freshEnv() });
  }, 300_000);

  afterAll(async () => {
    session?.close();
    if (npmStart && npmStart.exitCode === null) {
      try {
        process.kill(-npmStart.pid!, "SIGKILL");
      } catch {
        // gone
      }
    }
    // Whatever `npm start` left running (if the test failed before Ctrl-C).
    if (work && existsSync(join(work, ".hookline/dev/state.json"))) {
      await new Promise((resolve) => spawn("node", [join(ROOT, "bin/hookline.js"), "cluster", "down", "--dir", join(work, ".hookline/dev")], { stdio: "ignore" }).once("exit", resolve));
    }
    if (reaper) {
      try {
        process.kill(reaper, "SIGKILL");
      } catch {
        // gone
      }
    }
    if (work) rmSync(work, { recursive: true, force: true });
  }, 120_000);

  /** Runs the shell blocks of one section, each held against the console blocks shown after it. */
  async function runSection(heading: string): Promise<BlockRun[]> {
    const section = sectionBlocks(blocks, heading);
    const runs: BlockRun[] = [];
    for (let i = 0; i < section.length; i++) {
      const block = section[i]!;
      if (block.lang !== "sh") continue;
      if (block === steps[0]) continue; // `npm ci && npm start`: the harness ran it
      const shown: Block[] = [];
      for (let j = i + 1; j < section.length && section[j]!.lang === "console"; j++) shown.push(section[j]!);
      const run = await runBlock(session, work, block, shown[0]);
      runs.push(run);
      if (shown[0]) {
        const what = `README line ${shown[0].line}: the output of the block at line ${block.line}`;
        if (run.watch !== undefined) expectSameWatch(run.watch, shown[0].text, what);
        else expectSameOutput(run.output, shown[0].text, what);
      }
      // A second console block: what the block's background command (the receiver) printed.
      for (const extra of shown.slice(1)) {
        const want = extra.text.trim().split("\n");
        const printed: string[] = await waitFor(
          () => {
            const got = splitReceiverLines(session.transcript).split("\n").filter(isReceiverLine);
            return want.every((w) => got.some((g) => g.split(" ")[0] === w.split(" ")[0])) ? got : undefined;
          },
          { description: `the receiver's lines shown at README line ${extra.line}`, timeoutMs: 30_000 },
        );
        for (const w of want) {
          const line = printed.find((g) => g.split(" ")[0] === w.split(" ")[0])!;
          expectSameOutput(line, w, `README line ${extra.line}: the receiver's line`);
        }
      }
    }
    return runs;
  }

  it("Walkthrough: the example delivery reaches Succeeded at the local receiver; kubectl wait returns 0", async () => {
    const runs = await runSection("Walkthrough");
    expect(runs.map((r) => r.block.text).join("\n")).toMatch(/kubectl -n shop wait --for=condition=Succeeded whdel\/evt-1001-acme/);
    expect(runs.map((r) => r.block.text).join("\n")).toMatch(/kubectl -n shop wait --for=condition=Ready whsub\/acme/);
    // The receiver got the example delivery (its line is held against the README above).
    expect(splitReceiverLines(session.transcript)).toMatch(/^evt-1001 \{"id":"evt-1001"/m);
  }, 300_000);

  it("The on-call console: a dead letter, the plugin's attempts, dlq and status, then reset, ping and replay --wait", async () => {
    const runs = await runSection("The on-call console");
    expect(runs.flatMap((r) => r.block.text.split("\n")).filter((l) => l.startsWith("kubectl hookline")).length).toBeGreaterThanOrEqual(6);
    expect(splitReceiverLines(session.transcript)).toMatch(/^evt-1005 \{"id":"evt-1005"/m);
  }, 300_000);

  it("Publishing events: the CLI, the HTTP door with an audience-bound token, and the library", async () => {
    await runSection("Publishing events");
    for (const id of ["evt-1002", "evt-1003", "evt-1004"]) {
      await waitFor(() => splitReceiverLines(session.transcript).split("\n").filter((l) => l.startsWith(`${id} {`)).length === 2, { description: `${id} delivered to acme and globex`, timeoutMs: 30_000 });
    }
  }, 300_000);

  it("npm start's metrics, health and publish servers listen on loopback only (/metrics and the probes do not authenticate)", async () => {
    const line = startLog.split("\n").find((l) => l.includes('"msg":"serving /metrics, /healthz and /readyz"'));
    expect(line, `the operator's serving line in:\n${startLog.slice(-3000)}`).toBeDefined();
    const served = JSON.parse(line!) as { host: string; metricsPort: number; healthPort: number; publishPort?: number };
    expect(served.host).toBe("127.0.0.1");
    const ports = [served.metricsPort, served.healthPort, served.publishPort];
    expect(ports.every((p) => typeof p === "number" && p > 0), JSON.stringify(served)).toBe(true);
    for (const port of ports) expect(await connects("127.0.0.1", port!), `127.0.0.1:${port}`).toBe(true);
    // This machine's other addresses refuse them (the machine CI runs on has one: eth0).
    const others = Object.values(networkInterfaces())
      .flat()
      .filter((a) => a !== undefined && !a.internal && a.family === "IPv4")
      .map((a) => a!.address);
    for (const address of others) for (const port of ports) expect(await connects(address, port!), `${address}:${port}`).toBe(false);
  });

  it("Ctrl-C stops npm start: the operator drains, the control plane stops, nothing is left running", async () => {
    const state = JSON.parse(readFileSync(join(work, ".hookline/dev/state.json"), "utf8")) as { pgids: Record<string, number> };
    process.kill(-npmStart!.pid!, "SIGINT");
    const code = await Promise.race([startExit, new Promise((r) => setTimeout(() => r("timeout"), 90_000))]);
    // npm itself ends as Ctrl-C ends it (no code, or 130); what counts is hookline dev's way out.
    expect(code === null || code === 0 || code === 130, `npm start ended with ${String(code)}\n${startLog.slice(-3000)}`).toBe(true);
    expect(startLog).toMatch(/"msg":"webhook_deliveries_drained"/);
    expect(startLog).toMatch(/\[dev\] stopping the local control plane/);
    expect(startLog).toMatch(/"msg":"stopped"/);
    // A member that exited but is not reaped yet (a zombie: its parent, npm start, is gone and
    // the container's init reaps it when it does) runs nothing; kill(-pgid, 0) would still find it.
    for (const [name, pgid] of Object.entries(state.pgids)) {
      expect(groupMembers(pgid), `${name} (process group ${pgid}) still runs after Ctrl-C`).toEqual([]);
    }
  }, 120_000);
});

/** Whether a TCP connection to address:port is accepted (refused, unreachable or no answer in 5 s: false). */
function connects(address: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: address, port, timeout: 5_000 });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
    socket.once("timeout", () => done(false));
  });
}
