// The pure part of `npm run bench -- --mode stream`: each replica's share of the deliveries,
// deliveries per second from first publish to last arrival, and the goals (issue 16)
// evaluated on measured numbers, one row each, for the table and the saved results.
import { round } from "./util.js";

/** Each count as a fraction of their sum (all 0 when the sum is 0), rounded to 0.001. */
export function shares(counts: number[]): number[] {
  const total = counts.reduce((s, n) => s + n, 0);
  return counts.map((n) => (total > 0 ? Math.round((n / total) * 1000) / 1000 : 0));
}

/** Whether every share lies within [low, high] (inclusive); false for no shares. */
export function sharesWithin(s: number[], low: number, high: number): boolean {
  return s.length > 0 && s.every((x) => x >= low && x <= high);
}

/** Deliveries per second from the first send to the last arrival (ms timestamps); NaN when undefined. */
export function ratePerSecond(count: number, firstSentAt: number, lastArrivalAt: number): number {
  const seconds = (lastArrivalAt - firstSentAt) / 1000;
  return count > 0 && seconds > 0 ? count / seconds : NaN;
}

/** Ids that arrived more than once, from arrival counts. */
export function duplicateIds(arrivals: Map<string, { count: number }>): string[] {
  return [...arrivals].filter(([, a]) => a.count > 1).map(([id]) => id);
}

export interface StreamMeasured {
  crDeliveriesPerSecond: number;
  httpCeilingPerSecond: number;
  streamDeliveriesPerSecond: number;
  halfRateP99Ms: number;
  cpuSecondsPer1000: number;
  /** One replica draining a stored backlog (nothing published meanwhile): first arrival → last. */
  backlog?: { deliveriesPerSecond: number; cpuSecondsPer1000: number };
  twoReplicas: { deliveriesPerSecond: number; cpuSecondsPer1000: number; shares: number[]; duplicates: number };
}

export interface GoalRow {
  measure: string;
  value: string;
  goal: string;
  /** undefined: reported, no goal. */
  pass: boolean | undefined;
}

const num = (x: number, digits = 1): string => (Number.isFinite(x) ? String(Math.round(x * 10 ** digits) / 10 ** digits) : "n/a");

/** The goals, each on a measured number: a NaN never passes. */
export function streamGoals(m: StreamMeasured): GoalRow[] {
  const vsCr = m.streamDeliveriesPerSecond / m.crDeliveriesPerSecond;
  const ofHttp = m.streamDeliveriesPerSecond / m.httpCeilingPerSecond;
  const t = m.twoReplicas;
  return [
    { measure: "CR mode deliveries/s (same run)", value: num(m.crDeliveriesPerSecond), goal: "(baseline)", pass: undefined },
    { measure: "HTTP ceiling: signed POSTs/s (same run)", value: num(m.httpCeilingPerSecond), goal: "(ceiling)", pass: undefined },
    { measure: "Stream mode deliveries/s, one replica (first publish → last arrival)", value: num(m.streamDeliveriesPerSecond), goal: "(see the next two rows)", pass: undefined },
    { measure: "… × CR mode", value: `×${num(vsCr, 2)}`, goal: "≥ ×10", pass: Number.isFinite(vsCr) && vsCr >= 10 },
    { measure: "… of the HTTP ceiling", value: num(ofHttp, 3), goal: "≥ 0.25", pass: Number.isFinite(ofHttp) && ofHttp >= 0.25 },
    { measure: "p99 publish → receiver at half the maximum rate (ms)", value: num(m.halfRateP99Ms), goal: "< 20", pass: Number.isFinite(m.halfRateP99Ms) && m.halfRateP99Ms < 20 },
    { measure: "Operator CPU seconds per 1,000 deliveries, one replica", value: num(m.cpuSecondsPer1000, 3), goal: "(reported)", pass: undefined },
    ...(m.backlog ? backlogRows(m.backlog, m.httpCeilingPerSecond) : []),
    { measure: "Two replicas: deliveries/s", value: num(t.deliveriesPerSecond), goal: "(reported)", pass: undefined },
    { measure: "Two replicas: CPU seconds per 1,000 deliveries (both together)", value: num(t.cpuSecondsPer1000, 3), goal: "(reported)", pass: undefined },
    { measure: "Two replicas: each one's share of the deliveries", value: t.shares.map((s) => num(s * 100, 1) + "%").join(" / "), goal: "each 40-60%", pass: t.shares.length === 2 && sharesWithin(t.shares, 0.4, 0.6) },
    { measure: "Two replicas: webhook-ids that arrived twice", value: String(t.duplicates), goal: "0", pass: t.duplicates === 0 },
  ];
}

/** One replica draining a stored backlog, with no publisher beside it: its rate, of the HTTP ceiling (issue 29 asks 0.5 of it), CPU. */
function backlogRows(b: { deliveriesPerSecond: number; cpuSecondsPer1000: number }, ceiling: number): GoalRow[] {
  const of = b.deliveriesPerSecond / ceiling;
  return [
    { measure: "One replica draining a stored backlog, nothing published meanwhile: deliveries/s (first arrival → last)", value: num(b.deliveriesPerSecond), goal: "(see the next row)", pass: undefined },
    { measure: "… of the HTTP ceiling", value: num(of, 3), goal: "≥ 0.5", pass: Number.isFinite(of) && of >= 0.5 },
    { measure: "… operator CPU seconds per 1,000 deliveries", value: num(b.cpuSecondsPer1000, 3), goal: "(reported)", pass: undefined },
  ];
}

export function goalTable(rows: GoalRow[]): string {
  const verdict = (p: boolean | undefined) => (p === undefined ? "-" : p ? "pass" : "**FAIL**");
  return ["| Measure | Value | Goal | Result |", "| --- | --- | --- | --- |", ...rows.map((r) => `| ${r.measure} | ${r.value} | ${r.goal} | ${verdict(r.pass)} |`)].join("\n");
}

/** CPU seconds so far: the whole machine (every core) and the processes a stream delivery passes. */
export interface MachineCpuSample {
  machine: number;
  operator: number;
  natsServer: number;
  receiver: number;
  /** The operator's read and write system calls so far (sockets, its log pipe). */
  operatorReads: number;
  operatorWrites: number;
}

/**
 * Where the machine's CPU goes per delivery while one replica drains a stored backlog: the
 * operator, nats-server, the receiver, everything else (the benchmark, the control plane, the
 * kernel's own work), and the whole machine; and the rate its cores would allow at that cost, all
 * of them busy. Half the HTTP ceiling is out of reach of any layout of the work (threads,
 * processes) while the whole machine's cost per delivery is above `halfCeilingNeedsPer1000`.
 */
export interface MachineCpu {
  cores: number;
  operator: number;
  natsServer: number;
  receiver: number;
  rest: number;
  machine: number;
  /** The operator's read and write system calls per delivery. */
  operatorReadsPerDelivery: number;
  operatorWritesPerDelivery: number;
  atMostPerSecond: number;
  atMostOfCeiling: number;
  halfCeilingNeedsPer1000: number;
  /**
   * What is left of `halfCeilingNeedsPer1000` for the operator once nats-server, the receiver and
   * everything else take what they took here: the operator's whole per-delivery budget at half
   * the ceiling (set it against a bare signed POST's client cost, the ceiling's `client`).
   */
  operatorRoomPer1000: number;
}

export function machineCpu(a: MachineCpuSample, b: MachineCpuSample, deliveries: number, httpCeilingPerSecond: number, cores: number): MachineCpu {
  const per1000 = (x: number) => round((x / deliveries) * 1000, 3);
  const machine = b.machine - a.machine;
  const operator = b.operator - a.operator;
  const natsServer = b.natsServer - a.natsServer;
  const receiver = b.receiver - a.receiver;
  const atMost = machine > 0 ? (cores * deliveries) / machine : NaN;
  return {
    cores,
    operator: per1000(operator),
    natsServer: per1000(natsServer),
    receiver: per1000(receiver),
    rest: per1000(machine - operator - natsServer - receiver),
    machine: per1000(machine),
    operatorReadsPerDelivery: round((b.operatorReads - a.operatorReads) / deliveries, 2),
    operatorWritesPerDelivery: round((b.operatorWrites - a.operatorWrites) / deliveries, 2),
    atMostPerSecond: round(atMost, 0),
    atMostOfCeiling: round(atMost / httpCeilingPerSecond, 3),
    halfCeilingNeedsPer1000: round((cores / (httpCeilingPerSecond / 2)) * 1000, 3),
    operatorRoomPer1000: round((cores / (httpCeilingPerSecond / 2)) * 1000 - ((machine - operator) / deliveries) * 1000, 3),
  };
}
