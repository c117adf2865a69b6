// The seven invariants of issue 13 and one found since, checked over the recorded history.
// Overdue (2) runs every few seconds while the soak runs; Succeeded-is-final (4) and the status
// bounds of (6) run on every watch event (history.ts); memory (7) is sampled by run.ts; one leader
// at a time (8) is read from the operators' logs (leases.ts); the rest run at the end, after the
// settle phase.
import { createHmac } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { isTerminal, type DeliveryRecord, type History, type ReceivedRequest, type SubRecord, type SubState } from "./history.js";
import type { SubPlan } from "./workload.js";

/** Invariant 2's bound: an admitted delivery is attempted by nextAttemptAt (or creation) + this. */
export const OVERDUE_BOUND_MS = 10_000;
/** Around a fault (from its start to this long after its end) no delivery is called overdue. */
export const FAULT_SHADOW_MS = 20_000;
/** How long after a status is seen the harness allows for the operator to act on it. */
export const PROPAGATION_SLACK_MS = 3_000;
/** How much later than the operator the harness's own watch may see a change. */
export const WATCH_LAG_MS = 1_000;

export const INVARIANTS: Record<number, string> = {
  1: "every delivery ends terminal (or waits with a reason); counts agree with the receivers",
  2: `no delivery overdue (attempted by nextAttemptAt + ${OVERDUE_BOUND_MS / 1000} s when admitted)`,
  3: "payload byte-exact, signature verifies, one webhook-id per delivery",
  4: "Succeeded is final",
  5: "duplicates only around a crash, <= maxInFlight per endpoint per crash",
  6: "attempts within policy; none while paused or breaker Open",
  7: "memory within budget; metrics agree with status",
  8: "one leader at a time: no replica becomes leader while another's term lasts",
};

/** Faults around which a delivery may be sent again; "lease-lost" is a failover the load caused. */
const CRASHES = ["leader-sigkill", "leader-sigterm", "leader-sigstop", "apiserver-restart", "etcd-restart", "lease-lost"] as const;

function statesIn(sub: SubRecord | undefined, from: number, to: number): SubState[] {
  if (!sub) return [];
  const before = sub.states.filter((s) => s.t <= from).at(-1);
  return [...(before ? [before] : []), ...sub.states.filter((s) => s.t > from && s.t <= to)];
}

/** Most requests open at once on one endpoint during [from, to]. */
function peakOpen(reqs: ReceivedRequest[], from: number, to: number): number {
  const edges: Array<[number, number]> = [];
  for (const r of reqs) {
    const end = r.finAt ?? Infinity;
    if (r.t > to || end < from) continue;
    edges.push([r.t, 1], [end, -1]);
  }
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let open = 0;
  let peak = 0;
  for (const [, d] of edges) peak = Math.max(peak, (open += d));
  return peak;
}

export class OverdueChecker {
  private readonly flagged = new Set<string>();
  constructor(private readonly h: History) {}

  check(now: number): void {
    const byEndpoint = new Map<string, ReceivedRequest[]>();
    for (const r of this.h.requests.values()) {
      const list = byEndpoint.get(r.endpoint) ?? [];
      list.push(r);
      byEndpoint.set(r.endpoint, list);
    }
    for (const d of this.h.deliveries.values()) this.checkOne(d, now, byEndpoint);
  }

  private checkOne(d: DeliveryRecord, now: number, byEndpoint: Map<string, ReceivedRequest[]>): void {
    const last = d.states.at(-1);
    if (!last || last.deleted || isTerminal(last.phase)) return;
    const due = last.nextAttemptAt ?? (last.lastNumber === 0 ? d.createdAt : undefined);
    if (due === undefined || now < due + OVERDUE_BOUND_MS) return;
    const flagKey = `${d.key} ${due}`;
    if (this.flagged.has(flagKey)) return;
    const sub = this.h.subFor(d.ns, d.sub);
    const endpoint = `${d.ns}.${d.sub}`;
    const reqs = byEndpoint.get(endpoint) ?? [];
    // Evidence of an attempt: a request with its id, or a newer attempt in the status.
    if (reqs.some((r) => r.wid === d.id && r.t >= due - 1_000)) return;
    const from = due - FAULT_SHADOW_MS;
    if (this.h.faults.some((f) => f.start <= now && (f.end ?? Infinity) + FAULT_SHADOW_MS >= from)) return;
    const subStates = statesIn(sub, from, now);
    if (subStates.length === 0) return;
    if (subStates.some((s) => s.paused || s.rateLimited || (s.breaker !== undefined && s.breaker !== "Closed") || s.health === "Disabled")) return;
    const maxInFlight = Math.min(...subStates.map((s) => s.maxInFlight));
    if (peakOpen(reqs, due - 1_000, now) >= maxInFlight) return;
    // A Pending delivery that waits with a reason (subscription missing, Secret not ready) is not due.
    if (last.phase === "Pending" && last.cond && last.cond.reason !== "Pending" && last.lastNumber === 0 && last.nextAttemptAt === undefined) return;
    this.flagged.add(flagKey);
    this.h.violate(
      2,
      d.key,
      `${last.phase ?? "no phase"} delivery due at ${new Date(due).toISOString()} not attempted ${((now - due) / 1000).toFixed(1)} s later; subscription admitted it (not paused, breaker Closed, ${peakOpen(reqs, due - 1_000, now)} < maxInFlight ${maxInFlight} open), no fault since ${new Date(from).toISOString()}`,
    );
  }
}

// ---------------------------------------------------------------------------------------------
// end-of-run checks

export interface EndContext {
  plans: Map<string, SubPlan>;
}

/** Checks 1, 3, 5 and 6 (the receiver side) over the whole history. */
export function checkAtEnd(h: History, ctx: EndContext): void {
  const byId = h.requestsById();
  const seen = new Set<string>();
  for (const d of h.deliveries.values()) {
    const k = `${d.ns}.${d.sub} ${d.id}`;
    seen.add(k);
    checkDelivery(h, d, byId.get(k) ?? [], ctx);
  }
  for (const [key, acc] of h.accepted) {
    if (!h.deliveries.has(key)) h.violate(1, key, `created (${acc.via}) at ${new Date(acc.at).toISOString()} but never seen by the watch: lost`);
  }
  // A request whose id belongs to no delivery of that endpoint: the id changed, or a ghost.
  for (const [k, reqs] of byId) {
    if (seen.has(k)) continue;
    const r = reqs[0]!;
    if (!r.endpoint.includes(".")) continue;
    h.violate(3, `${r.endpoint}`, `${reqs.length} request(s) with webhook-id ${JSON.stringify(r.wid)} match no delivery of this endpoint (first at ${new Date(r.t).toISOString()}, path ${r.path})`);
  }
  checkDuplicates(h, byId);
  checkPausedAndOpen(h);
}

function checkDelivery(h: History, d: DeliveryRecord, reqs: ReceivedRequest[], ctx: EndContext): void {
  const last = d.states.at(-1);
  const plan = ctx.plans.get(`${d.ns}/${d.sub}`);
  if (!last) return;
  // 1: terminal, or waiting with a condition that says why.
  if (!isTerminal(last.phase) && !last.deleted) {
    const why = last.cond && last.cond.status === "Unknown" && last.cond.reason && last.cond.message;
    if (!why || last.nextAttemptAt !== undefined) {
      h.violate(1, d.key, `not finished after the settle phase: phase ${last.phase ?? "none"}, attempts ${last.attempts ?? 0}, nextAttemptAt ${last.nextAttemptAt ? new Date(last.nextAttemptAt).toISOString() : "none"}, condition ${JSON.stringify(last.cond)}`);
    }
  }
  const ok2xx = reqs.filter((r) => r.status >= 200 && r.status < 300);
  if (last.phase === "Succeeded") {
    if (ok2xx.length === 0) h.violate(1, d.key, `Succeeded but the receiver answered no request with webhook-id ${d.id} with 2xx (${reqs.length} requests)`);
    else if (last.lastStatus !== undefined && !ok2xx.some((r) => r.status === last.lastStatus)) h.violate(1, d.key, `lastAttempt.responseStatus ${last.lastStatus} is not a status the receiver gave (${ok2xx.map((r) => r.status).join(",")})`);
  }
  const crashes = h.faultsBetween(d.createdAt, Infinity, [...CRASHES]).length;
  if (reqs.length > last.lastNumber + crashes) {
    h.violate(1, d.key, `receiver logged ${reqs.length} requests, status numbers ${last.lastNumber} attempts (+${crashes} allowed for crashes)`);
  }
  // 6: requests within maxAttempts + replays + interruptions (+ crashes).
  const sub = h.subFor(d.ns, d.sub);
  const maxAttempts = Math.max(0, ...(sub?.states ?? []).map((s) => s.maxAttempts));
  const replays = Math.max(d.replayAts.size, (last.replays ?? 0) + (last.lastReplay?.result === "Succeeded" ? 1 : 0));
  const allowed = maxAttempts + replays + (last.interruptions ?? 0) + crashes;
  if (reqs.length > allowed) h.violate(6, d.key, `${reqs.length} requests > maxAttempts ${maxAttempts} + replays ${replays} + interruptions ${last.interruptions ?? 0} + crashes ${crashes}`);
  // 3: byte-exact payload, valid UTF-8, signature.
  const body = h.bodies.get(d.key);
  for (const r of reqs) {
    if (r.sha !== d.expectedSha) {
      h.violate(3, d.key, `request ${r.seq} at ${new Date(r.t).toISOString()}: body ${r.len} bytes sha256 ${r.sha.slice(0, 12)}, expected ${d.expectedLen} bytes ${d.expectedSha.slice(0, 12)}${r.utf8 ? "" : " (not valid UTF-8)"}${r.fffd ? ` with ${r.fffd} U+FFFD replacement characters (the payload has none)` : ""}; payload kind ${d.payloadKind ?? "?"}`);
      break;
    }
    if (plan && body) {
      const bad = signatureProblem(r, body, plan);
      if (bad) {
        h.violate(3, d.key, `request ${r.seq}: ${bad}`);
        break;
      }
    }
  }
}

function signatureProblem(r: ReceivedRequest, body: Buffer, plan: SubPlan): string | undefined {
  if (plan.scheme === "HMACSHA256Hex") {
    // The default signedContent, TimestampAndBody: "<x-webhook-timestamp>.<body>".
    const ok = plan.secrets.some((s) => `sha256=${createHmac("sha256", Buffer.from(s.slice(6), "base64")).update(`${r.wts ?? ""}.`).update(body).digest("hex")}` === r.xsig);
    return ok ? undefined : `x-webhook-signature ${r.xsig ?? "(none)"} verifies with no secret of the subscription`;
  }
  const headers = { "webhook-id": r.wid ?? "", "webhook-timestamp": r.wts ?? "", "webhook-signature": r.wsig ?? "" };
  for (const s of plan.secrets) {
    try {
      // Timestamp tolerance is 5 minutes; the soak verifies long after, so check at the request's time.
      const wh = new Webhook(s);
      const sig = wh.sign(headers["webhook-id"], new Date(Number(headers["webhook-timestamp"]) * 1000), body.toString("utf8"));
      if (headers["webhook-signature"].split(" ").includes(sig)) return undefined;
    } catch {
      /* next secret */
    }
  }
  return `webhook-signature ${r.wsig ?? "(none)"} verifies with no secret of the subscription (standardwebhooks)`;
}

/** 5: a second 2xx for one delivery only after a crash, at most maxInFlight per endpoint per crash. */
function checkDuplicates(h: History, byId: Map<string, ReceivedRequest[]>): void {
  const perCrash = new Map<string, number>();
  for (const d of h.deliveries.values()) {
    const reqs = byId.get(`${d.ns}.${d.sub} ${d.id}`) ?? [];
    const sub = h.subFor(d.ns, d.sub);
    const timeout = Math.min(...(sub?.states ?? [{ timeoutMs: 10_000 }]).map((s) => s.timeoutMs));
    // Delivered for sure: answered 2xx, and finished within the timeout counted from the
    // attempt's start (webhook-timestamp, whole seconds, so the start is at or after it). A 2xx
    // that the operator's timeout had already cut off is not a delivery but a retry.
    const delivered = reqs.filter((r) => r.status >= 200 && r.status < 300 && r.fin === "finish" && (r.finAt ?? Infinity) - Number(r.wts ?? 0) * 1000 < timeout - 200);
    for (let i = 1; i < delivered.length; i++) {
      const first = delivered[0]!;
      const dup = delivered[i]!;
      const crash = h.faultsBetween(first.t - 5_000, dup.t, [...CRASHES])[0];
      if (!crash) {
        h.violate(5, d.key, `delivered twice with no crash in between: 2xx at ${new Date(first.t).toISOString()} and ${new Date(dup.t).toISOString()} (webhook-id ${d.id})`);
        continue;
      }
      const k = `${d.ns}.${d.sub} ${crash.start}`;
      const n = (perCrash.get(k) ?? 0) + 1;
      perCrash.set(k, n);
      const maxInFlight = Math.max(...(sub?.states ?? [{ maxInFlight: 10 }]).map((s) => s.maxInFlight));
      if (n === maxInFlight + 1) h.violate(5, d.key, `more than maxInFlight ${maxInFlight} duplicates on ${d.ns}/${d.sub} around the ${crash.kind} at ${new Date(crash.start).toISOString()}`);
    }
  }
}

/** How far a replay's request may be from the time its delivery's status.lastReplay.at records. */
const REPLAY_SLACK_MS = 10_000;

/** 6: no request starts while the subscription is paused or its breaker Open (as the status said); a replay may pass the breaker. */
function checkPausedAndOpen(h: History): void {
  // A replay is sent past the breaker by design (docs/operations.md, "you asked for it"): its
  // request, within REPLAY_SLACK_MS of a status.lastReplay.at of its delivery, is no breach.
  const replays = new Map<string, number[]>();
  for (const d of h.deliveries.values()) if (d.replayAts.size) replays.set(d.id, [...d.replayAts].map((at) => Date.parse(at)));
  const replayed = (r: { t: number; wid?: string }) => (r.wid !== undefined && replays.get(r.wid)?.some((at) => Math.abs(at - r.t) <= REPLAY_SLACK_MS)) ?? false;
  for (const sub of h.subscriptions.values()) {
    const reqs = [...h.requests.values()].filter((r) => r.endpoint === sub.endpoint);
    for (let i = 0; i < sub.states.length; i++) {
      const s = sub.states[i]!;
      const until = sub.states[i + 1]?.t ?? Infinity;
      const from = s.t + PROPAGATION_SLACK_MS;
      if (s.paused) {
        // The next state (unpaused) reaches the operator before it reaches our own watch. A pause
        // written around an API server or etcd outage reaches the operator only once its watch is
        // back: from 10 s before the pause to a request, an outage excuses it until FAULT_SHADOW_MS
        // after the outage's end (CI saw a pause written 1.6 s after an API server restart and
        // just before an etcd restart reach the operator after the second one).
        const unseen = (r: { t: number }) => h.faultsBetween(s.t - 10_000, r.t, ["apiserver-restart", "etcd-restart"]).some((f) => r.t <= (f.end ?? Infinity) + FAULT_SHADOW_MS);
        const bad = reqs.filter((r) => r.t > from && r.t < until - WATCH_LAG_MS && !r.path.includes("probe") && !unseen(r));
        if (bad.length) h.violate(6, sub.key, `${bad.length} request(s) while paused (paused seen at ${new Date(s.t).toISOString()}, first request ${new Date(bad[0]!.t).toISOString()}, webhook-id ${bad[0]!.wid})`);
      }
      // An edit of the url may reset the breaker before the status says so.
      const edited = sub.states.some((o) => o.url !== s.url && o.t > s.t - 10_000 && o.t < until);
      // A Disabled endpoint is probed every WEBHOOK_HEALTH_PROBE_INTERVAL_MS whatever the
      // breaker's cooldown says (plan.ts), so only a Closed-health breaker window is checked.
      if (s.breaker === "Open" && s.breakerNextProbe !== undefined && !edited && s.health !== "Disabled") {
        const end = Math.min(until, s.breakerNextProbe - 1_000);
        const bad = reqs.filter((r) => r.t > from && r.t < end && !replayed(r));
        if (bad.length) h.violate(6, sub.key, `${bad.length} request(s) while the breaker was Open (until ${new Date(s.breakerNextProbe).toISOString()}; first at ${new Date(bad[0]!.t).toISOString()})`);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 7: metrics against status, status counts against the deliveries

const BREAKER = { Closed: 0, Open: 1, HalfOpen: 2 } as Record<string, number>;
const HEALTH = { Healthy: 0, Degraded: 1, Disabled: 2 } as Record<string, number>;

export interface Disagreement {
  key: string;
  message: string;
}

type SubStatusLike = { metadata: { name: string; namespace?: string }; status?: { breaker?: { state?: string }; health?: { state?: string }; deliveries?: { pending: number; succeeded: number; deadLettered: number; discarded: number } } };
type DeliveryLike = { metadata: { namespace?: string }; spec?: { subscriptionRef?: { name?: string } }; status?: { phase?: string; finishedAt?: string } };

/**
 * status.deliveries.succeeded and .discarded are cumulative counts the leader keeps in memory and
 * rolls up every few seconds (docs/operations.md): a leader that dies (SIGKILL) loses the
 * increments it had not written yet, those of the deliveries that finished since its last
 * successful rollup. A window per kill: from the kill back one rollup interval and a margin, or
 * from one interval and a margin before the start of an API outage that ended shortly before it
 * (rollups failed from the outage's start and were being retried with backoff; a delivery that
 * finished within an interval before the outage had its rollup still to come: seed 1474577230).
 * The count may fall short by the deliveries finished in a window, never more, and never exceed
 * the truth.
 */
export const ROLLUP_LOSS = { intervalMs: 7_000, outageLookbackMs: 30_000 } as const;
export function rollupLossWindows(faults: Array<{ kind: string; start: number; end?: number }>): Array<[number, number]> {
  const outages = faults.filter((f) => f.kind === "apiserver-restart" || f.kind === "etcd-restart");
  return faults
    .filter((f) => f.kind === "leader-sigkill" || f.kind === "leader-sigstop" || f.kind === "lease-lost")
    .map((k) => {
      const recent = outages.filter((o) => (o.end ?? k.start) >= k.start - ROLLUP_LOSS.outageLookbackMs && o.start <= k.start);
      // Rollups fail from the outage's start: what finished one interval before it was not written yet either.
      const from = Math.min(k.start, ...recent.map((o) => o.start)) - ROLLUP_LOSS.intervalMs;
      return [from, k.start + 1_000] as [number, number];
    });
}
function lostToCrashes(mine: DeliveryLike[], phase: string, windows: Array<[number, number]>): number {
  return mine.filter((d) => {
    if (d.status?.phase !== phase || !d.status.finishedAt) return false;
    const t = Date.parse(d.status.finishedAt);
    return windows.some(([from, to]) => t >= from && t <= to);
  }).length;
}

function metricValue(samples: Array<{ labels: Record<string, string>; value: number }>, ns: string, sub: string): number | undefined {
  return samples.find((s) => s.labels.namespace === ns && s.labels.subscription === sub)?.value;
}

/** What the leader's /metrics and the subscriptions' status say that the deliveries contradict. */
export function metricsDisagreements(
  subs: SubStatusLike[],
  deliveries: DeliveryLike[],
  samples: (name: string) => Array<{ labels: Record<string, string>; value: number }>,
  /** Windows in which a SIGKILLed leader's count increments may be lost (rollupLossWindows). */
  leaderCrashes: Array<[number, number]> = [],
): Disagreement[] {
  const out: Disagreement[] = [];
  const dlq = samples("webhook_dlq_entries");
  const breaker = samples("webhook_breaker_state");
  const health = samples("webhook_endpoint_health");
  for (const s of subs) {
    const ns = s.metadata.namespace ?? "";
    const name = s.metadata.name;
    const key = `${ns}/${name}`;
    const mine = deliveries.filter((d) => d.metadata.namespace === ns && d.spec?.subscriptionRef?.name === name);
    const count = (p: string) => mine.filter((d) => d.status?.phase === p).length;
    const actual = { pending: mine.filter((d) => !isTerminal(d.status?.phase)).length, succeeded: count("Succeeded"), deadLettered: count("DeadLettered"), discarded: count("Discarded") };
    const st = s.status?.deliveries;
    if (st) {
      for (const k of ["pending", "succeeded", "deadLettered", "discarded"] as const) {
        const cumulative = k === "succeeded" || k === "discarded";
        const slack = cumulative ? lostToCrashes(mine, k === "succeeded" ? "Succeeded" : "Discarded", leaderCrashes) : 0;
        if (st[k] > actual[k] || st[k] < actual[k] - slack) {
          out.push({ key, message: `status.deliveries.${k} ${st[k]} but ${actual[k]} deliveries are ${k}${slack ? ` (up to ${slack} may be lost to leader crashes)` : ""}` });
        }
      }
    } else if (mine.length > 0) out.push({ key, message: `no status.deliveries though it has ${mine.length} deliveries` });
    const m = metricValue(dlq, ns, name) ?? 0;
    if (m !== actual.deadLettered) out.push({ key, message: `webhook_dlq_entries ${m} but ${actual.deadLettered} deliveries are DeadLettered` });
    const b = s.status?.breaker?.state;
    const mb = metricValue(breaker, ns, name);
    if (b && mb !== undefined && BREAKER[b] !== mb) out.push({ key, message: `webhook_breaker_state ${mb} but status.breaker.state ${b}` });
    const hs = s.status?.health?.state;
    const mh = metricValue(health, ns, name);
    if (hs && mh !== undefined && HEALTH[hs] !== mh) out.push({ key, message: `webhook_endpoint_health ${mh} but status.health.state ${hs}` });
  }
  return out;
}
