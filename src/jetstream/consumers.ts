// One durable JetStream consumer per WebhookSubscription: JetStream does the fan-out, each
// subscription reads its own copy of every matching event at its own pace, and the stream (with
// interest retention) keeps a message until every consumer that wants it acknowledged it.
//
// The consumer is named from the subscription's namespace, name and uid: readable, valid as a
// consumer name whatever the subscription's name (dots are not allowed), and new when a
// subscription is deleted and created again under the same name (a fresh consumer, no old
// position). Its metadata records the subscription, so the consumers of deleted subscriptions
// can be found and removed (orphanedConsumers), and the installation that made it
// (HOOKLINE_INSTALLATION), so that one installation never removes another's. Created and updated
// with the subscription:
//   filter_subjects   the subscription's eventTypes (subjects.ts)
//   max_ack_pending   spec.maxInFlight: at most that many messages out without an answer
//   ack_wait          the attempt timeout plus a margin: redelivered only when nobody answers
//   ack explicit, deliver new (a new subscription gets events published from now on, as a new
//   subscription gets no deliveries for earlier events in CR mode), redeliveries unlimited
//   (retries are the executor's: a negative acknowledgement with a delay).
// An event type removed from eventTypes stays in the filter until its waiting events are through
// (type-removal.ts): they are dead-lettered, not dropped.
import { createHash } from "node:crypto";
import { AckPolicy, DeliverPolicy, JetStreamApiError, ReplayPolicy, type ConsumerConfig, type ConsumerInfo, type JetStreamManager } from "@nats-io/jetstream";
import { filterSubjects } from "./subjects.js";
import { drainFilters, newlyRemoved, nextDraining, readDraining, REMOVED_SUBJECTS_METADATA, writeDraining } from "./type-removal.js";

/** The subscription a consumer belongs to. */
export interface SubscriptionIdentity {
  namespace: string;
  name: string;
  uid: string;
}

/** What a consumer takes from the subscription's resolved policy (core/attempt/policy.ts resolvePolicy). */
export interface ConsumerPolicy {
  eventTypes: readonly string[] | undefined;
  maxInFlight: number;
  timeoutMs: number;
}

/** Keys of a consumer's metadata (JetStream keeps them; `_nats` is reserved, ours are namespaced). */
export const CONSUMER_METADATA = {
  namespace: "hookline.dev/namespace",
  subscription: "hookline.dev/subscription",
  uid: "hookline.dev/uid",
  installation: "hookline.dev/installation",
} as const;

/**
 * Beyond the attempt's own timeout (the sender's hard deadline): time to wait for a rate-limit
 * token or a free slot and to record the outcome. A consumer that needs longer calls
 * `msg.working()`; a crashed replica's messages are redelivered after this long.
 */
export const ACK_WAIT_MARGIN_MS = 30_000;

const NANOS_PER_MS = 1_000_000;
const HASH_LENGTH = 16;
const OBJECT_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const CONSUMER_NOT_FOUND = 10014;
const CONSUMER_ALREADY_EXISTS = 10148;
/** Fields Hookline sets that JetStream cannot change on an existing consumer. */
const FIXED = ["ack_policy", "deliver_policy", "replay_policy"] as const;
/** Fields Hookline sets that an update may change. */
const MUTABLE = ["description", "filter_subjects", "max_ack_pending", "ack_wait", "max_deliver", "metadata"] as const;

/** A subscription that has no consumer: `field` names what is wrong. */
export class ConsumerSpecError extends Error {
  override readonly name = "ConsumerSpecError";
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

export const ackWaitMs = (timeoutMs: number): number => timeoutMs + ACK_WAIT_MARGIN_MS;

function check(sub: SubscriptionIdentity, policy?: ConsumerPolicy): void {
  if (sub.name.length === 0 || sub.name.length > 253 || !OBJECT_NAME.test(sub.name)) throw new ConsumerSpecError("metadata.name", `subscription name ${JSON.stringify(sub.name)} is not a Kubernetes object name`);
  if (sub.uid.trim() === "") throw new ConsumerSpecError("metadata.uid", "the subscription has no uid");
  if (!policy) return;
  if (!Number.isInteger(policy.maxInFlight) || policy.maxInFlight < 1) throw new ConsumerSpecError("spec.maxInFlight", `maxInFlight must be a positive integer, got ${policy.maxInFlight}`);
  if (!Number.isFinite(policy.timeoutMs) || policy.timeoutMs <= 0) throw new ConsumerSpecError("spec.timeout", `timeout must be positive, got ${policy.timeoutMs} ms`);
}

/** `text` as lowercase alphanumerics and single dashes, at most `max` characters. */
function readable(text: string, max: number): string {
  return (
    text
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, "-")
      .replace(/^-+/, "")
      .slice(0, max)
      .replace(/-+$/, "") || "x"
  );
}

/**
 * The durable consumer of a subscription: `<namespace>_<name>_<hash of namespace, name, uid>`,
 * the readable parts shortened; at most 63 characters of [a-z0-9_-]. Two subscriptions (or the
 * same name with another uid) never share one.
 */
export function consumerName(sub: SubscriptionIdentity): string {
  check(sub);
  const hash = createHash("sha256").update(JSON.stringify([sub.namespace, sub.name, sub.uid])).digest("hex").slice(0, HASH_LENGTH);
  return `${readable(sub.namespace, 20)}_${readable(sub.name, 25)}_${hash}`;
}

/** The consumer's configuration for a subscription (made by `installation`). Pure; throws SubjectError / ConsumerSpecError naming the field. */
export function consumerConfig(sub: SubscriptionIdentity, policy: ConsumerPolicy, installation?: string): Partial<ConsumerConfig> & { durable_name: string } {
  check(sub, policy);
  return {
    durable_name: consumerName(sub),
    description: `Hookline: WebhookSubscription ${sub.namespace}/${sub.name}`,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.New,
    replay_policy: ReplayPolicy.Instant,
    filter_subjects: filterSubjects(sub.namespace, policy.eventTypes),
    max_ack_pending: policy.maxInFlight,
    ack_wait: ackWaitMs(policy.timeoutMs) * NANOS_PER_MS,
    max_deliver: -1,
    metadata: {
      [CONSUMER_METADATA.namespace]: sub.namespace,
      [CONSUMER_METADATA.subscription]: sub.name,
      [CONSUMER_METADATA.uid]: sub.uid,
      ...(installation !== undefined ? { [CONSUMER_METADATA.installation]: installation } : {}),
    },
  };
}

const isCode = (err: unknown, code: number): boolean => err instanceof JetStreamApiError && err.code === code;

/** The consumer's current configuration compared with the wanted one: what an update must change. */
function differences(have: Partial<ConsumerConfig>, wanted: Partial<ConsumerConfig>): string[] {
  const norm = (k: (typeof MUTABLE)[number], c: Partial<ConsumerConfig>): unknown => {
    if (k === "filter_subjects") return [...(c.filter_subjects ?? (c.filter_subject ? [c.filter_subject] : []))].sort();
    if (k === "metadata") return Object.fromEntries(Object.entries(c.metadata ?? {}).filter(([key]) => !key.startsWith("_nats")).sort(([a], [b]) => (a < b ? -1 : 1)));
    return c[k];
  };
  return MUTABLE.filter((k) => JSON.stringify(norm(k, have)) !== JSON.stringify(norm(k, wanted)));
}

/**
 * Creates the subscription's consumer, or updates it (filter, maxInFlight, ack wait) when the
 * subscription changed. An update keeps the consumer's position and its messages out for
 * acknowledgement: nothing delivered and unacknowledged is lost; a filter subject removed keeps
 * draining until its waiting messages are answered (type-removal.ts), so call it again while
 * `draining` says so. A consumer of the same name that Hookline did not make (other ack or
 * deliver policy) is refused, not changed.
 */
export async function ensureConsumer(jsm: JetStreamManager, stream: string, sub: SubscriptionIdentity, policy: ConsumerPolicy, installation?: string): Promise<{ name: string; action: "created" | "updated" | "unchanged"; info: ConsumerInfo }> {
  const wanted = consumerConfig(sub, policy, installation);
  const name = wanted.durable_name;
  for (let attempt = 0; ; attempt++) {
    let info: ConsumerInfo | undefined;
    try {
      info = await jsm.consumers.info(stream, name);
    } catch (err) {
      if (!isCode(err, CONSUMER_NOT_FOUND)) throw err;
    }
    if (!info) {
      try {
        return { name, action: "created", info: await jsm.consumers.add(stream, wanted) };
      } catch (err) {
        // Another replica created it meanwhile: read it and compare, once.
        if (isCode(err, CONSUMER_ALREADY_EXISTS) && attempt === 0) continue;
        throw err;
      }
    }
    const fixed = FIXED.filter((k) => info.config[k] !== wanted[k]);
    if (fixed.length > 0) {
      throw new Error(`consumer ${name} on stream ${stream} exists with other ${fixed.join(", ")} than Hookline sets: it was not made by Hookline; delete it (nats consumer rm ${stream} ${name})`);
    }
    await withDraining(jsm, stream, info, wanted);
    const changed = differences(info.config, wanted);
    if (changed.length === 0) return { name, action: "unchanged", info };
    const delta = Object.fromEntries(MUTABLE.map((k) => [k, wanted[k]]));
    // One filter form only: the server refuses filter_subject and filter_subjects together.
    return { name, action: "updated", info: await jsm.consumers.update(stream, name, { ...delta, filter_subject: undefined }) };
  }
}

/** Widens `wanted` (filter, metadata) with the removed subjects whose waiting messages are not through yet. */
async function withDraining(jsm: JetStreamManager, stream: string, info: ConsumerInfo, wanted: Partial<ConsumerConfig>): Promise<void> {
  const have = info.config.filter_subjects ?? (info.config.filter_subject ? [info.config.filter_subject] : []);
  const want = wanted.filter_subjects ?? [];
  const draining = readDraining(info.config.metadata);
  // The stream's last sequence bounds what was published before the removal: read only when something was removed.
  const lastSeq = newlyRemoved(have, want, draining).length > 0 ? (await jsm.streams.info(stream)).state.last_seq : 0;
  const next = nextDraining({ have, wanted: want, draining, lastSeq, ackFloor: info.ack_floor.stream_seq, pending: info.num_pending, ackPending: info.num_ack_pending });
  const value = writeDraining(next);
  if (value === undefined) return;
  wanted.filter_subjects = drainFilters(want, next);
  wanted.metadata = { ...wanted.metadata, [REMOVED_SUBJECTS_METADATA]: value };
}

/** Deletes a consumer; false when it did not exist. Its unacknowledged messages are released (interest retention drops those nobody else wants). */
export async function deleteConsumer(jsm: JetStreamManager, stream: string, name: string): Promise<boolean> {
  try {
    return await jsm.consumers.delete(stream, name);
  } catch (err) {
    if (isCode(err, CONSUMER_NOT_FOUND)) return false;
    throw err;
  }
}

/** A consumer Hookline made, with the subscription it belongs to. */
export interface HooklineConsumer extends SubscriptionIdentity {
  consumer: string;
  filterSubjects: string[];
  /** Messages matching its filter not yet delivered to it. */
  pending: number;
  /** Messages delivered and not yet acknowledged. */
  ackPending: number;
  /** Event types removed from the subscription still drain through it (type-removal.ts): look again until they are through. */
  draining?: boolean;
  /** The installation that made it; undefined for one made before installations claimed consumers. */
  installation?: string;
}

/** Hookline's consumers on the stream (recognized by their metadata; others are left out). */
export async function listConsumers(jsm: JetStreamManager, stream: string): Promise<HooklineConsumer[]> {
  const out: HooklineConsumer[] = [];
  for await (const ci of jsm.consumers.list(stream)) {
    const md = ci.config.metadata ?? {};
    const namespace = md[CONSUMER_METADATA.namespace];
    const name = md[CONSUMER_METADATA.subscription];
    const uid = md[CONSUMER_METADATA.uid];
    if (namespace === undefined || name === undefined || uid === undefined) continue;
    out.push({
      consumer: ci.name,
      namespace,
      name,
      uid,
      filterSubjects: ci.config.filter_subjects ?? (ci.config.filter_subject ? [ci.config.filter_subject] : []),
      pending: ci.num_pending,
      ackPending: ci.num_ack_pending,
      draining: md[REMOVED_SUBJECTS_METADATA] !== undefined,
      ...(md[CONSUMER_METADATA.installation] !== undefined ? { installation: md[CONSUMER_METADATA.installation] } : {}),
    });
  }
  return out.sort((a, b) => (a.consumer < b.consumer ? -1 : a.consumer > b.consumer ? 1 : 0));
}

/**
 * Whether `installation` made the consumer: its metadata says so, or says nothing (made before
 * installations claimed consumers, on a stream this installation claims: its own).
 */
export const madeBy = (c: HooklineConsumer, installation: string | undefined): boolean => installation === undefined || c.installation === undefined || c.installation === installation;

/**
 * The consumers whose subscription no longer exists (by namespace, name and uid): delete them.
 * Pass every live subscription of the namespaces this operator serves; with `namespaces`, only
 * consumers of those are considered (another operator may own the rest); with `installation`,
 * only the consumers it made (madeBy). Pure.
 */
export function orphanedConsumers(consumers: readonly HooklineConsumer[], live: Iterable<SubscriptionIdentity>, namespaces?: readonly string[], installation?: string): HooklineConsumer[] {
  const keep = new Set([...live].map((s) => JSON.stringify([s.namespace, s.name, s.uid])));
  const served = namespaces?.length ? new Set(namespaces) : undefined;
  return consumers.filter((c) => madeBy(c, installation) && (!served || served.has(c.namespace)) && !keep.has(JSON.stringify([c.namespace, c.name, c.uid])));
}
