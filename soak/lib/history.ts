// The history recorder: every state of every delivery and subscription the watches saw (with the
// time the harness saw it), every request the receivers logged, and every fault with its window.
// Checks that need the order of events (Succeeded is final; attempts within maxAttempts) run here
// as each event arrives; the rest run over this history (invariants.ts).
import { createHash } from "node:crypto";
import { closeSync, existsSync, openSync, readSync, statSync } from "node:fs";
import type { KubeObject } from "../../src/kube/types.js";
import { parseDuration } from "./args.js";
import type { WatchEventType } from "./watch.js";

export interface DeliveryState {
  t: number;
  rv: string;
  phase?: string;
  attempts?: number;
  nextAttemptAt?: number;
  lastNumber: number;
  lastStatus?: number;
  lastOutcome?: string;
  lastError?: string;
  replays?: number;
  interruptions?: number;
  lastReplay?: { at: string; result?: string; reason: string };
  cond?: { status: string; reason: string; message?: string };
  deadLetterReason?: string;
  discardReason?: string;
  deleted?: boolean;
}

export interface DeliveryRecord {
  key: string;
  ns: string;
  name: string;
  sub: string;
  uid: string;
  /** The webhook id: spec.eventId, else metadata.uid. */
  id: string;
  eventType: string;
  createdAt: number;
  /** SHA-256 and length of the body the operator must send (built as the operator documents it). */
  expectedSha: string;
  expectedLen: number;
  payloadKind?: string;
  states: DeliveryState[];
  /** Distinct replays seen (status.lastReplay.at). */
  replayAts: Set<string>;
}

export interface SubState {
  t: number;
  generation: number;
  url: string;
  paused: boolean;
  maxInFlight: number;
  maxAttempts: number;
  maxReplays: number;
  rateLimited: boolean;
  timeoutMs: number;
  breaker?: string;
  breakerNextProbe?: number;
  health?: string;
  counts?: { pending: number; succeeded: number; deadLettered: number; discarded: number };
}

export interface SubRecord {
  key: string;
  ns: string;
  name: string;
  endpoint: string;
  states: SubState[];
}

export interface ReceivedRequest {
  seq: string;
  receiver: string;
  t: number;
  path: string;
  endpoint: string;
  wid?: string;
  wts?: string;
  wsig?: string;
  xsig?: string;
  len: number;
  sha: string;
  utf8: boolean;
  fffd?: number;
  kind: string;
  status: number;
  fin?: "finish" | "close";
  finAt?: number;
}

export type FaultKind = "leader-sigkill" | "leader-sigterm" | "leader-sigstop" | "standby-sigkill" | "receiver-restart" | "apiserver-restart" | "etcd-restart" | "noisy-tenant" | "lease-lost";

export interface Fault {
  kind: FaultKind;
  target: string;
  start: number;
  end?: number;
}

export interface Violation {
  invariant: number;
  key: string;
  message: string;
  t: number;
}

const TERMINAL = new Set(["Succeeded", "DeadLettered", "Discarded"]);
export const isTerminal = (phase: string | undefined): boolean => phase !== undefined && TERMINAL.has(phase);
const ms = (ts: string | undefined): number | undefined => (ts ? Date.parse(ts) : undefined);

/** The request body the operator documents: {"id","type","timestamp","created_at","data"} (delivery-reconciler.ts). */
export function expectedBody(obj: KubeObject<any, any>): Buffer {
  const spec = obj.spec ?? {};
  const id = (spec.eventId as string | undefined) ?? obj.metadata.uid ?? "";
  const data = JSON.stringify(spec.payload ?? null);
  return Buffer.from(`{"id":${JSON.stringify(id)},"type":${JSON.stringify(spec.eventType)},"timestamp":${JSON.stringify(obj.metadata.creationTimestamp ?? null)},"created_at":${JSON.stringify(obj.metadata.creationTimestamp ?? null)},"data":${data}}`, "utf8");
}

export class History {
  readonly deliveries = new Map<string, DeliveryRecord>();
  readonly subscriptions = new Map<string, SubRecord>();
  readonly requests = new Map<string, ReceivedRequest>();
  readonly faults: Fault[] = [];
  /** The expected request body of each delivery (for signature checks). */
  readonly bodies = new Map<string, Buffer>();
  readonly violations: Violation[] = [];
  /** Deliveries the workload created (the API server accepted them): ns/name. */
  readonly accepted = new Map<string, { at: number; via: "create" | "publish"; payloadKind: string }>();
  private readonly offsets = new Map<string, number>();
  private readonly partial = new Map<string, string>();
  onViolation: (v: Violation) => void = () => undefined;

  private readonly reported = new Set<string>();

  /** Records a violation (the same invariant, object and message once). */
  violate(invariant: number, key: string, message: string): void {
    const id = `${invariant} ${key} ${message}`;
    if (this.reported.has(id)) return;
    this.reported.add(id);
    const v = { invariant, key, message, t: Date.now() };
    this.violations.push(v);
    this.onViolation(v);
  }

  subFor(ns: string, sub: string): SubRecord | undefined {
    return this.subscriptions.get(`${ns}/${sub}`);
  }

  onDelivery(type: WatchEventType, obj: KubeObject<any, any>): void {
    const t = Date.now();
    const ns = obj.metadata.namespace ?? "";
    const key = `${ns}/${obj.metadata.name}`;
    let rec = this.deliveries.get(key);
    if (!rec || rec.uid !== obj.metadata.uid) {
      if (type === "DELETED" && !rec) return;
      const body = expectedBody(obj);
      rec = {
        key,
        ns,
        name: obj.metadata.name,
        sub: obj.spec?.subscriptionRef?.name ?? "",
        uid: obj.metadata.uid ?? "",
        id: obj.spec?.eventId ?? obj.metadata.uid ?? "",
        eventType: obj.spec?.eventType ?? "",
        createdAt: ms(obj.metadata.creationTimestamp) ?? t,
        expectedSha: createHash("sha256").update(body).digest("hex"),
        expectedLen: body.length,
        payloadKind: this.accepted.get(key)?.payloadKind,
        states: [],
        replayAts: new Set(),
      };
      this.deliveries.set(key, rec);
      this.bodies.set(key, body);
    }
    const s = obj.status ?? {};
    const history = (s.history ?? []) as Array<{ number: number }>;
    const cond = ((s.conditions ?? []) as Array<{ type: string; status: string; reason: string; message?: string }>).find((c) => c.type === "Succeeded");
    const state: DeliveryState = {
      t,
      rv: obj.metadata.resourceVersion ?? "",
      phase: s.phase,
      attempts: s.attempts,
      nextAttemptAt: ms(s.nextAttemptAt),
      lastNumber: Math.max(s.lastAttempt?.number ?? 0, ...history.map((h) => h.number)),
      lastStatus: s.lastAttempt?.responseStatus,
      lastOutcome: s.lastAttempt?.outcome,
      lastError: s.lastAttempt?.error,
      replays: s.replays,
      interruptions: s.interruptions,
      lastReplay: s.lastReplay,
      cond: cond ? { status: cond.status, reason: cond.reason, message: cond.message } : undefined,
      deadLetterReason: s.deadLetter?.reason,
      discardReason: s.discard?.reason,
      deleted: type === "DELETED",
    };
    const prev = rec.states[rec.states.length - 1];
    if (prev && prev.rv === state.rv && !state.deleted) return;
    rec.states.push(state);
    if (s.lastReplay?.at) rec.replayAts.add(s.lastReplay.at as string);
    if (prev?.phase === "Succeeded" && state.phase !== "Succeeded" && !state.deleted) {
      this.violate(4, key, `left Succeeded for ${state.phase ?? "no phase"} (resourceVersion ${prev.rv} -> ${state.rv})`);
    }
    const sub = this.subFor(ns, rec.sub)?.states.at(-1);
    // A replay counts as an attempt too (outcome.ts): each replay may add one; a failed replay
    // at maxReplays discards the delivery, so one replay happens even with maxReplays 0.
    const replaysMade = (state.replays ?? 0) + (state.lastReplay?.result === "Succeeded" ? 1 : 0);
    if (sub && state.attempts !== undefined && state.attempts > sub.maxAttempts + replaysMade) {
      this.violate(6, key, `status.attempts ${state.attempts} > retry.maxAttempts ${sub.maxAttempts} + ${replaysMade} replays`);
    }
    if (sub && state.replays !== undefined && state.replays > Math.max(1, sub.maxReplays)) {
      this.violate(6, key, `status.replays ${state.replays} > deadLetter.maxReplays ${sub.maxReplays}`);
    }
  }

  onSubscription(type: WatchEventType, obj: KubeObject<any, any>): void {
    if (type === "DELETED") return;
    const ns = obj.metadata.namespace ?? "";
    const key = `${ns}/${obj.metadata.name}`;
    let rec = this.subscriptions.get(key);
    if (!rec) {
      rec = { key, ns, name: obj.metadata.name, endpoint: `${ns}.${obj.metadata.name}`, states: [] };
      this.subscriptions.set(key, rec);
    }
    const spec = obj.spec ?? {};
    const st = obj.status ?? {};
    const state: SubState = {
      t: Date.now(),
      generation: obj.metadata.generation ?? 0,
      url: spec.url,
      paused: spec.paused === true,
      maxInFlight: spec.maxInFlight ?? 10,
      maxAttempts: spec.retry?.maxAttempts ?? 6,
      maxReplays: spec.deadLetter?.maxReplays ?? 5,
      rateLimited: spec.rateLimit !== undefined,
      timeoutMs: spec.timeout ? parseDurationLoose(spec.timeout as string) : 10_000,
      breaker: st.breaker?.state,
      breakerNextProbe: ms(st.breaker?.nextProbeAt),
      health: st.health?.state,
      counts: st.deliveries,
    };
    rec.states.push(state);
  }

  /** Reads what the receivers appended to their logs since the last call. */
  /** Endpoints ("<namespace>.<name>") whose requests are not recorded: the tenant mix's noisy tenant (lib/noisy-tenant.ts). */
  ignoreEndpoints: ((endpoint: string) => boolean) | undefined;

  tailReceiverLog(receiver: string, file: string): void {
    if (!existsSync(file)) return;
    const size = statSync(file).size;
    const from = this.offsets.get(file) ?? 0;
    if (size <= from) return;
    const fd = openSync(file, "r");
    const buf = Buffer.alloc(size - from);
    try {
      readSync(fd, buf, 0, buf.length, from);
    } finally {
      closeSync(fd);
    }
    this.offsets.set(file, size);
    const text = (this.partial.get(file) ?? "") + buf.toString("utf8");
    const lines = text.split("\n");
    this.partial.set(file, lines.pop() ?? "");
    for (const line of lines) {
      if (!line) continue;
      const rec = JSON.parse(line) as Partial<ReceivedRequest> & { seq: string; fin?: "finish" | "close"; t: number };
      if (rec.fin) {
        const req = this.requests.get(rec.seq);
        // A held request the settle phase answered: its finish carries the status it got.
        if (req) Object.assign(req, { fin: rec.fin, finAt: rec.t }, rec.status !== undefined ? { status: rec.status } : {});
      } else if (!(rec.endpoint && this.ignoreEndpoints?.(rec.endpoint))) this.requests.set(rec.seq, { ...(rec as ReceivedRequest), receiver });
    }
  }

  /** Requests per webhook id and endpoint ("endpoint wid"), in arrival order. */
  requestsById(): Map<string, ReceivedRequest[]> {
    const out = new Map<string, ReceivedRequest[]>();
    for (const r of this.requests.values()) {
      const k = `${r.endpoint} ${r.wid ?? ""}`;
      const list = out.get(k) ?? [];
      list.push(r);
      out.set(k, list);
    }
    for (const list of out.values()) list.sort((a, b) => a.t - b.t);
    return out;
  }

  faultsBetween(from: number, to: number, kinds?: FaultKind[]): Fault[] {
    return this.faults.filter((f) => (!kinds || kinds.includes(f.kind)) && f.start <= to && (f.end ?? Infinity) >= from);
  }
}

function parseDurationLoose(d: string): number {
  const m = /^(\d+)ms$/.exec(d);
  if (m) return Number(m[1]);
  try {
    return parseDuration(d);
  } catch {
    return 10_000;
  }
}
