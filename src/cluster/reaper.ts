// A tiny detached watchdog that kills the control plane when the process that started it dies,
// even by SIGKILL (nothing runs in a SIGKILLed process, so the cleanup must live elsewhere).
// It is plain JavaScript run with `node -e`, so it works the same from src/ (tsx, vitest) and
// dist/. It re-reads state.json on every tick, so process groups started after it are covered.
import { spawn } from "node:child_process";
import { isAlive, isOurGroup, signalGroup } from "./procs.js";

// argv: [node, parentPid, stateFile]. Zombie-aware like procs.ts (PID 1 may not reap here).
const REAPER_SOURCE = String.raw`
const fs = require("node:fs");
const parent = Number(process.argv[1]);
const stateFile = process.argv[2];
const hookMarker = stateFile.replace(/\/state\.json$/, "");
const groups = new Set();
const stat = (pid) => {
  try {
    const t = fs.readFileSync("/proc/" + pid + "/stat", "utf8");
    const r = t.slice(t.lastIndexOf(")") + 2).split(" ");
    return { state: r[0], pgrp: Number(r[2]) };
  } catch { return undefined; }
};
const haveProc = fs.existsSync("/proc/self/stat");
const alive = (pid) => {
  if (haveProc) { const s = stat(pid); return !!s && s.state !== "Z" && s.state !== "X"; }
  try { process.kill(pid, 0); return true; } catch (e) { return e.code === "EPERM"; }
};
const members = (pgid) => {
  if (!haveProc) { try { process.kill(-pgid, 0); return [pgid]; } catch { return []; } }
  const out = [];
  for (const e of fs.readdirSync("/proc")) {
    const pid = Number(e);
    if (!Number.isInteger(pid) || pid <= 0) continue;
    const s = stat(pid);
    if (s && s.state !== "Z" && s.state !== "X" && s.pgrp === pgid) out.push(pid);
  }
  return out;
};
const ours = (pgid) => members(pgid).some((pid) => {
  if (!haveProc) return true;
  try { return fs.readFileSync("/proc/" + pid + "/cmdline", "utf8").includes(hookMarker); } catch { return false; }
});
const readGroups = () => {
  try {
    const s = JSON.parse(fs.readFileSync(stateFile, "utf8"));
    for (const g of Object.values(s.pgids || {})) if (Number.isInteger(g) && g > 1) groups.add(g);
  } catch {}
};
const kill = (sig) => { for (const g of groups) if (ours(g)) { try { process.kill(-g, sig); } catch {} } };
const tick = setInterval(() => {
  if (alive(parent)) { readGroups(); return; }
  clearInterval(tick);
  readGroups();
  kill("SIGTERM");
  const deadline = Date.now() + 5000;
  const wait = setInterval(() => {
    const left = [...groups].filter((g) => members(g).length > 0);
    if (left.length === 0) process.exit(0);
    if (Date.now() > deadline) { kill("SIGKILL"); process.exit(0); }
  }, 100);
}, 500);
readGroups();
`;

/**
 * Spawns the watchdog for `parentPid` in its own process group and returns its pid. It exits
 * after cleaning up once the parent is gone; stopControlPlane kills it when stopping normally.
 */
export function spawnReaper(parentPid: number, stateFile: string): number {
  const child = spawn(process.execPath, ["-e", REAPER_SOURCE, String(parentPid), stateFile], {
    detached: true,
    stdio: "ignore",
  });
  child.unref();
  if (child.pid === undefined) throw new Error("could not start the control plane reaper");
  return child.pid;
}

/** Kills the watchdog `pid` when stopping normally, if it is alive and still ours (its command line names `marker`). */
export function stopReaper(pid: number | undefined, marker: string): void {
  if (pid === undefined || !isAlive(pid) || !isOurGroup(pid, marker)) return;
  signalGroup(pid, "SIGKILL");
}
