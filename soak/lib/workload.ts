// The workload: namespaces, Secrets and subscriptions generated from the seed and checked against
// the zod schemas before they are applied; deliveries created directly and through publish();
// edits of url, eventTypes and paused while deliveries are pending; secret rotation; single and
// bulk replays with valid and invalid reasons.
import { deliverySpecSchema } from "../../src/api/delivery.js";
import { ANNOTATIONS, API_VERSION, DELIVERY, SUBSCRIPTION } from "../../src/api/names.js";
import { subscriptionSpecSchema, type SubscriptionSpecInput } from "../../src/api/subscription.js";
import { ApiError, CONTENT_TYPE, type KubeClient } from "../../src/kube/client.js";
import { publish } from "../../src/publish/fanout.js";
import { collectionPath, objectPath, CORE } from "../../src/kube/types.js";
import { DELIVERIES, SUBSCRIPTIONS } from "../../bench/lib/kube.js";
import { sleep } from "../../bench/lib/util.js";
import type { History } from "./history.js";
import { payload } from "./payloads.js";
import type { Rng } from "./rng.js";

export const EVENT_TYPES = ["order.paid", "order.created", "order.refunded", "user.created", "user.deleted", "invoice.sent"];
const PATTERNS = ["order.*", "user.*", "*", "order.paid", "invoice.sent", "user.created"];

export interface SubPlan {
  ns: string;
  name: string;
  receiver: number;
  version: number;
  secret: { name: string; current: string; previous?: string; usesPrevious: boolean };
  /** Every secret this subscription ever signed with (for verification). */
  secrets: string[];
  scheme: "StandardWebhooks" | "HMACSHA256Hex";
  spec: SubscriptionSpecInput;
}

const whsec = (rng: Rng): string => `whsec_${Buffer.from(Array.from({ length: 24 }, () => rng.int(0, 255))).toString("base64")}`;
const dur = (ms: number): string => (ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`);

/** Retries what a stopped API server refuses, for up to `ms`. AlreadyExists after a retry is success. */
export async function withRetry<T>(what: () => Promise<T>, ms = 45_000): Promise<T | undefined> {
  const until = Date.now() + ms;
  for (let attempt = 0; ; attempt++) {
    try {
      return await what();
    } catch (err) {
      if (attempt > 0 && err instanceof ApiError && err.isAlreadyExists) return undefined;
      const retryable = !(err instanceof ApiError) || err.status === 429 || err.status >= 500;
      if (!retryable || Date.now() > until) throw err;
      await sleep(300);
    }
  }
}

export function planSubscription(rng: Rng, ns: string, name: string, receivers: number, url: (receiver: number, path: string) => string): SubPlan {
  const scheme = rng.chance(0.7) ? "StandardWebhooks" : "HMACSHA256Hex";
  const usesPrevious = scheme === "StandardWebhooks" && rng.chance(0.4);
  const secret = { name: `sec-${name}`, current: whsec(rng), previous: usesPrevious ? whsec(rng) : undefined, usesPrevious };
  const receiver = rng.int(0, receivers - 1);
  const initial = rng.int(100, 2_000);
  const spec: SubscriptionSpecInput = {
    url: url(receiver, `/e/${ns}.${name}/v1`),
    ...(rng.chance(0.8) ? { eventTypes: [rng.pick(PATTERNS), ...(rng.chance(0.3) ? [rng.pick(PATTERNS)] : [])].filter((v, i, a) => a.indexOf(v) === i) } : {}),
    secretRef: { name: secret.name, key: "current", ...(usesPrevious ? { previousKey: "previous" } : {}) },
    signature: { scheme },
    ...(rng.chance(0.3) ? { headers: { "X-Soak": "yes", "x-tenant": `t-${rng.int(1, 99)}` } } : {}),
    timeout: dur(rng.int(5, 40) * 100),
    retry: {
      maxAttempts: rng.int(1, 8),
      initialBackoff: dur(initial),
      multiplier: rng.int(1, 3),
      maxBackoff: dur(initial * rng.int(1, 8)),
      jitterPercent: rng.int(0, 50),
      respectRetryAfter: rng.chance(0.8),
    },
    circuitBreaker: {
      failureThreshold: rng.int(2, 10),
      successThreshold: rng.int(1, 2),
      cooldown: `${rng.int(2, 8)}s`,
      whenOpen: rng.chance(0.75) ? "Defer" : "DeadLetter",
    },
    maxInFlight: rng.int(1, 10),
    ...(rng.chance(0.2) ? { rateLimit: { perSecond: rng.int(2, 20), burst: rng.int(1, 20) } } : {}),
    deadLetter: { maxEntries: 10_000, maxReplays: rng.int(0, 3) },
    retention: { succeeded: "24h", deadLettered: "24h" },
    paused: rng.chance(0.1),
  };
  subscriptionSpecSchema.parse(spec); // a generator bug, not a product defect: fail loudly
  return { ns, name, receiver, version: 1, secret, secrets: [secret.current, ...(secret.previous ? [secret.previous] : [])], scheme, spec };
}

export async function applySubscription(client: KubeClient, p: SubPlan): Promise<void> {
  const data: Record<string, string> = { current: Buffer.from(p.secret.current).toString("base64") };
  if (p.secret.previous) data.previous = Buffer.from(p.secret.previous).toString("base64");
  const secret = { apiVersion: "v1", kind: "Secret", metadata: { name: p.secret.name, namespace: p.ns }, data };
  await withRetry(() => client.request({ method: "PATCH", path: objectPath(CORE.secrets, p.ns, p.secret.name), query: { fieldManager: "soak", force: true }, contentType: CONTENT_TYPE.apply, body: secret }));
  const obj = { apiVersion: API_VERSION, kind: SUBSCRIPTION.kind, metadata: { name: p.name, namespace: p.ns }, spec: p.spec };
  await withRetry(() => client.request({ method: "PATCH", path: objectPath(SUBSCRIPTIONS, p.ns, p.name), query: { fieldManager: "soak", force: true }, contentType: CONTENT_TYPE.apply, body: obj }));
}

export async function ensureNamespace(client: KubeClient, ns: string): Promise<void> {
  await withRetry(async () => {
    try {
      await client.request({ method: "POST", path: collectionPath(CORE.namespaces), body: { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } } });
    } catch (err) {
      if (!(err instanceof ApiError && err.isAlreadyExists)) throw err;
    }
  });
}

export class Workload {
  private n = 0;
  constructor(
    private readonly client: KubeClient,
    private readonly rng: Rng,
    private readonly subs: SubPlan[],
    private readonly history: History,
    private readonly quick: boolean,
    private readonly url: (receiver: number, path: string) => string,
    private readonly say: (line: string) => void,
  ) {}

  readonly counts = { created: 0, published: 0, publishedDeliveries: 0, edits: 0, rotations: 0, replays: 0, invalidReplays: 0, bulkReplays: 0, createErrors: 0 };

  /** One seeded step of the workload. */
  async step(): Promise<void> {
    const action = this.rng.weighted([
      ["create", 10],
      ["publish", 4],
      ["edit", 1],
      ["rotate", 0.4],
      ["replay", 1.2],
      ["bulkReplay", 0.4],
    ] as const);
    try {
      if (action === "create") await this.create();
      else if (action === "publish") await this.publish();
      else if (action === "edit") await this.edit();
      else if (action === "rotate") await this.rotate();
      else if (action === "replay") await this.replay();
      else await this.bulkReplay();
    } catch (err) {
      this.counts.createErrors++;
      this.say(`workload ${action} failed (API server down?): ${(err as Error).message.slice(0, 200)}`);
    }
  }

  private async create(): Promise<void> {
    const sub = this.rng.pick(this.subs);
    const name = `d-${++this.n}`;
    const p = payload(this.rng, this.quick);
    const spec = {
      subscriptionRef: { name: sub.name },
      eventType: this.rng.pick(EVENT_TYPES),
      ...(this.rng.chance(0.3) ? { eventId: `evt-${this.n}-${randomId(this.rng)}` } : {}),
      ...(p.value !== undefined ? { payload: p.value } : {}),
    };
    deliverySpecSchema.parse(spec);
    const body = { apiVersion: API_VERSION, kind: DELIVERY.kind, metadata: { name, namespace: sub.ns }, spec };
    this.history.accepted.set(`${sub.ns}/${name}`, { at: Date.now(), via: "create", payloadKind: p.kind });
    await withRetry(() => this.client.request({ method: "POST", path: collectionPath(DELIVERIES, sub.ns), body }));
    this.counts.created++;
  }

  private async publish(): Promise<void> {
    const ns = this.rng.pick([...new Set(this.subs.map((s) => s.ns))]);
    const p = payload(this.rng, this.quick);
    const id = `pub-${++this.n}-${randomId(this.rng)}`;
    const r = await withRetry(() => publish(this.client, { namespace: ns, type: this.rng.pick(EVENT_TYPES), id, data: p.value ?? null }));
    this.counts.published++;
    for (const d of r?.deliveries ?? []) {
      this.history.accepted.set(`${ns}/${d.name}`, { at: Date.now(), via: "publish", payloadKind: p.kind });
      this.counts.publishedDeliveries++;
    }
  }

  private async patchSub(sub: SubPlan, spec: Record<string, unknown>): Promise<void> {
    await withRetry(() =>
      this.client.request({ method: "PATCH", path: objectPath(SUBSCRIPTIONS, sub.ns, sub.name), contentType: CONTENT_TYPE.merge, body: { spec } }),
    );
  }

  /** url (new path, maybe the other receiver), eventTypes, or paused. */
  private async edit(): Promise<void> {
    const sub = this.rng.pick(this.subs);
    const what = this.rng.pick(["url", "eventTypes", "paused"] as const);
    this.counts.edits++;
    if (what === "url") {
      sub.version++;
      sub.receiver = this.rng.int(0, 1);
      sub.spec.url = this.url(sub.receiver, `/e/${sub.ns}.${sub.name}/v${sub.version}`);
      await this.patchSub(sub, { url: sub.spec.url });
    } else if (what === "eventTypes") {
      sub.spec.eventTypes = [this.rng.pick(PATTERNS)];
      await this.patchSub(sub, { eventTypes: sub.spec.eventTypes });
    } else {
      sub.spec.paused = !sub.spec.paused;
      await this.patchSub(sub, { paused: sub.spec.paused });
    }
  }

  /** The new secret becomes current and the old one previous (rotation without downtime). */
  async rotate(): Promise<void> {
    const candidates = this.subs.filter((s) => s.scheme === "StandardWebhooks");
    if (candidates.length === 0) return;
    const sub = this.rng.pick(candidates);
    const fresh = whsec(this.rng);
    sub.secret.previous = sub.secret.current;
    sub.secret.current = fresh;
    sub.secrets.push(fresh);
    sub.spec.secretRef = { name: sub.secret.name, key: "current", previousKey: "previous" };
    await applySubscription(this.client, sub);
    this.counts.rotations++;
  }

  private deadLetters(): string[] {
    return [...this.history.deliveries.values()].filter((d) => d.states.at(-1)?.phase === "DeadLettered").map((d) => d.key).sort();
  }

  private async replay(): Promise<void> {
    const dls = this.deadLetters();
    if (dls.length === 0) return;
    const key = this.rng.pick(dls);
    const [ns, name] = key.split("/") as [string, string];
    const valid = this.rng.chance(0.8);
    const reason = valid ? `soak replay ${this.n} ${this.rng.pick(["endpoint fixed", "INC-42", "retry ✓ 日本"])}` : this.rng.pick(["x", "", "abc"]);
    await withRetry(() =>
      this.client.request({ method: "PATCH", path: objectPath(DELIVERIES, ns, name), contentType: CONTENT_TYPE.merge, body: { metadata: { annotations: { [ANNOTATIONS.replay]: reason } } } }),
    );
    if (valid) this.counts.replays++;
    else this.counts.invalidReplays++;
  }

  private async bulkReplay(): Promise<void> {
    const sub = this.rng.pick(this.subs);
    const reason = this.rng.chance(0.85) ? `bulk soak replay ${++this.n}` : "no";
    await this.client.request({
      method: "PATCH",
      path: objectPath(SUBSCRIPTIONS, sub.ns, sub.name),
      contentType: CONTENT_TYPE.merge,
      body: { metadata: { annotations: { [ANNOTATIONS.replayDeadLetters]: reason, [ANNOTATIONS.replayConcurrency]: String(this.rng.int(1, 5)) } } },
    });
    this.counts.bulkReplays++;
  }

  /** Settle: unpause every subscription so every delivery can finish. */
  async unpauseAll(): Promise<void> {
    for (const sub of this.subs) {
      if (!sub.spec.paused) continue;
      sub.spec.paused = false;
      await this.patchSub(sub, { paused: false });
    }
  }
}

function randomId(rng: Rng): string {
  return rng.int(0, 0xffffff).toString(16);
}

