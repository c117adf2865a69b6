// Process liveness that tells the truth about zombies. On this kind of machine PID 1 may not reap
// orphans, so a killed etcd whose parent already exited stays a zombie: `kill(pid, 0)` and even
// `kill(-pgid, 0)` still succeed on it. On Linux we read /proc; elsewhere we fall back to kill(0).
import { existsSync, readdirSync, readFileSync } from "node:fs";

const HAVE_PROC = existsSync("/proc/self/stat");

interface Stat {
  state: string;
  pgrp: number;
}

function readStat(pid: number): Stat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    // "pid (comm) S ppid pgrp ..."; comm may contain spaces and parentheses.
    const rest = text.slice(text.lastIndexOf(")") + 2).split(" ");
    return { state: rest[0] ?? "?", pgrp: Number(rest[2]) };
  } catch {
    return undefined;
  }
}

const living = (s: Stat | undefined): s is Stat => s !== undefined && s.state !== "Z" && s.state !== "X";

function signalZero(target: number): boolean {
  try {
    process.kill(target, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** True when the process exists and is not a zombie. */
export function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  if (!HAVE_PROC) return signalZero(pid);
  return living(readStat(pid));
}

/** Living (non-zombie) members of a process group. */
export function groupMembers(pgid: number): number[] {
  if (!Number.isInteger(pgid) || pgid <= 1) return [];
  if (!HAVE_PROC) return signalZero(-pgid) ? [pgid] : [];
  const members: number[] = [];
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid <= 0) continue;
    const stat = readStat(pid);
    if (living(stat) && stat.pgrp === pgid) members.push(pid);
  }
  return members;
}

/** The command line of a process, arguments joined by spaces ("" when unknown). */
export function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
  } catch {
    return "";
  }
}

/**
 * Whether a process group is still ours: some living member's command line mentions `marker`
 * (the control plane directory). Guards against signalling a recycled pid. Without /proc we
 * cannot check and trust the recorded pgid.
 */
export function isOurGroup(pgid: number, marker: string): boolean {
  const members = groupMembers(pgid);
  if (members.length === 0) return false;
  if (!HAVE_PROC) return true;
  return members.some((pid) => cmdline(pid).includes(marker));
}

/** Sends a signal to a whole process group; false when it no longer exists. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}
