// Summarises a V8 .cpuprofile (node --cpu-prof): top functions by self time and by total
// (inclusive) time, and self time by package/file. Frames in dist/ are mapped back to src/ with
// the compiled source maps. Usable as a module (run.ts) and from the command line:
//   npx tsx bench/profile-summary.ts FILE.cpuprofile [--top 25] [--from-us N --to-us N]
// --from-us/--to-us keep the samples taken in that window (CLOCK_MONOTONIC microseconds: what
// process.hrtime.bigint() / 1000n reads in any process on the machine, and what V8 stamps samples with).
import { existsSync, readFileSync } from "node:fs";
import { SourceMap } from "node:module";
import { relative } from "node:path";
import { fileURLToPath } from "node:url";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface FunctionCost {
  function: string;
  where: string;
  /** Package or area: hookline, node, v8, or an npm package name. */
  area: string;
  selfMs: number;
  selfPct: number;
  totalMs: number;
  totalPct: number;
}

export interface ProfileSummary {
  file: string;
  /** Only the samples taken in this window (CLOCK_MONOTONIC microseconds, the clock V8 stamps samples with), when given. */
  window?: { fromUs: number; toUs: number };
  durationMs: number;
  /** Sampled time that was not idle: the basis of every percentage. */
  busyMs: number;
  idleMs: number;
  gcMs: number;
  topSelf: FunctionCost[];
  topTotal: FunctionCost[];
  /** Hookline's own functions by total time. */
  topHookline: FunctionCost[];
  byArea: Array<{ area: string; selfMs: number; selfPct: number }>;
  byFile: Array<{ file: string; selfMs: number; selfPct: number }>;
}

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const maps = new Map<string, SourceMap | undefined>();

function sourceMapFor(path: string): SourceMap | undefined {
  if (!maps.has(path)) {
    const mapFile = `${path}.map`;
    let map: SourceMap | undefined;
    try {
      if (existsSync(mapFile)) map = new SourceMap(JSON.parse(readFileSync(mapFile, "utf8")));
    } catch {
      map = undefined;
    }
    maps.set(path, map);
  }
  return maps.get(path);
}

function locate(cf: CallFrame): { where: string; area: string; file: string } {
  const url = cf.url;
  if (!url) return { where: "(native)", area: cf.functionName.startsWith("(") ? "v8" : "v8 builtins", file: "(native)" };
  if (url.startsWith("node:")) return { where: `${url}:${cf.lineNumber + 1}`, area: "node", file: url };
  const path = url.startsWith("file://") ? fileURLToPath(url) : url;
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(path);
  if (nm) return { where: `${nm[1]}/${path.slice(path.lastIndexOf("node_modules/") + 13 + nm[1]!.length + 1)}:${cf.lineNumber + 1}`, area: nm[1]!, file: `${nm[1]}` };
  const rel = relative(ROOT, path);
  const map = rel.startsWith("dist/") ? sourceMapFor(path) : undefined;
  if (map) {
    const entry = map.findEntry(cf.lineNumber, cf.columnNumber) as { originalSource?: string; originalLine?: number };
    if (entry.originalSource) {
      const src = relative(ROOT, entry.originalSource.startsWith("file://") ? fileURLToPath(entry.originalSource) : new URL(entry.originalSource, `file://${path}`).pathname);
      return { where: `${src}:${(entry.originalLine ?? 0) + 1}`, area: "hookline", file: src };
    }
  }
  return { where: `${rel}:${cf.lineNumber + 1}`, area: rel.startsWith("dist/") || rel.startsWith("src/") ? "hookline" : "other", file: rel };
}

export function summarizeProfile(file: string, top = 25, window?: { fromUs: number; toUs: number }): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const n of profile.nodes) {
    byId.set(n.id, n);
    for (const c of n.children ?? []) parent.set(c, n.id);
  }
  const keyOf = (n: ProfileNode) => `${n.callFrame.functionName || "(anonymous)"}\u0000${n.callFrame.url}:${n.callFrame.lineNumber}:${n.callFrame.columnNumber}`;
  const self = new Map<string, number>();
  const total = new Map<string, number>();
  const frameOf = new Map<string, CallFrame>();
  let idle = 0;
  let gc = 0;
  let all = 0;
  // timeDeltas[i] is the time from the previous sample (from startTime for the first) to
  // samples[i]; timeDeltas[i + 1] is the time spent in samples[i] (the next sample's delta).
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0;
    if (window && (at < window.fromUs || at > window.toUs)) continue;
    const dt = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    const node = byId.get(profile.samples[i]!);
    if (!node || dt <= 0) continue;
    all += dt;
    const fn = node.callFrame.functionName;
    if (fn === "(idle)") {
      idle += dt;
      continue;
    }
    if (fn === "(garbage collector)") gc += dt;
    const k = keyOf(node);
    frameOf.set(k, node.callFrame);
    self.set(k, (self.get(k) ?? 0) + dt);
    const seen = new Set<string>();
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
      const n = byId.get(id)!;
      if (n.callFrame.functionName === "(root)") break;
      const kk = keyOf(n);
      if (seen.has(kk)) continue;
      seen.add(kk);
      frameOf.set(kk, n.callFrame);
      total.set(kk, (total.get(kk) ?? 0) + dt);
    }
  }
  const busy = all - idle;
  const pct = (ms: number) => Math.round((ms / busy) * 1000) / 10;
  const ms = (x: number) => Math.round(x * 10) / 10;
  const cost = (k: string): FunctionCost => {
    const cf = frameOf.get(k)!;
    const loc = locate(cf);
    const s = self.get(k) ?? 0;
    const t = total.get(k) ?? 0;
    return { function: cf.functionName || "(anonymous)", where: loc.where, area: loc.area, selfMs: ms(s), selfPct: pct(s), totalMs: ms(t), totalPct: pct(t) };
  };
  const topSelf = [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, top).map(([k]) => cost(k));
  const topTotal = [...total.entries()]
    .filter(([k]) => {
      const fn = frameOf.get(k)!.functionName;
      return fn !== "(program)" && fn !== "(garbage collector)";
    })
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([k]) => cost(k));
  const topHookline = [...total.entries()]
    .filter(([k]) => locate(frameOf.get(k)!).area === "hookline")
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([k]) => cost(k));
  const areas = new Map<string, number>();
  const files = new Map<string, number>();
  for (const [k, s] of self) {
    const loc = locate(frameOf.get(k)!);
    areas.set(loc.area, (areas.get(loc.area) ?? 0) + s);
    files.set(loc.file, (files.get(loc.file) ?? 0) + s);
  }
  const ranked = (m: Map<string, number>, n: number) => [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, n);
  return {
    file,
    ...(window ? { window } : {}),
    durationMs: ms(window ? all : (profile.endTime - profile.startTime) / 1000),
    busyMs: ms(busy),
    idleMs: ms(idle),
    gcMs: ms(gc),
    topSelf,
    topTotal,
    topHookline,
    byArea: ranked(areas, 15).map(([area, s]) => ({ area, selfMs: ms(s), selfPct: pct(s) })),
    byFile: ranked(files, 20).map(([f, s]) => ({ file: f, selfMs: ms(s), selfPct: pct(s) })),
  };
}

export function formatProfile(s: ProfileSummary, top = 25): string {
  const lines: string[] = [];
  lines.push(`profile ${relative(ROOT, s.file)}${s.window ? ` (${((s.window.toUs - s.window.fromUs) / 1e6).toFixed(2)} s window)` : ""}: ${(s.durationMs / 1000).toFixed(1)} s sampled, ${(s.busyMs / 1000).toFixed(2)} s busy, ${(s.idleMs / 1000).toFixed(2)} s idle, GC ${(s.gcMs / 1000).toFixed(2)} s`);
  lines.push("");
  lines.push("| # | self ms | self % | total % | function | where |");
  lines.push("| ---: | ---: | ---: | ---: | --- | --- |");
  s.topSelf.slice(0, top).forEach((f, i) => lines.push(`| ${i + 1} | ${f.selfMs} | ${f.selfPct} | ${f.totalPct} | \`${f.function}\` | ${f.where} |`));
  lines.push("");
  lines.push("Inclusive (total) time:");
  lines.push("");
  lines.push("| # | total ms | total % | function | where |");
  lines.push("| ---: | ---: | ---: | --- | --- |");
  s.topTotal.slice(0, top).forEach((f, i) => lines.push(`| ${i + 1} | ${f.totalMs} | ${f.totalPct} | \`${f.function}\` | ${f.where} |`));
  lines.push("");
  lines.push("Hookline's functions by total time:");
  lines.push("");
  lines.push("| # | total ms | total % | self % | function | where |");
  lines.push("| ---: | ---: | ---: | ---: | --- | --- |");
  s.topHookline.slice(0, top).forEach((f, i) => lines.push(`| ${i + 1} | ${f.totalMs} | ${f.totalPct} | ${f.selfPct} | \`${f.function}\` | ${f.where} |`));
  lines.push("");
  lines.push("Self time by area: " + s.byArea.map((a) => `${a.area} ${a.selfPct}%`).join(", "));
  lines.push("");
  lines.push("Self time by file: " + s.byFile.map((a) => `${a.file} ${a.selfPct}%`).join(", "));
  return lines.join("\n");
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write("usage: tsx bench/profile-summary.ts FILE.cpuprofile [--top N] [--from-us N --to-us N]\n");
    process.exit(2);
  }
  const i = process.argv.indexOf("--top");
  const top = i > 0 ? Number(process.argv[i + 1]) : 25;
  const arg = (name: string) => {
    const j = process.argv.indexOf(name);
    return j > 0 ? Number(process.argv[j + 1]) : undefined;
  };
  const fromUs = arg("--from-us");
  const toUs = arg("--to-us");
  const window = fromUs !== undefined && toUs !== undefined ? { fromUs, toUs } : undefined;
  process.stdout.write(`${formatProfile(summarizeProfile(file, top, window), top)}\n`);
}
