// Invariant 8 (one leader at a time) read from operator logs: the run that found two leaders
// (seed 1434831314, 2026-12-07) flagged, and the ways a term ends that are not two leaders
// (a pause noticed late, a release, a kill) not flagged.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { leaderTerms, leaseLosses, overlappingTerms, readLeadership } from "./leases.js";

const RENEW_DEADLINE_MS = 3_000;
const line = (time: string, msg: string, extra: Record<string, unknown> = {}) => JSON.stringify({ level: "info", time: `2026-12-07T${time}Z`, msg, ...extra });

const dirs: string[] = [];
function logs(files: Record<string, string[]>): string {
  const dir = mkdtempSync(join(tmpdir(), "leases-test-"));
  dirs.push(dir);
  for (const [name, lines] of Object.entries(files)) writeFileSync(join(dir, `${name}.log`), [...lines, "not json", ""].join("\n"));
  return dir;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("leaderTerms and overlappingTerms (soak invariant 8)", () => {
  it("flags the replica that read a late acquire and led beside the one that had taken over (the run that found it)", () => {
    const d = logs({
      "soak-a-2": [
        line("17:57:12.758", "became leader"),
        line("17:57:15.761", "lost leadership: could not renew the Lease within the renew deadline; delivery work stops", { sinceRenewMs: 3003 }),
        // Stopped 17:57:29.034-17:57:36.083 with its acquire on the way; read the answer at SIGCONT.
        line("17:57:36.071", "became leader"),
        line("17:57:39.411", "lost leadership: could not renew the Lease within the renew deadline; delivery work stops", { sinceRenewMs: 3340 }),
      ],
      "soak-b-2": [line("17:57:33.980", "became leader"), line("17:57:48.091", "released the leader Lease")],
    });
    const leadership = readLeadership(d);
    const found = overlappingTerms(leaderTerms(leadership, RENEW_DEADLINE_MS));
    expect(found.map((f) => [f.term.who, f.during.who, f.during.end])).toEqual([["soak-a-2", "soak-b-2", "released"]]);
    // The same lines give the failovers the faults did not cause: each loss until the next leader.
    expect(leaseLosses(leadership).map((f) => [f.target, new Date(f.start).toISOString().slice(11, 23), f.end && new Date(f.end).toISOString().slice(11, 23)])).toEqual([
      ["soak-a-2", "17:57:15.761", "17:57:33.980"],
      ["soak-a-2", "17:57:39.411", undefined],
    ]);
  });

  it("a leader paused past its Lease ends its term at its last renew + the renew deadline, however late it logs it: the next leader is not flagged", () => {
    const d = logs({
      // Renewed last at 10:00:01.000, stopped, logged the loss 8 s later.
      x: [line("10:00:00.000", "became leader"), line("10:00:09.000", "lost leadership: could not renew the Lease within the renew deadline; delivery work stops", { sinceRenewMs: 8_000 })],
      // Took over once the Lease expired (4 s after the last renew it saw).
      y: [line("10:00:05.100", "became leader"), line("10:00:20.000", "released the leader Lease")],
    });
    const terms = leaderTerms(readLeadership(d), RENEW_DEADLINE_MS);
    expect(terms.map((t) => [t.who, t.end, new Date(t.to).toISOString().slice(11, 23)])).toEqual([
      ["x", "lost", "10:00:04.000"],
      ["y", "released", "10:00:20.000"],
    ]);
    expect(overlappingTerms(terms)).toEqual([]);
  });

  it("a release or a kill ends a term; a later leader is not flagged, an earlier start is", () => {
    const d = logs({
      a: [line("10:00:00.000", "became leader"), line("10:00:01.000", "other line"), line("10:00:02.000", "released the leader Lease")],
      b: [line("10:00:02.050", "became leader"), line("10:00:07.000", "last line before SIGKILL")],
      c: [line("10:00:12.000", "became leader")],
    });
    expect(overlappingTerms(leaderTerms(readLeadership(d), RENEW_DEADLINE_MS))).toEqual([]);
    const d2 = logs({
      a: [line("10:00:00.000", "became leader"), line("10:00:05.000", "released the leader Lease")],
      b: [line("10:00:03.000", "became leader"), line("10:00:06.000", "released the leader Lease")],
    });
    expect(overlappingTerms(leaderTerms(readLeadership(d2), RENEW_DEADLINE_MS)).map((f) => f.term.who)).toEqual(["b"]);
  });
});
