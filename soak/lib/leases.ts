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
