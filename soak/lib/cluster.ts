// Stops and restarts one process of the control plane (etcd or kube-apiserver) as a fault.
// src/cluster/control-plane.ts starts all three and stops them together but exposes no restart of
// one, so this reads the running process's command line from /proc, stops its process group and
// starts the same command again (detached, its own group, same log file), then records the new
// pid in state.json so stopControlPlane and the reaper still find it.
import { spawn } from "node:child_process";
import { closeSync, openSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readState, type ControlPlaneState, type ProcessName } from "../../src/cluster/control-plane.js";
import { groupMembers, signalGroup } from "../../src/cluster/procs.js";
import { sleep } from "../../bench/lib/util.js";

function writeState(state: ControlPlaneState): void {
  const file = join(state.dir, "state.json");
  writeFileSync(`${file}.tmp`, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
}

async function waitGone(pgid: number, ms: number): Promise<boolean> {
  for (const until = Date.now() + ms; Date.now() < until; await sleep(50)) if (groupMembers(pgid).length === 0) return true;
  return groupMembers(pgid).length === 0;
}

/** Stops `name` (SIGTERM, SIGKILL after 5 s) and returns a function that starts it again. */
export async function stopProcess(dir: string, name: Exclude<ProcessName, "kube-controller-manager">): Promise<() => Promise<void>> {
  const state = readState(dir);
  const pid = state?.pids[name];
  const pgid = state?.pgids[name];
  if (!state || pid === undefined || pgid === undefined) throw new Error(`no ${name} in ${dir}/state.json`);
  const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter((a) => a !== "");
  signalGroup(pgid, "SIGTERM");
  if (!(await waitGone(pgid, 5_000))) {
    signalGroup(pgid, "SIGKILL");
    await waitGone(pgid, 5_000);
  }
  return () => {
    const fd = openSync(join(dir, "logs", `${name}.log`), "a", 0o600);
    try {
      const proc = spawn(argv[0]!, argv.slice(1), { cwd: dir, detached: true, stdio: ["ignore", fd, fd], env: process.env });
      proc.unref();
      const fresh = readState(dir)!;
      fresh.pids[name] = proc.pid!;
      fresh.pgids[name] = proc.pid!;
      writeState(fresh);
    } finally {
      closeSync(fd);
    }
    return Promise.resolve();
  };
}
