// Leadership changes the faults did not cause: an operator that could not renew its Lease in
// time (a loaded machine, a slow API server) stops leading, and the next one takes over. That is
// a failover like a kill: attempts in flight are interrupted and the next leader sends them
// again (same webhook-id). Read from the operators' own logs (pino JSON lines).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Fault } from "./history.js";

/** One "lease-lost" fault per `lost leadership` line in `dir/*.log`, lasting until the next `became leader`. */
export function leaseLosses(dir: string): Fault[] {
  const events: Array<{ t: number; lost: boolean; who: string }> = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".log"))) {
    for (const line of readFileSync(join(dir, file), "utf8").split("\n")) {
      if (!line.includes("leader")) continue;
      try {
        const e = JSON.parse(line) as { time?: string; msg?: string };
        const lost = e.msg?.startsWith("lost leadership") ?? false;
        if ((lost || e.msg === "became leader") && e.time) events.push({ t: Date.parse(e.time), lost, who: file.replace(/\.log$/, "") });
      } catch {
        // not a log line of ours
      }
    }
  }
  events.sort((a, b) => a.t - b.t);
  return events.flatMap((e, i) => {
    if (!e.lost) return [];
    const next = events.slice(i + 1).find((x) => !x.lost);
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
 * Each replica's terms from its pino log in `dir`: from a `became leader` line to the end of that
 * term, which is, for a `lost leadership` line, its last renew (the line's time less its
 * `sinceRenewMs`) plus the renew deadline: however late the replica noticed (a pause), it led no
 * longer than that, and no other replica may take the Lease before; for `released the leader
 * Lease`, then; else the log's last line (the process was killed, or led to the end).
 */
export function leaderTerms(dir: string, renewDeadlineMs: number): Term[] {
  const terms: Term[] = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".log"))) {
    const who = file.replace(/\.log$/, "");
    let open: number | undefined;
    let last = 0;
    for (const line of readFileSync(join(dir, file), "utf8").split("\n")) {
      let e: { time?: string; msg?: string; sinceRenewMs?: number };
      try {
        e = JSON.parse(line) as typeof e;
      } catch {
        continue; // not a log line of ours
      }
      const t = e.time ? Date.parse(e.time) : NaN;
      if (!Number.isFinite(t)) continue;
      last = Math.max(last, t);
      if (e.msg === "became leader") open ??= t;
      else if (open !== undefined && e.msg?.startsWith("lost leadership")) {
        terms.push({ who, from: open, to: Math.min(t, t - (e.sinceRenewMs ?? 0) + renewDeadlineMs), end: "lost" });
        open = undefined;
      } else if (open !== undefined && e.msg === "released the leader Lease") {
        terms.push({ who, from: open, to: t, end: "released" });
        open = undefined;
      }
    }
    if (open !== undefined) terms.push({ who, from: open, to: last, end: "log end" });
  }
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
