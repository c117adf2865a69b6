// The one-screen summary, and on a violation the trimmed history of the objects involved and the
// command that replays the seed.
import type { DeliveryRecord, History, SubRecord } from "./history.js";
import { INVARIANTS } from "./invariants.js";

const iso = (t: number | undefined): string => (t === undefined ? "-" : new Date(t).toISOString().slice(11, 23));

function deliveryHistory(d: DeliveryRecord, h: History): string[] {
  const lines = [`  delivery ${d.key} (subscription ${d.sub}, webhook-id ${d.id}, type ${d.eventType}, payload ${d.payloadKind ?? "?"}, ${d.expectedLen} bytes, created ${iso(d.createdAt)})`];
  const states = d.states.length > 12 ? [...d.states.slice(0, 4), undefined, ...d.states.slice(-7)] : d.states;
  for (const s of states) {
    if (!s) {
      lines.push(`    ... ${d.states.length - 11} more states`);
      continue;
    }
    lines.push(
      `    ${iso(s.t)} rv=${s.rv} ${s.deleted ? "DELETED" : (s.phase ?? "-")} attempts=${s.attempts ?? 0} #${s.lastNumber} last=${s.lastOutcome ?? "-"}/${s.lastStatus ?? "-"}${s.lastError ? `(${s.lastError.slice(0, 60)})` : ""} next=${iso(s.nextAttemptAt)}${s.cond ? ` cond=${s.cond.status}/${s.cond.reason}` : ""}${s.lastReplay ? ` replay=${s.lastReplay.result ?? "?"}` : ""}${s.deadLetterReason ? ` dl=${s.deadLetterReason}` : ""}${s.discardReason ? ` discard=${s.discardReason}` : ""}`,
    );
  }
  const reqs = [...h.requests.values()].filter((r) => r.endpoint === `${d.ns}.${d.sub}` && r.wid === d.id).sort((a, b) => a.t - b.t);
  for (const r of reqs.slice(-8)) lines.push(`    ${iso(r.t)} receiver ${r.receiver} ${r.path} -> ${r.kind}/${r.status} ${r.fin ?? "open"}${r.finAt ? ` ${r.finAt - r.t}ms` : ""} body ${r.len}B ${r.sha.slice(0, 10)}${r.utf8 ? "" : " INVALID-UTF8"}`);
  if (reqs.length > 8) lines.push(`    (${reqs.length - 8} earlier requests)`);
  return lines;
}

function subscriptionHistory(s: SubRecord): string[] {
  const lines = [`  subscription ${s.key}`];
  for (const st of s.states.slice(-8)) {
    lines.push(`    ${iso(st.t)} gen=${st.generation} paused=${st.paused} breaker=${st.breaker ?? "-"}${st.breakerNextProbe ? `(probe ${iso(st.breakerNextProbe)})` : ""} health=${st.health ?? "-"} counts=${JSON.stringify(st.counts ?? {})} url=${st.url}`);
  }
  return lines;
}

export interface Summary {
  seed: number;
  replay: string;
  elapsedS: number;
  workload: Record<string, number>;
  faults: Record<string, number>;
  requests: number;
  phases: Record<string, number>;
  peakRssMiB: number;
  tmp: string;
}

export function render(h: History, s: Summary): string {
  const out: string[] = [];
  out.push("", `hookline soak: seed ${s.seed}, ${s.elapsedS.toFixed(0)} s`);
  out.push(`deliveries ${h.deliveries.size} (${Object.entries(s.phases).map(([k, v]) => `${k} ${v}`).join(", ")}); requests at receivers ${s.requests}`);
  out.push(`workload ${Object.entries(s.workload).map(([k, v]) => `${k} ${v}`).join(", ")}`);
  out.push(`faults ${Object.entries(s.faults).map(([k, v]) => `${k} ${v}`).join(", ") || "none"}; operator peak RSS ${s.peakRssMiB.toFixed(0)} MiB`);
  for (const [n, text] of Object.entries(INVARIANTS)) {
    const broken = h.violations.filter((v) => v.invariant === Number(n));
    out.push(`  ${broken.length ? "BROKEN" : "held  "} ${n}. ${text}${broken.length ? ` (${broken.length} violation${broken.length > 1 ? "s" : ""}, ${new Set(broken.map((b) => b.key)).size} objects)` : ""}`);
  }
  if (h.violations.length === 0) {
    out.push(`result: every invariant held (seed ${s.seed})`);
    return out.join("\n");
  }
  out.push("", "violations (first 3 per invariant, with the history of the objects involved):");
  for (const n of Object.keys(INVARIANTS).map(Number)) {
    const broken = h.violations.filter((v) => v.invariant === n);
    for (const v of broken.slice(0, 3)) {
      out.push(`[${n}] ${v.key}: ${v.message}`);
      const d = h.deliveries.get(v.key);
      if (d) {
        out.push(...deliveryHistory(d, h));
        const sub = h.subFor(d.ns, d.sub);
        if (sub) out.push(...subscriptionHistory(sub));
      } else {
        const sub = h.subscriptions.get(v.key);
        if (sub) out.push(...subscriptionHistory(sub));
      }
    }
    if (broken.length > 3) out.push(`[${n}] ... and ${broken.length - 3} more`);
  }
  out.push("", `faults: ${h.faults.map((f) => `${f.kind}(${f.target}) ${iso(f.start)}-${iso(f.end)}`).join("; ")}`);
  out.push(`logs and control plane data kept in ${s.tmp}`);
  out.push(`result: ${h.violations.length} violation(s). Replay this seed (same workload and fault schedule; timing varies): ${s.replay}`);
  return out.join("\n");
}
