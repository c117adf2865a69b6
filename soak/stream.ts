// `npm run soak -- --mode stream` (issue 16): the soak in stream mode. Events are published to
// JetStream (a private nats-server, hack/build-nats.sh) instead of created as WebhookDeliveries;
// two operator replicas deliver them (every replica delivers in stream mode); the scripted
// receivers' behaviours change as in CR mode's soak; the faults are a nats-server crash (SIGKILL,
// restarted on the same store after 3-8 s), an operator SIGKILL, an operator SIGTERM (drain) and a
// receiver restart. A publish that fails while NATS is down is published again with the same id
// and timestamp until JetStream acknowledges it (what a producer does). Invariants, over the
// whole history (receiver logs, dead-letter WebhookDeliveries, the consumers at the end):
//   S1 zero loss: every published event reaches a final outcome at each subscription it matches:
//      a 2xx response at the receiver, or a DeadLettered WebhookDelivery; every consumer is
//      drained at the end (nothing pending, nothing unacknowledged);
//   S2 byte-exact: every request carries the body built from the event exactly as published
//      (SHA-256 and length), valid UTF-8, and only to a subscription whose eventTypes match; at
//      the ordered subscription (its events become WebhookDeliveries), the data as the API server
//      keeps a JSON value: object keys in byte order (apiServerJson), the rest as published;
//   S3 one webhook-id per event: every attempt of an event (found by its body) carries the
//      event's id as webhook-id with a StandardWebhooks signature that verifies over it, and a
//      dead letter names the event it is for.
//   S4 acknowledged during a NATS fault: every publish JetStream acknowledged while a NATS fault was
//      under way (a leader change, a node down, stopped or cut off) reached its final outcome at
//      every subscription (a subset of S1, reported on its own: what R3 promises);
//   S5 duplicates bounded: the events delivered twice (a second 2xx) after a fault number at most
//      what was out at once (the sum of maxInFlight) for each node or replica the fault took;
//   S6 order per key: one subscription orders its events by type (spec.ordering, key eventType:
//      ORDERED_SUB); of two events of a type, every request of the one JetStream stored first
//      reached the receiver before the first request of the other, across every fault (operator
//      SIGKILLs included). Its endpoint is never given a permanent failure (a dead letter would
//      rightly block its type for the rest of the run), and a failing behaviour lasts one turn.
// Delivery is at least once: an event sent twice (an acknowledgement lost with a killed replica
// or server) is counted per fault, not a violation unless above S5's bound.
//
// --nats-nodes 3 (soak/lib/nats-faults.ts): a three-node JetStream cluster, the stream and the
// buckets at R3, every client given the three URLs, and the cluster's faults instead of the
// single server's crash: the stream leader's node SIGKILLed (started again after 3-8 s), a
// follower SIGSTOPped for 10 s, a rolling restart, and a partition of one node for 10-15 s (its
// routes frozen by soak/lib/route-proxy.ts).
import { createHash } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { API_VERSION } from "../src/api/names.js";
import { webhookBody } from "../src/delivery/payload.js";
import { ensureNatsServer } from "../src/cluster/build.js";
import { LocalNatsServer } from "../src/cluster/nats.js";
import { assignNodePorts, LocalNatsCluster, streamReplicasFor } from "../src/cluster/nats-cluster.js";
import { freePorts } from "../src/cluster/ports.js";
import { OPERATOR_INBOX_PREFIX, STREAM_AUTH_POLICY } from "../src/jetstream/permissions.js";
import { toRfc3339 } from "../src/core/rfc3339.js";
import { matchesEventType } from "../src/core/attempt/policy.js";
import type { KubeClient } from "../src/kube/client.js";
import { collectionPath, CORE } from "../src/kube/types.js";
import { publishToStream } from "../src/publish/stream.js";
import { listConsumers, type HooklineConsumer } from "../src/jetstream/consumers.js";
import { STREAM_NAME, StreamConnection } from "../src/jetstream/jetstream.js";
import { namespaceStreamName } from "../src/jetstream/layout.js";
import type { Watchdog } from "../bench/lib/procs.js";
import { DELIVERIES, SUBSCRIPTIONS } from "../bench/lib/kube.js";
import { samples, sleep } from "../bench/lib/util.js";
import { admits, nextBehaviour, type Behaviour } from "./lib/behaviour.js";
import { Operators } from "./lib/operators.js";
import { payload } from "./lib/payloads.js";
import { allCurrent, followerSigstop, leaderSigkill, partition, rollingRestart, streamReplicas } from "./lib/nats-faults.js";
import { ReceiverProcess } from "./lib/receivers.js";
import type { Rng } from "./lib/rng.js";
import { RouteProxies } from "./lib/route-proxy.js";

export type StreamFaultKind = "nats-restart" | "operator-sigkill" | "operator-sigterm" | "receiver-restart" | "noisy-tenant" | "nats-leader-sigkill" | "nats-follower-sigstop" | "nats-rolling-restart" | "nats-partition";
/** One nats-server's faults (and the operators' and receivers', and the tenant mix). */
export const STREAM_FAULT_KINDS: StreamFaultKind[] = ["nats-restart", "operator-sigkill", "operator-sigterm", "receiver-restart", "noisy-tenant"];

/**
 * The tenant mix: a noisy tenant's namespace whose events flood its own stream for a while at
 * ten times the workload's rate, to a hanging endpoint (request slots), with 200 KiB events
 * (the held-bytes budget), and to a paused subscription (its stream holds them). The invariants
 * ignore it; for the others nothing is relaxed while it floods (it is no fault window).
 */
export const NOISY_STREAM_NS = "soak-sn";
const NOISY_SUBSCRIPTIONS = [
  { name: "sn-hang", spec: { timeout: "5s", maxInFlight: 10, retry: { maxAttempts: 2, initialBackoff: "1s" } } },
  { name: "sn-big", spec: { maxInFlight: 10 } },
  { name: "sn-paused", spec: { paused: true } },
];
const NOISY_BIG = "x".repeat(200 * 1024);
/** A JetStream cluster's faults (--nats-nodes 3). */
export const CLUSTER_FAULT_KINDS: StreamFaultKind[] = ["nats-leader-sigkill", "nats-follower-sigstop", "nats-rolling-restart", "nats-partition"];

/** The kinds a run draws from: on a cluster, its four (quick) or those and the operators' and receivers' (longer runs). */
export function faultKinds(nodes: number, quick: boolean): StreamFaultKind[] {
  if (nodes === 1) return STREAM_FAULT_KINDS;
  return quick ? CLUSTER_FAULT_KINDS : [...CLUSTER_FAULT_KINDS, "operator-sigkill", "operator-sigterm", "receiver-restart"];
}

/** How long a follower stays stopped (SIGSTOP) in nats-follower-sigstop. */
export const SIGSTOP_MS = 10_000;
/** Duplicates are counted against the fault under way, or ended at most this long before (a lost acknowledgement's message comes again after its ack wait: timeout 2 s + 30 s). */
export const DUPLICATE_WINDOW_MS = 45_000;

export const STREAM_INVARIANTS: Record<string, string> = {
  S1: "zero loss: every published event reached a 2xx at the receiver or a DeadLettered WebhookDelivery, for every subscription it matches; every consumer drained",
  S2: "byte-exact: every request's body is the event's exactly as published (SHA-256, length, valid UTF-8; at the ordered subscription, its data as the API server keeps it), sent only to matching subscriptions",
  S3: "one webhook-id per event: every attempt of an event carries the event id as webhook-id, signed (StandardWebhooks) over it; each dead letter names its event",
  S4: "acknowledged during a NATS fault: every publish acknowledged while a NATS fault was under way (leader change, node down, stopped or cut off) reached its final outcome at every subscription",
  S5: "duplicates bounded: the events delivered twice after each fault are at most the sum of maxInFlight for each node or replica it took",
  S6: "order per key: at the ordered subscription (spec.ordering by event type), every request of an event came before the first request of the next event of its type in the stream",
};

/** The ordered subscription (S6), in soak-sa: every event type a lane of its own. */
export const ORDERED_SUB = "ssub-ordered";

/** A fault as it happened. */
export interface FaultRecord {
  kind: StreamFaultKind;
  target: string;
  start: number;
  end?: number;
  /** What was seen (the new leader, how long catching up took). */
  detail?: string;
  /** Nodes or replicas it took (a rolling restart: every node). */
  affected: number;
}

export interface StreamSoakContext {
  seed: number;
  quick: boolean;
  faults: boolean;
  durationMs: number;
  rng: Rng;
  tmp: string;
  kubeconfig: string;
  client: KubeClient;
  watchdog: Watchdog;
  say: (line: string) => void;
  onCleanup: (what: string, run: () => unknown) => void;
  replay: string;
  /** nats-server nodes: 1, or 3 for a JetStream cluster. */
  natsNodes?: number;
}

interface SubPlan {
  ns: string;
  name: string;
  eventTypes: string[];
  receiver: number;
  spec: Record<string, unknown>;
  /** spec.ordering by event type (S6). */
  ordered?: boolean;
}

interface Published {
  id: string;
  ns: string;
  type: string;
  sha: string;
  len: number;
  kind: string;
  /** Subscriptions (ns.name) it matches. */
  targets: string[];
  acknowledged: boolean;
  /** When JetStream acknowledged it. */
  ackedAt?: number;
  /** Its sequence in its namespace's stream (a duplicate publish answers the first one's). */
  seq?: number;
  publishAttempts: number;
  /** The ordered subscription's body (S2): the data as the API server keeps it (apiServerJson). */
  ordered?: { sha: string; len: number; body: Buffer };
  /** The body as published (for the signature check); absent in unit tests. */
  body?: Buffer;
}

interface Request {
  receiver: string;
  seq: string;
  /** When the receiver had the whole body. */
  t?: number;
  endpoint: string;
  wid?: string;
  wts?: string;
  wsig?: string;
  sha: string;
  len: number;
  utf8: boolean;
  status: number;
  /** The receiver's behaviour: huge and trickle send their 2xx headers at once, then a body. */
  kind: string;
  fin?: string;
}

/** Whether the sender got a 2xx: the response finished, or its headers went at once (huge, trickle: the sender may stop reading the body). */
export const answered2xx = (q: Pick<Request, "status" | "fin" | "kind">): boolean => q.status >= 200 && q.status < 300 && (q.fin === "finish" || q.kind === "huge" || q.kind === "trickle");

const TYPES = ["order.paid", "order.refunded", "user.created", "invoice.sent"];
const SECRET = "soak-stream-signing";
const SIGNING_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/** Stream faults: each kind once in a seeded order (quick), or a seeded kind every 30-90 s; the kinds of faultKinds(nodes). */
export function streamSchedule(rng: Rng, durationMs: number, quick: boolean, nodes = 1): Array<{ at: number; kind: StreamFaultKind; downMs: number }> {
  const out: Array<{ at: number; kind: StreamFaultKind; downMs: number }> = [];
  const all = faultKinds(nodes, quick);
  if (quick) {
    const kinds = [...all];
    for (let i = kinds.length - 1; i > 0; i--) {
      const j = rng.int(0, i);
      [kinds[i], kinds[j]] = [kinds[j]!, kinds[i]!];
    }
    const slot = (durationMs - 8_000) / kinds.length;
    kinds.forEach((k, i) => out.push({ at: 5_000 + Math.round(i * slot + rng.next() * slot * 0.3), kind: k, downMs: rng.int(3_000, 8_000) }));
    return out;
  }
  for (let at = rng.int(15_000, 40_000); at < durationMs - 20_000; at += rng.int(30_000, 90_000)) out.push({ at, kind: rng.pick(all), downMs: rng.int(3_000, 8_000) });
  return out;
}

function planSubscriptions(rng: Rng, quick: boolean, receivers: number): SubPlan[] {
  const out: SubPlan[] = [];
  const n = quick ? rng.int(4, 6) : rng.int(8, 12);
  for (let i = 0; i < n; i++) {
    const ns = i % 2 === 0 ? "soak-sa" : "soak-sb";
    const eventTypes = rng.weighted<string[]>([
      [["order.*"], 2],
      [[rng.pick(TYPES)], 2],
      [["*"], 1],
      [[rng.pick(TYPES), rng.pick(TYPES)], 1],
    ]);
    const receiver = rng.int(0, receivers - 1);
    out.push({
      ns,
      name: `ssub-${i}`,
      eventTypes: [...new Set(eventTypes)],
      receiver,
      spec: {
        eventTypes: [...new Set(eventTypes)],
        secretRef: { name: SECRET },
        maxInFlight: rng.int(2, 10),
        timeout: "2s",
        retry: { maxAttempts: rng.int(3, 6), initialBackoff: "200ms", maxBackoff: "2s", jitterPercent: rng.int(0, 30) },
        circuitBreaker: { failureThreshold: rng.int(3, 8), cooldown: `${rng.int(2, 4)}s` },
      },
    });
  }
  // S6: every event of soak-sa, one lane per type. Retries enough to outlast any failing turn.
  out.push({
    ns: "soak-sa",
    name: ORDERED_SUB,
    eventTypes: ["*"],
    receiver: 0,
    ordered: true,
    spec: {
      eventTypes: ["*"],
      secretRef: { name: SECRET },
      maxInFlight: 4,
      timeout: "2s",
      ordering: { key: "eventType" },
      retry: { maxAttempts: 50, initialBackoff: "200ms", maxBackoff: "2s", jitterPercent: 10 },
      circuitBreaker: { failureThreshold: 20, cooldown: "2s" },
    },
  });
  return out;
}

/** What the ordered subscription's endpoint may be given: a permanent failure becomes a 503 (S6). */
export function orderedBehaviour(b: Behaviour): Behaviour {
  if (b.kind === "redirect" || (b.kind === "status" && b.status < 500)) return { kind: "status", status: 503 };
  return b;
}

/**
 * A JSON value as the API server gives it back from a WebhookDelivery's spec.payload: it decodes
 * it into Go maps and encodes them again, so object keys come back in byte (UTF-8) order; the
 * operator reads that with JSON.parse and sends JSON.stringify of it. Pure.
 */
export function apiServerJson(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(apiServerJson);
  if (value === null || typeof value !== "object") return value;
  const keys = Object.keys(value).sort((a, b) => Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8")));
  const out: Record<string, unknown> = {};
  for (const k of keys) out[k] = apiServerJson((value as Record<string, unknown>)[k]);
  return out;
}

/**
 * S6 over the ordered endpoints: per endpoint and event type, the events in stream order; every
 * request of one reached the receiver before the first request of the next. Pure.
 */
export function orderViolations(events: readonly Published[], requests: readonly Request[], ordered: readonly string[]): StreamViolation[] {
  const v: StreamViolation[] = [];
  for (const endpoint of ordered) {
    const times = new Map<string, number[]>();
    for (const q of requests) if (q.endpoint === endpoint && q.wid !== undefined && q.t !== undefined) times.set(q.wid, [...(times.get(q.wid) ?? []), q.t]);
    const lanes = new Map<string, Published[]>();
    for (const e of events) if (e.targets.includes(endpoint) && e.seq !== undefined) lanes.set(e.type, [...(lanes.get(e.type) ?? []), e]);
    for (const [type, lane] of lanes) {
      lane.sort((a, b) => a.seq! - b.seq!);
      for (let i = 1; i < lane.length; i++) {
        const before = times.get(lane[i - 1]!.id) ?? [];
        const after = times.get(lane[i]!.id) ?? [];
        if (!before.length || !after.length) continue;
        const last = Math.max(...before);
        const first = Math.min(...after);
        if (first < last) v.push({ invariant: "S6", key: lane[i]!.id, message: `${endpoint}, type ${type}: its first request came ${Math.round(last - first)} ms before the last request of ${lane[i - 1]!.id}, stored before it (seq ${lane[i - 1]!.seq} < ${lane[i]!.seq})` });
      }
    }
  }
  return v;
}

async function apply(client: KubeClient, path: string, body: Record<string, unknown>): Promise<void> {
  const meta = body.metadata as { name: string };
  await client.request({ method: "PATCH", path: `${path}/${meta.name}`, query: { fieldManager: "hookline-soak", force: true }, contentType: "application/apply-patch+yaml", body });
}

/** webhook_deliveries_in_flight of each live replica (0 when its metrics do not answer). */
async function inFlightOf(slots: Operators["slots"]): Promise<Array<{ slot: Operators["slots"][number]; n: number }>> {
  return Promise.all(
    slots
      .filter((s) => !s.proc.exited)
      .map(async (slot) => ({ slot, n: await slot.proc.metrics().then((m) => samples(m, "webhook_deliveries_in_flight").reduce((t, x) => t + x.value, 0), () => 0) })),
  );
}

/** Reads a soak receiver's log (two lines per request: the request, then how it ended). */
export function readRequests(receiver: string, file: string): Request[] {
  if (!existsSync(file)) return [];
  const bySeq = new Map<string, Request>();
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (!line) continue;
    let r: Record<string, any>;
    try {
      r = JSON.parse(line);
    } catch {
      continue; // a line cut by a SIGKILL of the receiver
    }
    if (r.fin) {
      const q = bySeq.get(r.seq);
      if (q) q.fin = r.fin;
      // A held request the settle phase answered: its finish carries the status it got.
      if (q && typeof r.status === "number") q.status = r.status;
      continue;
    }
    bySeq.set(r.seq, { receiver, seq: r.seq, t: r.t, endpoint: r.endpoint, wid: r.wid, wts: r.wts, wsig: r.wsig, sha: r.sha, len: r.len, utf8: r.utf8 && r.fffd === 0, status: r.status, kind: r.kind });
  }
  return [...bySeq.values()];
}

/** The StandardWebhooks signature over (webhook-id, webhook-timestamp, body), checked at the request's own time. */
function signed(q: Request, body: Buffer): boolean {
  try {
    const sig = new Webhook(SIGNING_SECRET).sign(q.wid ?? "", new Date(Number(q.wts) * 1000), body.toString("utf8"));
    return (q.wsig ?? "").split(" ").includes(sig);
  } catch {
    return false;
  }
}

export interface StreamViolation {
  invariant: "S1" | "S2" | "S3" | "S4" | "S5" | "S6";
  key: string;
  message: string;
}

/** A fault is a NATS fault when it takes nats-server (a node, or the only server) away. */
export const isNatsFault = (kind: StreamFaultKind): boolean => kind.startsWith("nats-");

/**
 * The (subscription, event) pairs delivered with a 2xx more than once, each counted against the
 * fault most recently started that was under way, or had ended at most DUPLICATE_WINDOW_MS
 * before, when the second 2xx came (`none`: no fault). Pure.
 */
export function duplicatesByFault(faults: readonly FaultRecord[], requests: readonly Request[]): { perFault: number[]; none: number } {
  const times = new Map<string, number[]>();
  for (const q of requests) {
    if (!answered2xx(q) || q.t === undefined) continue;
    const k = `${q.endpoint} ${q.wid}`;
    times.set(k, [...(times.get(k) ?? []), q.t]);
  }
  const perFault = faults.map(() => 0);
  let none = 0;
  for (const ts of times.values()) {
    if (ts.length < 2) continue;
    const second = [...ts].sort((a, b) => a - b)[1]!;
    let at = -1;
    faults.forEach((f, i) => {
      if (f.start <= second && second <= (f.end ?? Infinity) + DUPLICATE_WINDOW_MS && (at < 0 || f.start >= faults[at]!.start)) at = i;
    });
    if (at < 0) none++;
    else perFault[at]!++;
  }
  return { perFault, none };
}

/** Publishes acknowledged while fault `f` was under way. */
export const acknowledgedDuring = (events: readonly Published[], f: FaultRecord): Published[] => events.filter((e) => e.ackedAt !== undefined && e.ackedAt >= f.start && e.ackedAt <= (f.end ?? Infinity));

/**
 * The invariants over the history; pure, for the unit test. With `faults`: S4 (what was
 * acknowledged during a NATS fault reached its outcome) and S5 (duplicates per fault at most
 * `bound(f)`).
 */
export function checkStream(
  events: Published[],
  requests: Request[],
  deadLetters: Array<{ ns: string; sub: string; eventId: string; name: string }>,
  consumers: HooklineConsumer[],
  endpointsOf: Map<string, string[]>,
  faults?: { records: readonly FaultRecord[]; bound: (f: FaultRecord) => number },
  ordered: readonly string[] = [],
): StreamViolation[] {
  const v: StreamViolation[] = [];
  const bySha = new Map(events.map((e) => [e.sha, e]));
  const byOrderedSha = new Map(events.filter((e) => e.ordered).map((e) => [e.ordered!.sha, e]));
  const byId = new Map(events.map((e) => [`${e.ns}/${e.id}`, e]));
  const reached = new Set<string>();
  for (const q of requests) {
    // At the ordered subscription, the body to hold it against is the one made through the API server.
    const viaApi = ordered.includes(q.endpoint);
    const found = (viaApi ? byOrderedSha : bySha).get(q.sha);
    const e = found && viaApi ? { ...found, len: found.ordered!.len, body: found.ordered!.body } : found;
    if (!e) {
      const named = [...byId.values()].find((x) => x.id === q.wid);
      v.push({ invariant: "S2", key: q.wid ?? q.seq, message: `request ${q.seq} at ${q.receiver}/${q.endpoint}: body (${q.len} bytes, sha ${q.sha.slice(0, 12)}) is no published event's${named ? `; its webhook-id names ${named.ns}/${named.id} (${named.len} bytes expected)` : ""}` });
      continue;
    }
    if (q.len !== e.len || !q.utf8) v.push({ invariant: "S2", key: e.id, message: `request ${q.seq}: ${q.len} bytes (expected ${e.len}), valid UTF-8 ${q.utf8}` });
    if (q.wid !== e.id) v.push({ invariant: "S3", key: e.id, message: `request ${q.seq} carries webhook-id ${q.wid} for the event ${e.ns}/${e.id}` });
    else if (e.body && !signed(q, e.body)) v.push({ invariant: "S3", key: e.id, message: `request ${q.seq}: webhook-signature ${q.wsig ?? "(none)"} does not verify for webhook-id ${q.wid} (standardwebhooks)` });
    if (!e.targets.includes(q.endpoint)) v.push({ invariant: "S2", key: e.id, message: `request ${q.seq} went to ${q.endpoint}, which does not match ${e.type} (targets: ${e.targets.join(", ") || "none"})` });
    if (answered2xx(q)) reached.add(`${q.endpoint} ${e.ns}/${e.id}`);
  }
  for (const d of deadLetters) {
    const e = byId.get(`${d.ns}/${d.eventId}`);
    if (!e) v.push({ invariant: "S3", key: d.name, message: `dead letter ${d.ns}/${d.name} names event ${d.eventId}, which was never published` });
    else reached.add(`${d.ns}.${d.sub} ${e.ns}/${e.id}`);
  }
  for (const e of events) {
    if (!e.acknowledged) {
      v.push({ invariant: "S1", key: e.id, message: `never acknowledged by JetStream after ${e.publishAttempts} publishes` });
      continue;
    }
    for (const t of e.targets) if (!reached.has(`${t} ${e.ns}/${e.id}`)) v.push({ invariant: "S1", key: e.id, message: `no 2xx at the receiver and no dead letter at ${t} (${(endpointsOf.get(`${e.ns}/${e.id}`) ?? []).length} requests seen for it)` });
  }
  for (const c of consumers) if (c.pending !== 0 || c.ackPending !== 0) v.push({ invariant: "S1", key: `${c.namespace}/${c.name}`, message: `consumer not drained: ${c.pending} pending, ${c.ackPending} unacknowledged` });
  if (!faults) return v;
  for (const f of faults.records.filter((x) => isNatsFault(x.kind))) {
    for (const e of acknowledgedDuring(events, f)) {
      const missing = e.targets.filter((t) => !reached.has(`${t} ${e.ns}/${e.id}`));
      if (missing.length) v.push({ invariant: "S4", key: e.id, message: `acknowledged during ${f.kind} of ${f.target}, never reached ${missing.join(", ")}` });
    }
  }
  const dup = duplicatesByFault(faults.records, requests);
  faults.records.forEach((f, i) => {
    const bound = faults.bound(f);
    if (dup.perFault[i]! > bound) v.push({ invariant: "S5", key: `${f.kind} ${f.target}`, message: `${dup.perFault[i]} events delivered twice after it, above the bound of ${bound}` });
  });
  return v;
}

export async function streamSoak(ctx: StreamSoakContext): Promise<number> {
  const { say, client, rng } = ctx;
  const started = Date.now();
  const { binary } = await ensureNatsServer({ env: process.env });
  const natsDir = join(ctx.tmp, "nats");
  mkdirSync(natsDir, { recursive: true });
  const nodes = ctx.natsNodes ?? 1;
  const replicas = streamReplicasFor(nodes);
  let nats: LocalNatsServer | undefined;
  let cluster: LocalNatsCluster | undefined;
  let proxies: RouteProxies | undefined;
  if (nodes > 1) {
    // The ports first: the proxy of each route link points at them before any node starts.
    const ports = assignNodePorts(nodes, await freePorts(nodes * 3));
    const links = await RouteProxies.start(ports.map((p) => p.cluster));
    proxies = links;
    ctx.onCleanup("route proxies", () => links.close());
    cluster = await LocalNatsCluster.start({ dir: natsDir, binary, nodes, auth: STREAM_AUTH_POLICY, ports, routePort: (from, to) => links.port(from, to), advertise: () => links.sink });
    const c = cluster;
    ctx.onCleanup("nats cluster", () => c.close());
  } else {
    const n = await LocalNatsServer.start({ dir: natsDir, binary, auth: STREAM_AUTH_POLICY });
    nats = n;
    ctx.onCleanup("nats-server", () => n.close());
  }
  const operatorUrl = cluster?.operatorUrl ?? nats!.operatorUrl;
  const conn = await StreamConnection.connect({ url: operatorUrl, source: "soak", name: "hookline soak", inboxPrefix: OPERATOR_INBOX_PREFIX, stream: { replicas } });
  ctx.onCleanup("stream connection", () => conn.close().catch(() => undefined));
  say(cluster ? `a JetStream cluster of ${nodes} nats-server ${cluster.version} nodes at ${cluster.url}, the namespaces' streams at R${replicas}, routes through proxies` : `nats-server ${nats!.version} at ${nats!.url}`);

  const receivers = [0, 1].map((i) => new ReceiverProcess(`r${i}`, join(ctx.tmp, `stream-receiver-${i}.jsonl`), (pid, alive) => (alive ? ctx.watchdog.add(pid) : ctx.watchdog.remove(pid))));
  for (const r of receivers) await r.start();
  ctx.onCleanup("receivers", () => Promise.all(receivers.map((r) => r.stop())));

  const wrng = rng.fork("stream-workload");
  const plans = planSubscriptions(wrng, ctx.quick, receivers.length);
  for (const ns of ["soak-sa", "soak-sb", NOISY_STREAM_NS]) {
    await apply(client, collectionPath(CORE.namespaces), { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
    await apply(client, collectionPath(CORE.secrets, ns), { apiVersion: "v1", kind: "Secret", metadata: { name: SECRET, namespace: ns }, type: "Opaque", stringData: { secret: SIGNING_SECRET } });
  }
  for (const n of NOISY_SUBSCRIPTIONS) {
    const spec = { ...n.spec, url: receivers[0]!.url(`/e/${NOISY_STREAM_NS}.${n.name}/hook`), secretRef: { name: SECRET } };
    await apply(client, collectionPath(SUBSCRIPTIONS, NOISY_STREAM_NS), { apiVersion: API_VERSION, kind: "WebhookSubscription", metadata: { name: n.name, namespace: NOISY_STREAM_NS }, spec });
  }
  await receivers[0]!.set(`${NOISY_STREAM_NS}.sn-hang`, { kind: "hang" });
  for (const p of plans) {
    const url = receivers[p.receiver]!.url(`/e/${p.ns}.${p.name}/hook`);
    await apply(client, collectionPath(SUBSCRIPTIONS, p.ns), { apiVersion: API_VERSION, kind: "WebhookSubscription", metadata: { name: p.name, namespace: p.ns }, spec: { ...p.spec, url } });
  }
  say(`${plans.length} subscriptions: ${plans.map((p) => `${p.ns}/${p.name} [${p.eventTypes.join(",")}]`).join("; ")}`);

  const operators = new Operators(ctx.kubeconfig, ctx.tmp, ctx.watchdog, { HOOKLINE_NATS_URL: operatorUrl, HOOKLINE_STREAM_REPLICAS: String(replicas) });
  ctx.onCleanup("operators", () => operators.stopAll());
  await operators.start();
  if (!(await operators.waitForLeader(client, 60_000))) throw new Error("no operator became leader within 60 s");
  const jsm = await conn.jetstreamManager();
  for (const until = Date.now() + 90_000; ; await sleep(500)) {
    const have = await soakConsumers(jsm);
    if (plans.every((p) => have.some((c) => c.namespace === p.ns && c.name === p.name))) break;
    if (Date.now() > until) throw new Error(`the leader did not make every subscription's consumer within 90 s (have ${have.map((c) => `${c.namespace}/${c.name}`).join(", ") || "none"}; last listing error: ${lastConsumerListError || "none"})`);
  }
  for (const s of operators.slots) for (const p of plans) await s.proc.waitForLog((l) => l.msg === "stream consumer started" && l.subscription === `${p.ns}/${p.name}`, 60_000, `${s.proc.opts.name} reading ${p.ns}/${p.name}`);
  say("both replicas read every consumer");

  // Workload: 1-3 events per step; a failed publish is retried with the same id and timestamp.
  const events: Published[] = [];
  const inFlight = new Set<Promise<void>>();
  let seq = 0;
  const publishOne = (ns: string): void => {
    const type = wrng.pick(TYPES);
    const p = payload(wrng, ctx.quick);
    const data = p.value === undefined ? null : p.value;
    const id = `sev-${ctx.seed}-${++seq}`;
    const t = Date.now();
    const body = Buffer.from(webhookBody(id, type, toRfc3339(t), JSON.stringify(data)), "utf8");
    const targets = plans.filter((s) => s.ns === ns && matchesEventType(s.eventTypes, type));
    const viaApi = targets.some((s) => s.ordered) ? Buffer.from(webhookBody(id, type, toRfc3339(t), JSON.stringify(apiServerJson(data))), "utf8") : undefined;
    const e: Published = {
      id,
      ns,
      type,
      sha: createHash("sha256").update(body).digest("hex"),
      len: body.length,
      kind: p.kind,
      body,
      ...(viaApi ? { ordered: { sha: createHash("sha256").update(viaApi).digest("hex"), len: viaApi.length, body: viaApi } } : {}),
      targets: targets.map((s) => `${s.ns}.${s.name}`),
      acknowledged: false,
      publishAttempts: 0,
    };
    events.push(e);
    const run = (async () => {
      for (let delay = 250; !e.acknowledged; delay = Math.min(2_000, delay * 2)) {
        e.publishAttempts++;
        try {
          const r = await publishToStream(conn, { namespace: ns, type, id, data }, { now: () => t, timeoutMs: 5_000 });
          e.seq = r.seq;
          e.acknowledged = true;
          e.ackedAt = Date.now();
        } catch {
          if (Date.now() - started > ctx.durationMs + 120_000) return;
          await sleep(delay);
        }
      }
    })();
    inFlight.add(run);
    void run.finally(() => inFlight.delete(run));
  };

  // The tenant mix: ten times the workload's rate (1-3 events every 250 ms, about 8/s), every tenth event 200 KiB.
  const noisy = { published: 0, refused: 0 };
  const noisyFlood = async (ms: number): Promise<void> => {
    const rate = 80;
    say(`tenant mix: ${NOISY_STREAM_NS} publishes ${rate} events/s for ${ms / 1000} s`);
    await receivers[0]!.set(`${NOISY_STREAM_NS}.sn-hang`, { kind: "hang" }).catch(() => undefined);
    const before = { ...noisy };
    const start = Date.now();
    const sends: Array<Promise<void>> = [];
    for (let i = 0; Date.now() - start < ms; i++) {
      const wait = start + (i * 1000) / rate - Date.now();
      if (wait > 0) await sleep(wait);
      const data = i % 10 === 0 ? { pad: NOISY_BIG, i } : { i };
      sends.push(
        publishToStream(conn, { namespace: NOISY_STREAM_NS, type: "order.paid", id: `noisy-${start}-${i}`, data }, { timeoutMs: 5_000 }).then(
          () => void noisy.published++,
          // Its quota reached, or NATS down (a fault at the same time): the flood goes on.
          () => void noisy.refused++,
        ),
      );
    }
    await Promise.all(sends);
    say(`tenant mix over: ${NOISY_STREAM_NS} published ${noisy.published - before.published} events, ${noisy.refused - before.refused} refused`);
  };

  const brng = rng.fork("stream-behaviour");
  const frng = rng.fork("stream-faults");
  const planned = ctx.faults ? streamSchedule(frng, ctx.durationMs, ctx.quick, nodes) : [];
  say(`fault schedule: ${planned.map((f) => `${f.kind}@${(f.at / 1000).toFixed(0)}s`).join(", ") || "none"}`);
  const endpoints = plans.map((p) => `${p.ns}.${p.name}`);
  const faults: FaultRecord[] = [];
  const t0 = Date.now();
  const deadline = t0 + ctx.durationMs;
  const workloadLoop = (async () => {
    for (let next = Date.now(); Date.now() < deadline; next += 250) {
      for (let k = wrng.int(1, 3); k > 0; k--) publishOne(wrng.pick(["soak-sa", "soak-sb"]));
      await sleep(Math.max(0, next + 250 - Date.now()));
    }
  })();
  const ordered = plans.filter((p) => p.ordered).map((p) => `${p.ns}.${p.name}`);
  const behaviourLoop = (async () => {
    let failingOrdered: string | undefined;
    while (Date.now() < deadline) {
      const ep = brng.pick(endpoints);
      let b = nextBehaviour(brng);
      // S6: the ordered endpoint's failures are passing ones, for one turn.
      if (failingOrdered !== undefined && failingOrdered !== ep) for (const r of receivers) await r.set(failingOrdered, { kind: "ok", status: 200 });
      failingOrdered = undefined;
      if (ordered.includes(ep)) {
        b = orderedBehaviour(b);
        if (!admits(b)) failingOrdered = ep;
      }
      for (const r of receivers) await r.set(ep, b);
      await sleep(brng.int(1_000, 4_000));
    }
  })();
  const faultLoop = (async () => {
    for (const f of planned) {
      const wait = t0 + f.at - Date.now();
      if (wait > 0) await sleep(wait);
      if (Date.now() > deadline) break;
      if (f.kind === "noisy-tenant") {
        await noisyFlood(12_000);
        continue;
      }
      const rec: FaultRecord = { kind: f.kind, target: "", start: Date.now(), affected: 1 };
      faults.push(rec);
      const natsFault = async (run: Promise<{ target: string; detail: string }>): Promise<void> => {
        const r = await run;
        rec.target = r.target;
        rec.detail = r.detail;
      };
      switch (f.kind) {
        case "nats-leader-sigkill":
          await natsFault(leaderSigkill(cluster!, f.downMs, say));
          break;
        case "nats-follower-sigstop":
          await natsFault(followerSigstop(cluster!, frng, SIGSTOP_MS, say));
          break;
        case "nats-rolling-restart":
          rec.affected = nodes;
          await natsFault(rollingRestart(cluster!, say));
          break;
        case "nats-partition":
          await natsFault(partition(cluster!, proxies!, frng, f.downMs + 7_000, say));
          break;
        case "nats-restart":
          rec.target = "nats-server";
          say(`fault: nats-server SIGKILL, restarted on its store after ${f.downMs} ms`);
          await nats!.kill();
          await sleep(f.downMs);
          await nats!.restart();
          break;
        case "operator-sigkill":
        case "operator-sigterm": {
          // A kill matters most with attempts in flight: wait up to 5 s for a replica that has some.
          let slot = frng.pick(operators.slots);
          let held = 0;
          for (const until = Date.now() + 5_000; Date.now() < until; await sleep(100)) {
            const busy = await inFlightOf(operators.slots);
            const top = busy.sort((x, y) => y.n - x.n)[0];
            if (top && top.n > 0) {
              slot = top.slot;
              held = top.n;
              break;
            }
          }
          rec.target = `${slot.proc.opts.name}, ${held} in flight`;
          say(`fault: ${f.kind} ${rec.target}`);
          if (f.kind === "operator-sigkill") {
            slot.proc.child.kill("SIGKILL");
            await slot.proc.stop(5_000);
          } else await slot.proc.stop(15_000);
          await sleep(Math.min(f.downMs, 4_000));
          await operators.restart(slot);
          break;
        }
        case "receiver-restart": {
          const i = frng.int(0, receivers.length - 1);
          rec.target = receivers[i]!.name;
          say(`fault: receiver ${rec.target} SIGKILL, restarted after ${Math.min(f.downMs, 4_000)} ms`);
          await receivers[i]!.restart(Math.min(f.downMs, 4_000));
          break;
        }
      }
      rec.end = Date.now();
      say(`fault over: ${f.kind} (${((rec.end - rec.start) / 1000).toFixed(1)} s)${rec.detail ? `: ${rec.detail}` : ""}`);
    }
  })();
  await Promise.all([workloadLoop, behaviourLoop, faultLoop]);

  // Settle: every publish acknowledged, receivers answer 200, every consumer drained.
  say(`settle: ${events.length} events published; receivers answer 200; waiting for every consumer to drain`);
  for (const r of receivers) await r.setAll({ kind: "ok", status: 200 });
  for (const ep of endpoints) for (const r of receivers) await r.set(ep, { kind: "ok", status: 200 });
  await Promise.all([...inFlight]);
  // A message out to a killed replica comes again after its ack wait (timeout 2 s + 30 s).
  const settleUntil = Date.now() + (ctx.quick ? 100_000 : 180_000);
  let consumers: HooklineConsumer[] = [];
  for (;;) {
    consumers = (await soakConsumers(jsm).catch(() => consumers)).filter((c) => c.namespace.startsWith("soak-s"));
    if (consumers.length === plans.length && consumers.every((c) => c.pending === 0 && c.ackPending === 0)) break;
    if (Date.now() > settleUntil) break;
    await sleep(1_000);
  }
  await sleep(3_000); // the last dead letters and receiver log lines
  say(`settled: ${consumers.filter((c) => c.pending || c.ackPending).length} consumers not drained`);

  const requests = receivers.flatMap((r) => readRequests(r.name, r.logFile)).filter((q) => !q.endpoint.startsWith(`${NOISY_STREAM_NS}.`));
  const deadLetters: Array<{ ns: string; sub: string; eventId: string; name: string }> = [];
  for (const ns of ["soak-sa", "soak-sb"]) {
    const list = await client.request<{ items: Array<{ metadata: { name: string }; spec?: { eventId?: string; subscriptionRef?: { name?: string } }; status?: { phase?: string } }> }>({ method: "GET", path: collectionPath(DELIVERIES, ns) });
    for (const d of list.items) if (d.status?.phase === "DeadLettered") deadLetters.push({ ns, sub: d.spec?.subscriptionRef?.name ?? "", eventId: d.spec?.eventId ?? "", name: d.metadata.name });
  }
  const endpointsOf = new Map<string, string[]>();
  for (const e of events) endpointsOf.set(`${e.ns}/${e.id}`, []);
  for (const q of requests) for (const ns of ["soak-sa", "soak-sb"]) endpointsOf.get(`${ns}/${q.wid}`)?.push(q.endpoint);
  // What can be out unacknowledged at once, across the replicas (max_ack_pending = maxInFlight).
  const outAtOnce = plans.reduce((n, p) => n + Number(p.spec.maxInFlight), 0);
  const bound = (f: FaultRecord) => outAtOnce * f.affected;
  const violations = [...checkStream(events, requests, deadLetters, consumers, endpointsOf, { records: faults, bound }, ordered), ...orderViolations(events, requests, ordered)];
  const dup = duplicatesByFault(faults, requests);
  const finalReplicas = cluster ? await streamReplicas(cluster) : undefined;

  const pairs = events.reduce((n, e) => n + e.targets.length, 0);
  const okCount = new Map<string, number>();
  for (const q of requests) if (answered2xx(q)) okCount.set(`${q.endpoint} ${q.wid}`, (okCount.get(`${q.endpoint} ${q.wid}`) ?? 0) + 1);
  const sentTwice = [...okCount.values()].filter((n) => n > 1).length;
  const kinds: Record<string, number> = {};
  for (const e of events) kinds[e.kind] = (kinds[e.kind] ?? 0) + 1;
  const out: string[] = [];
  out.push("", `hookline soak, stream mode: seed ${ctx.seed}, ${((Date.now() - started) / 1000).toFixed(0)} s`);
  out.push(`events ${events.length} (${Object.entries(kinds).map(([k, n]) => `${k} ${n}`).join(", ")}), publishes retried ${events.reduce((n, e) => n + e.publishAttempts - 1, 0)}; event × subscription ${pairs}: 2xx at the receiver ${okCount.size}, dead letters ${deadLetters.length}; requests ${requests.length}; delivered twice (at least once) ${sentTwice}`);
  out.push(`faults ${faults.length || "none"}; operator starts ${operators.starts}; delivered twice outside any fault's window ${dup.none}`);
  faults.forEach((f, i) => {
    const acked = acknowledgedDuring(events, f);
    const lost = violations.filter((x) => x.invariant === "S4" && x.message.includes(`during ${f.kind} of ${f.target},`)).length;
    out.push(
      `  ${f.kind} ${f.target} at ${((f.start - t0) / 1000).toFixed(1)} s for ${(((f.end ?? f.start) - f.start) / 1000).toFixed(1)} s${f.detail ? ` (${f.detail})` : ""}: acknowledged during it ${acked.length}${isNatsFault(f.kind) ? (lost ? `, ${lost} never delivered` : ", all delivered") : ""}; delivered twice ${dup.perFault[i]} (bound ${bound(f)})`,
    );
  });
  if (cluster) out.push(`stream at the end: ${finalReplicas ? `leader ${finalReplicas.leader}, followers ${finalReplicas.followers.map((f) => `${f.name} ${f.current ? "current" : `not current (lag ${f.lag})`}`).join(", ")}${allCurrent(finalReplicas, nodes) ? "" : " (not all current)"}` : "no leader answering"}`);
  for (const [k, text] of Object.entries(STREAM_INVARIANTS)) {
    const broken = violations.filter((x) => x.invariant === k);
    out.push(`  ${broken.length ? "BROKEN" : "held  "} ${k}. ${text}${broken.length ? ` (${broken.length} violations)` : ""}`);
    for (const b of broken.slice(0, 5)) out.push(`      ${b.key}: ${b.message}`);
  }
  out.push(violations.length === 0 ? `result: every invariant held (seed ${ctx.seed})` : `result: ${violations.length} violation(s); logs kept in ${ctx.tmp}. Replay this seed (same workload and fault schedule; timing varies): ${ctx.replay}`);
  console.log(out.join("\n"));
  return violations.length > 0 ? 1 : 0;
}

/** Why the last listing of a namespace's consumers failed (a stream not made yet, say): named when the wait for them gives up. */
let lastConsumerListError = "";

/** The consumers of the soak's two namespaces (each on its namespace's stream; none while it has no stream yet). */
async function soakConsumers(jsm: Awaited<ReturnType<StreamConnection["jetstreamManager"]>>): Promise<HooklineConsumer[]> {
  const out: HooklineConsumer[] = [];
  for (const ns of ["soak-sa", "soak-sb"]) {
    out.push(
      ...(await listConsumers(jsm, namespaceStreamName(STREAM_NAME, ns)).catch((err: unknown) => {
        lastConsumerListError = `${ns}: ${(err as Error).message}`;
        return [];
      })),
    );
  }
  return out;
}
