// Leadership as the operators' own logs (pino JSON lines) tell it, read once after the run:
// - leadership changes the faults did not cause: an operator that could not renew its Lease in
//   time (a loaded machine, a slow API server) stops leading, and the next one takes over. That
//   is a failover like a kill: attempts in flight are interrupted and the next leader sends them
//   again (same webhook-id);
// - each replica's terms, for invariant 8 (one leader at a time).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Fault } from "./history.js";

/** A leadership line of one replica's log. */
interface LeaderLine {
  who: string;
  t: number;
  kind: "became" | "lost" | "released";
  /** On a `lost leadership` line: how long since its last renew. */
  sinceRenewMs?: number;
}

/** The leadership lines of every log in `dir`, in time order, and each log's last time (by replica). */
export function readLeadership(dir: string): { lines: LeaderLine[]; lastAt: Map<string, number> } {
  const lines: LeaderLine[] = [];
  const lastAt = new Map<string, number>();
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".log"))) {
    const who = file.replace(/\.log$/, "");
    for (const line of readFileSync(join(dir, file), "utf8").split("\n")) {
      const e = parse(line);
      if (!e) continue;
      lastAt.set(who, Math.max(lastAt.get(who) ?? 0, e.t));
      const kind = e.msg === "became leader" ? "became" : e.msg === "released the leader Lease" ? "released" : e.msg?.startsWith("lost leadership") ? "lost" : undefined;
      if (kind) lines.push({ who, t: e.t, kind, ...(typeof e.sinceRenewMs === "number" ? { sinceRenewMs: e.sinceRenewMs } : {}) });
    }
  }
  return { lines: lines.sort((a, b) => a.t - b.t), lastAt };
}

/** A log line's time and fields, or undefined for what is not one of ours. */
function parse(line: string): { t: number; msg?: string; sinceRenewMs?: number } | undefined {
  if (!line.startsWith("{")) return undefined;
  try {
    const e = JSON.parse(line) as { time?: string; msg?: string; sinceRenewMs?: number };
    const t = e.time ? Date.parse(e.time) : NaN;
    return Number.isFinite(t) ? { ...e, t } : undefined;
  } catch {
    return undefined;
  }
}

/** One "lease-lost" fault per `lost leadership` line, lasting until the next `became leader`. */
export function leaseLosses({ lines }: { lines: LeaderLine[] }): Fault[] {
  return lines.flatMap((e, i) => {
    if (e.kind !== "lost") return [];
    const next = lines.slice(i + 1).find((x) => x.kind === "became");
    return [{ kind: "lease-lost" as const, target: e.who, start: e.t, ...(next ? { end: next.t } : {}) }];
  });
}

/** One replica's term as leader, read from its log. */
export interface Term {
  /** The log file's name: one process (replica and incarnation). */
  who: string;
  /** When it logged `became leader`. */
  from: number;
  /** When the term ended at the latest (see leaderTerms). */
  to: number;
  /** What ended it: "lost" (not renewed in time), "released", or "log end" (killed, or still leading at the end). */
  end: "lost" | "released" | "log end";
}

/**
 * Each replica's terms: from a `became leader` line to the end of that term, which is, for a
 * `lost leadership` line, its last renew (the line's time less its `sinceRenewMs`) plus the renew
 * deadline: however late the replica noticed (a pause), it led no longer than that, and no other
 * replica may take the Lease before; for `released the leader Lease`, then; else the log's last
 * line (the process was killed, or led to the end).
 */
export function leaderTerms({ lines, lastAt }: { lines: LeaderLine[]; lastAt: Map<string, number> }, renewDeadlineMs: number): Term[] {
  const terms: Term[] = [];
  const open = new Map<string, number>();
  for (const e of lines) {
    const from = open.get(e.who);
    if (e.kind === "became") {
      if (from === undefined) open.set(e.who, e.t);
      continue;
    }
    if (from === undefined) continue;
    open.delete(e.who);
    if (e.kind === "lost") terms.push({ who: e.who, from, to: Math.min(e.t, e.t - (e.sinceRenewMs ?? 0) + renewDeadlineMs), end: "lost" });
    else terms.push({ who: e.who, from, to: e.t, end: "released" });
  }
  for (const [who, from] of open) terms.push({ who, from, to: lastAt.get(who) ?? from, end: "log end" });
  return terms.sort((a, b) => a.from - b.from);
}

/**
 * Invariant 8's check: terms that began while another replica's term had not ended (more than
 * `slackMs` before its end, for the log's clock and line order; a second for a release, whose line
 * is written once its write is answered, when a standby may have taken the Lease already). Two
 * leaders at once is what lets a delivery go out twice without a crash.
 */
export function overlappingTerms(terms: Term[], slackMs = 100): Array<{ term: Term; during: Term }> {
  const found: Array<{ term: Term; during: Term }> = [];
  for (const term of terms) {
    const during = terms.find((o) => o.who !== term.who && o.from < term.from && term.from < o.to - (o.end === "released" ? Math.max(slackMs, 1_000) : slackMs));
    if (during) found.push({ term, during });
  }
  return found;
}
