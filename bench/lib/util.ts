// Small helpers shared by the benchmark's processes: a sub-millisecond wall clock that means
// the same in every process on the machine, percentiles, Prometheus text, /proc readings.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";

/** Wall-clock milliseconds with sub-millisecond resolution (comparable across processes). */
export function now(): number {
  return performance.timeOrigin + performance.now();
}

/** CLOCK_MONOTONIC microseconds: the clock V8 stamps CPU profile samples with, the same in every process (profile-summary.ts --from-us/--to-us). */
export function monotonicUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

export const sleep = (ms: number): Promise<void> => delay(ms);

export interface Percentiles {
  count: number;
  min: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentiles of `values` (ms), rounded to 0.1 ms. */
export function percentiles(values: number[]): Percentiles {
  const v = [...values].sort((a, b) => a - b);
  const n = v.length;
  const r = (x: number) => Math.round(x * 10) / 10;
  if (n === 0) return { count: 0, min: NaN, p50: NaN, p95: NaN, p99: NaN, max: NaN, mean: NaN };
  const at = (p: number) => v[Math.min(n - 1, Math.max(0, Math.ceil((p / 100) * n) - 1))]!;
  return { count: n, min: r(v[0]!), p50: r(at(50)), p95: r(at(95)), p99: r(at(99)), max: r(v[n - 1]!), mean: r(v.reduce((s, x) => s + x, 0) / n) };
}

/** Sum of the samples of `name` in Prometheus text whose labels include `labels`. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const ls = m[2] ?? "";
    if (Object.entries(labels).every(([k, v]) => ls.includes(`${k}="${v}"`))) total += Number(m[3]);
  }
  return total;
}

/** Every sample of `name` as {labels, value}. */
export function samples(text: string, name: string): Array<{ labels: Record<string, string>; value: number }> {
  const out: Array<{ labels: Record<string, string>; value: number }> = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const labels: Record<string, string> = {};
    for (const lm of (m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[lm[1]!] = lm[2]!;
    out.push({ labels, value: Number(m[3]) });
  }
  return out;
}

/** VmRSS and VmHWM (peak RSS) of a process in bytes, or undefined when it is gone. */
export function procMemory(pid: number): { rss: number; hwm: number } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? NaN) * 1024;
    return { rss: kb("VmRSS"), hwm: kb("VmHWM") };
  } catch {
    return undefined;
  }
}

/**
 * Inodes of the TCP sockets `pid` holds to 127.0.0.1:`port` (from /proc/PID/fd and
 * /proc/net/tcp). Polled, it counts the connections a process opens to the API server.
 */
export function socketsTo(pid: number, port: number): Set<string> {
  const out = new Set<string>();
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return out;
  }
  const inodes = new Set<string>();
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      /* closed meanwhile */
    }
  }
  if (inodes.size === 0) return out;
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n")) {
      const f = line.trim().split(/\s+/);
      // sl local rem st tx:rx tr:when retr uid timeout inode
      if (f.length < 10 || !f[2]?.endsWith(`:${hexPort}`)) continue;
      if (inodes.has(f[9]!)) out.add(f[9]!);
    }
  }
  return out;
}

let clockTicks: number | undefined;

/** User + system CPU seconds of a process so far (from /proc/PID/stat), or NaN. */
export function procCpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    clockTicks ??= Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = text.slice(text.lastIndexOf(")") + 2).split(" ");
    // After "pid (comm) ": state is field 3, utime 14 and stime 15 (1-based) -> indexes 11, 12.
    return (Number(f[11]) + Number(f[12])) / clockTicks;
  } catch {
    return NaN;
  }
}

export function loadAverage(): [number, number, number] {
  try {
    const [a, b, c] = readFileSync("/proc/loadavg", "utf8").split(" ").map(Number);
    return [a ?? NaN, b ?? NaN, c ?? NaN];
  } catch {
    return [NaN, NaN, NaN];
  }
}

export function machine(): { cpu: string; cores: number; memoryGiB: number; kernel: string } {
  let cpu = "unknown";
  let cores = 0;
  let memoryGiB = NaN;
  let kernel = "unknown";
  try {
    const info = readFileSync("/proc/cpuinfo", "utf8");
    cpu = /^model name\s*:\s*(.+)$/m.exec(info)?.[1]?.trim() ?? cpu;
    cores = (info.match(/^processor\s*:/gm) ?? []).length;
  } catch {
    /* not Linux */
  }
  try {
    const kb = Number(/^MemTotal:\s+(\d+) kB/m.exec(readFileSync("/proc/meminfo", "utf8"))?.[1]);
    memoryGiB = Math.round((kb / 1024 / 1024) * 10) / 10;
  } catch {
    /* not Linux */
  }
  try {
    kernel = readFileSync("/proc/sys/kernel/osrelease", "utf8").trim();
  } catch {
    /* not Linux */
  }
  return { cpu, cores, memoryGiB, kernel };
}

export const round = (x: number, digits = 1): number => {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
};

/** Runs `fn(i)` for i in [0, count) with at most `concurrency` calls in flight. */
export async function pool(count: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      await fn(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}

/** Busy CPU seconds of the whole machine so far, all cores (/proc/stat: every state but idle and iowait), or NaN. */
export function machineBusySeconds(): number {
  try {
    clockTicks ??= Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
    const line = readFileSync("/proc/stat", "utf8").split("\n")[0]!;
    // cpu user nice system idle iowait irq softirq steal (guest and guest_nice are inside user and nice)
    const f = line.trim().split(/\s+/).slice(1, 9).map(Number);
    const busy = f[0]! + f[1]! + f[2]! + f[5]! + f[6]! + f[7]!;
    return busy / clockTicks;
  } catch {
    return NaN;
  }
}

/** Pids of the processes named NAME (/proc/PID/comm) whose command line contains every one of `containing`. */
export function pidsOf(name: string, containing: string[] = []): number[] {
  const out: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return out;
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (readFileSync(`/proc/${e}/comm`, "utf8").trim() !== name) continue;
      const cmd = readFileSync(`/proc/${e}/cmdline`, "utf8");
      if (containing.every((c) => cmd.includes(c))) out.push(Number(e));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** Read and write system calls of a process so far (/proc/PID/io: syscr, syscw; every thread), or NaN each. */
export function procSyscalls(pid: number | undefined): { reads: number; writes: number } {
  if (pid === undefined) return { reads: NaN, writes: NaN };
  try {
    const text = readFileSync(`/proc/${pid}/io`, "utf8");
    const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, "m").exec(text)?.[1] ?? NaN);
    return { reads: field("syscr"), writes: field("syscw") };
  } catch {
    return { reads: NaN, writes: NaN };
  }
}
