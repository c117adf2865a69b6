// The one prom-client Registry (created by the composition root) and every metric Hookline
// exports. Names and labels of the webhook_* metrics are the contract; label
// values are bounded (namespace, subscription, a closed set of reasons), never raw error text.
import { DEFAULT_PROVIDERS, providerLabel } from "../core/provider.js";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { RequestObserver, Verb } from "../kube/client.js";
import { VERSION } from "../version.js";

const BREAKER_STATES = ["Closed", "Open", "HalfOpen"] as const;
const HEALTH_STATES = ["Healthy", "Degraded", "Disabled"] as const;

/** What the subscription rollup knows of one subscription, for the per-subscription gauges. */
export interface SubscriptionNumbers {
  breaker: (typeof BREAKER_STATES)[number];
  health: (typeof HEALTH_STATES)[number];
  deadLetters: number;
  /** Deliveries not finished (Pending or Retrying). */
  backlog: number;
  /** Creation time (epoch ms) of the oldest unfinished delivery; undefined when there is none. */
  oldestPendingCreatedAt: number | undefined;
  /** Last successful attempt (epoch ms). */
  lastSuccessAt: number | undefined;
}

export type AttemptStatus = "success" | "failure";

export class Metrics implements RequestObserver {
  readonly registry = new Registry();
  readonly attempts: Counter<"namespace" | "subscription" | "provider" | "status" | "reason">;
  readonly held: Counter<"namespace" | "subscription" | "reason">;
  readonly attemptDuration: Histogram<"namespace" | "subscription">;
  readonly breakerState: Gauge<"namespace" | "subscription" | "provider">;
  readonly eventsFiltered: Counter<"namespace" | "subscription" | "result">;
  readonly notifications: Counter<"namespace" | "subscription" | "event">;
  readonly dlqOperations: Counter<"operation">;
  readonly dlqEntries: Gauge<"namespace" | "subscription">;
  readonly inFlight: Gauge;
  readonly drain: Counter<"result">;
  readonly leader: Gauge;
  readonly leaderLateAnswers: Counter<"write">;
  readonly apiRequests: Counter<"verb" | "resource" | "code">;
  readonly apiRequestDuration: Histogram<"verb">;
  readonly queueDepth: Gauge<"controller">;
  readonly reconciles: Counter<"controller" | "result">;
  readonly reconcileDuration: Histogram<"controller">;
  readonly endpointHealth: Gauge<"namespace" | "subscription">;
  readonly deliveriesFinished: Counter<"namespace" | "subscription" | "phase" | "reason">;
  readonly deliveryLatency: Histogram<"namespace" | "subscription">;
  readonly backlog: Gauge<"namespace" | "subscription">;
  readonly oldestPending: Gauge<"namespace" | "subscription">;
  readonly lastSuccess: Gauge<"namespace" | "subscription">;
  readonly breakerStatus: Gauge<"namespace" | "subscription" | "state">;
  readonly healthStatus: Gauge<"namespace" | "subscription" | "state">;
  readonly buildInfo: Gauge<"version" | "node_version">;
  /** Stream mode: events of a subscription not acknowledged yet (its consumer's lag). Leader only. */
  readonly streamPending: Gauge<"namespace" | "subscription">;
  /** Stream mode: final outcomes that could not be recorded as a WebhookDelivery (the message is kept and tried again). */
  readonly streamDeadLetterFailures: Counter<"namespace" | "subscription" | "reason">;
  /** Stream mode: messages terminated because they do not belong to their subject (reason subject or msg_id). */
  readonly streamRejected: Counter<"namespace" | "reason">;
  /**
   * Set while this process leads. Breaker state, dead letters and endpoint health per
   * subscription are maintained by the leader only: a replica that does not lead neither sets
   * nor exports them, so `sum by` over replicas counts each subscription once.
   */
  private leading = false;
  /** The storage budget's series (docs/capacity.md), kept in their own block below. */
  readonly storage = storageMetrics(this.registry, () => this.leading);
  /** The HTTP publish door's refusals of unauthenticated callers, in their own block below. */
  readonly publishDoor = publishDoorMetrics(this.registry);
  /** Stream mode's bounds: memory held per replica, each namespace's quota and age (docs/stream-mode.md#limits). */
  readonly streamLimits = streamLimitMetrics(this.registry, () => this.leading);
  /** The OAuth2 token cache (spec.oauth2) and its bounds, in their own block below. */
  readonly oauth2 = oauth2Metrics(this.registry);
  /** The kept payloads (HOOKLINE_PAYLOAD_CACHE_BYTES), in their own block below. */
  readonly payloadCache = payloadCacheMetrics(this.registry);
  /**
   * hookline_events_dropped_total{namespace}: Events not written because their namespace had
   * spent its budget (src/kube/events.ts EVENT_BUDGET). The label is bounded by the namespaces served.
   */
  readonly eventsDropped = new Counter({
    name: "hookline_events_dropped_total",
    help: "Kubernetes Events about a namespace's objects not written because the namespace had spent its budget (100 at once, then 5 a second): each outcome is still in its delivery's status.",
    labelNames: ["namespace"],
    registers: [this.registry],
  });

  private providersAllowed: ReadonlySet<string> = new Set(DEFAULT_PROVIDERS);
  private providerLabelOf: (namespace: string, subscription: string) => string | undefined = () => undefined;
  /** The provider of each subscription's webhook_breaker_state series, to remove it. */
  private readonly breakerProviders = new Map<string, string>();
  /** Attempts counted and not yet added to `attempts`, by label set (one entry per series, as the counter keeps). */
  private readonly pendingAttempts = new Map<string, { labels: Record<"namespace" | "subscription" | "provider" | "status" | "reason", string>; n: number }>();

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    if (opts.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: "hookline_" });
    const pendingAttempts = this.pendingAttempts;
    this.attempts = new Counter({
      // What countAttempt counted since the last read goes in when the counter is read (a
      // scrape, get()): prom-client hashes a label set on every inc, a Map lookup here does not.
      collect() {
        for (const p of pendingAttempts.values()) {
          if (p.n === 0) continue;
          this.inc(p.labels, p.n);
          p.n = 0;
        }
      },
      name: "webhook_delivery_attempts_total",
      help: "Delivery attempts by outcome. status: success|failure; reason: http_2xx, http_5xx, timeout, network, circuit_open, ...; provider: the subscription's hookline.dev/provider label if in HOOKLINE_METRIC_PROVIDERS, else generic.",
      labelNames: ["namespace", "subscription", "provider", "status", "reason"],
      registers,
    });
    this.held = new Counter({
      name: "webhook_delivery_held_total",
      help: "Attempts not made because the endpoint held them: reason circuit_open (an Open breaker with whenOpen Defer), retry_after (the endpoint's Retry-After). One per delivery per hold.",
      labelNames: ["namespace", "subscription", "reason"],
      registers,
    });
    this.attemptDuration = new Histogram({
      name: "webhook_delivery_duration_seconds",
      help: "Duration of one delivery attempt, from request start to response headers or error.",
      labelNames: ["namespace", "subscription"],
      // Up past the longest per-attempt timeout (120 s).
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 180],
      registers,
    });
    this.breakerState = new Gauge({
      name: "webhook_breaker_state",
      help: "Circuit breaker state per subscription: 0 Closed, 1 Open, 2 HalfOpen. provider as on webhook_delivery_attempts_total.",
      labelNames: ["namespace", "subscription", "provider"],
      registers,
    });
    this.notifications = new Counter({
      name: "webhook_notifications_total",
      help: "Notifications created for a subscription's spec.notify, by event: endpoint.unhealthy, endpoint.breaker_opened, endpoint.throttled, delivery.dead_lettered (one per change of state).",
      labelNames: ["namespace", "subscription", "event"],
      registers,
    });
    this.eventsFiltered = new Counter({
      name: "webhook_events_filtered_total",
      help: "Events a subscription's spec.filter was evaluated on at fan-out, by result: matched, filtered (false), error (failed on this event, or over its cost budget), invalid (the filter does not compile).",
      labelNames: ["namespace", "subscription", "result"],
      registers,
    });
    this.dlqOperations = new Counter({
      name: "webhook_dlq_operations_total",
      help: "Dead-letter operations: enqueue, replay, drop_overflow, drop_poison.",
      labelNames: ["operation"],
      registers,
    });
    this.dlqEntries = new Gauge({
      name: "webhook_dlq_entries",
      help: "Dead letters held per subscription.",
      labelNames: ["namespace", "subscription"],
      registers,
    });
    this.inFlight = new Gauge({ name: "webhook_deliveries_in_flight", help: "Delivery requests in flight.", registers });
    this.drain = new Counter({ name: "webhook_drain_total", help: "Shutdown drains: drained (all in-flight finished) or timeout.", labelNames: ["result"], registers });
    this.leader = new Gauge({ name: "hookline_leader", help: "1 while this process is the leader and delivers, 0 otherwise.", registers });
    this.leaderLateAnswers = new Counter({
      name: "hookline_leader_late_lease_answers_total",
      help: "Lease writes that went through but whose answer this process read past the renew deadline (it was paused or starved meanwhile), by write: acquire (not led on) or renew (it stepped down).",
      labelNames: ["write"],
      registers,
    });
    for (const write of ["acquire", "renew"]) this.leaderLateAnswers.inc({ write }, 0);
    this.apiRequests = new Counter({
      name: "hookline_kube_api_requests_total",
      help: "Kubernetes API requests by verb, resource and HTTP code (0: no response).",
      labelNames: ["verb", "resource", "code"],
      registers,
    });
    this.apiRequestDuration = new Histogram({
      name: "hookline_kube_api_request_duration_seconds",
      help: "Kubernetes API request latency (watches excluded).",
      labelNames: ["verb"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.queueDepth = new Gauge({ name: "hookline_workqueue_depth", help: "Keys ready to reconcile, per controller.", labelNames: ["controller"], registers });
    this.reconciles = new Counter({ name: "hookline_reconcile_total", help: "Reconciles by controller and result.", labelNames: ["controller", "result"], registers });
    this.reconcileDuration = new Histogram({
      name: "hookline_reconcile_duration_seconds",
      help: "How long one reconcile took, per controller (a delivery's includes its attempt: buckets reach past the longest attempt timeout, 120 s).",
      labelNames: ["controller"],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 150],
      registers,
    });
    this.endpointHealth = new Gauge({
      name: "webhook_endpoint_health",
      help: "Endpoint health per subscription: 0 Healthy, 1 Degraded, 2 Disabled.",
      labelNames: ["namespace", "subscription"],
      registers,
    });
    this.deliveriesFinished = new Counter({
      name: "webhook_deliveries_finished_total",
      help: "Deliveries that reached a final phase (Succeeded, DeadLettered, Discarded), with the reason.",
      labelNames: ["namespace", "subscription", "phase", "reason"],
      registers,
    });
    this.deliveryLatency = new Histogram({
      name: "webhook_delivery_latency_seconds",
      help: "From a delivery's creation to its successful attempt (retries, waits and backoff included).",
      labelNames: ["namespace", "subscription"],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 21600, 86400],
      registers,
    });
    this.backlog = new Gauge({ name: "webhook_subscription_backlog", help: "Deliveries not finished (Pending or Retrying) per subscription.", labelNames: ["namespace", "subscription"], registers });
    this.oldestPending = new Gauge({
      name: "webhook_subscription_oldest_pending_timestamp_seconds",
      help: "Creation time (Unix seconds) of the oldest unfinished delivery per subscription; absent when none. Age: time() - this.",
      labelNames: ["namespace", "subscription"],
      registers,
    });
    this.lastSuccess = new Gauge({ name: "webhook_endpoint_last_success_timestamp_seconds", help: "Time (Unix seconds) of the last successful attempt per subscription.", labelNames: ["namespace", "subscription"], registers });
    this.breakerStatus = new Gauge({ name: "webhook_breaker_status", help: "Circuit breaker state per subscription, one series per state (1 for the current one).", labelNames: ["namespace", "subscription", "state"], registers });
    this.healthStatus = new Gauge({ name: "webhook_endpoint_health_status", help: "Endpoint health per subscription, one series per state (1 for the current one).", labelNames: ["namespace", "subscription", "state"], registers });
    this.streamPending = new Gauge({
      name: "webhook_stream_pending_messages",
      help: "Stream mode: events a subscription's JetStream consumer holds that are not acknowledged yet (not yet fetched, in flight, or waiting for a retry). Exported by the leader.",
      labelNames: ["namespace", "subscription"],
      registers,
    });
    this.streamDeadLetterFailures = new Counter({
      name: "webhook_stream_dead_letter_failures_total",
      help: "Stream mode: dead letters (and discards) that could not be created as a WebhookDelivery, by reason: forbidden (the operator may not create webhookdeliveries: RBAC), quota (a ResourceQuota), refused (another 4xx), error (unreachable, 5xx). The message stays in the stream and is tried again.",
      labelNames: ["namespace", "subscription", "reason"],
      registers,
    });
    this.streamRejected = new Counter({
      name: "webhook_stream_messages_rejected_total",
      help: "Stream mode: messages terminated without delivery because they do not belong to their subject, by the subject's namespace and reason: subject (the event names another namespace or type) or msg_id (its Nats-Msg-Id is not <namespace>/<event id> of its event). Only that namespace's publishers, or the operator, may publish there.",
      labelNames: ["namespace", "reason"],
      registers,
    });
    this.buildInfo = new Gauge({ name: "hookline_build_info", help: "Always 1; the labels say which Hookline and Node.js run.", labelNames: ["version", "node_version"], registers });
    this.initFixedSeries();
  }

  /** A delivery succeeded: its latency from creation (RFC 3339) to now. */
  delivered(namespace: string, subscription: string, createdAt: string | undefined, now = Date.now()): void {
    const created = createdAt ? Date.parse(createdAt) : NaN;
    if (Number.isFinite(created)) this.deliveryLatency.observe({ namespace, subscription }, Math.max(0, (now - created) / 1000));
  }

  /** The on-call numbers of one subscription, from its rollup; ignored on a replica that does not lead. */
  setSubscriptionNumbers(namespace: string, subscription: string, n: SubscriptionNumbers): void {
    if (!this.leading) return;
    const labels = { namespace, subscription };
    this.backlog.set(labels, n.backlog);
    if (n.oldestPendingCreatedAt === undefined) this.oldestPending.remove(labels);
    else this.oldestPending.set(labels, n.oldestPendingCreatedAt / 1000);
    if (n.lastSuccessAt !== undefined) this.lastSuccess.set(labels, n.lastSuccessAt / 1000);
    for (const state of BREAKER_STATES) this.breakerStatus.set({ ...labels, state }, state === n.breaker ? 1 : 0);
    for (const state of HEALTH_STATES) this.healthStatus.set({ ...labels, state }, state === n.health ? 1 : 0);
  }

  /** Series that exist from the start, so rate() and increase() see their first increment. */
  private initFixedSeries(): void {
    for (const operation of ["enqueue", "replay", "drop_overflow", "drop_poison"]) this.dlqOperations.inc({ operation }, 0);
    for (const result of ["drained", "timeout"]) this.drain.inc({ result }, 0);
    this.leader.set(0);
    this.buildInfo.set({ version: VERSION, node_version: process.version }, 1);
  }

  /** Leadership began or ended: hookline_leader, and the series only the leader maintains. */
  setLeading(leading: boolean): void {
    this.leading = leading;
    this.leader.set(leading ? 1 : 0);
    if (leading) return;
    for (const g of [this.breakerState, this.dlqEntries, this.endpointHealth, this.queueDepth, this.backlog, this.oldestPending, this.lastSuccess, this.breakerStatus, this.healthStatus, this.streamPending]) g.reset();
    this.breakerProviders.clear();
    this.streamLimits.notLeading();
  }

  /**
   * Where the provider label comes from: the allowed values (HOOKLINE_METRIC_PROVIDERS) and the
   * subscription's hookline.dev/provider label (from the watch cache). Unset: generic.
   */
  setProviders(allowed: readonly string[], labelOf: (namespace: string, subscription: string) => string | undefined): void {
    this.providersAllowed = new Set(allowed);
    this.providerLabelOf = labelOf;
  }

  /** The provider label of a subscription's series (core/provider.ts). */
  providerOf(namespace: string, subscription: string): string {
    return providerLabel(this.providerLabelOf(namespace, subscription), this.providersAllowed);
  }

  /**
   * One attempt (or one attempt not made: circuit_open) in webhook_delivery_attempts_total: counted
   * here, added to the counter when it is read (its collect). prom-client's inc joins the five
   * labels and checks each on every call: 2.65 µs a call against 0.26 µs here, about 1% of a
   * core at 4,000 attempts a second. The provider is the subscription's at the time of the attempt.
   */
  countAttempt(labels: { namespace: string; subscription: string }, status: "success" | "failure", reason: string): void {
    const provider = this.providerOf(labels.namespace, labels.subscription);
    // Namespace and subscription names are DNS labels or subdomains: no newline in any of them.
    const key = `${labels.namespace}\n${labels.subscription}\n${provider}\n${status}\n${reason}`;
    const p = this.pendingAttempts.get(key);
    if (p) p.n++;
    else this.pendingAttempts.set(key, { labels: { namespace: labels.namespace, subscription: labels.subscription, provider, status, reason }, n: 1 });
  }

  /** The leader-only gauges of one subscription; ignored on a replica that does not lead. */
  setSubscriptionGauges(namespace: string, subscription: string, values: { breaker?: number; health?: number; deadLetters?: number }): void {
    if (!this.leading) return;
    const labels = { namespace, subscription };
    if (values.breaker !== undefined) {
      // One series per subscription: a provider label changed since drops the old one.
      const key = `${namespace}/${subscription}`;
      const provider = this.providerOf(namespace, subscription);
      const before = this.breakerProviders.get(key);
      if (before !== undefined && before !== provider) this.breakerState.remove({ ...labels, provider: before });
      this.breakerProviders.set(key, provider);
      this.breakerState.set({ ...labels, provider }, values.breaker);
    }
    if (values.health !== undefined) this.endpointHealth.set(labels, values.health);
    if (values.deadLetters !== undefined) this.dlqEntries.set(labels, values.deadLetters);
  }

  /** Stream mode: a subscription's consumer lag; ignored on a replica that does not lead. */
  setStreamPending(namespace: string, subscription: string, pending: number): void {
    if (this.leading) this.streamPending.set({ namespace, subscription }, pending);
  }

  /** A subscription seen for the first time: start its success series at 0. */
  initSubscription(namespace: string, subscription: string): void {
    this.attempts.inc({ namespace, subscription, provider: this.providerOf(namespace, subscription), status: "success", reason: "http_2xx" }, 0);
    this.held.inc({ namespace, subscription, reason: "circuit_open" }, 0);
  }

  observe(verb: Verb, resource: string, code: number, seconds: number): void {
    this.apiRequests.inc({ verb, resource, code: String(code) });
    if (verb !== "watch") this.apiRequestDuration.observe({ verb }, seconds);
  }

  reconciled(controller: string, result: string, seconds: number): void {
    this.reconciles.inc({ controller, result });
    this.reconcileDuration.observe({ controller }, seconds);
  }

  /** Forget the series of a deleted subscription (bounded label sets). */
  forgetSubscription(namespace: string, subscription: string): void {
    for (const m of [this.dlqEntries, this.endpointHealth, this.backlog, this.oldestPending, this.lastSuccess, this.streamPending]) m.remove({ namespace, subscription });
    const provider = this.breakerProviders.get(`${namespace}/${subscription}`);
    if (provider !== undefined) this.breakerState.remove({ namespace, subscription, provider });
    this.breakerProviders.delete(`${namespace}/${subscription}`);
    for (const m of [this.breakerStatus, this.healthStatus]) {
      for (const state of [...BREAKER_STATES, ...HEALTH_STATES]) m.remove({ namespace, subscription, state });
    }
  }

  /** API requests so far by verb (summed over resources), for tests and the benchmark. */
  async apiRequestCounts(filter?: (labels: { verb: string; resource: string }) => boolean): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const v of (await this.apiRequests.get()).values) {
      const labels = v.labels as { verb: string; resource: string };
      if (filter && !filter(labels)) continue;
      out[labels.verb] = (out[labels.verb] ?? 0) + v.value;
    }
    return out;
  }
}

// ---------------------------------------------------------------------------------------------
// The storage budget (WEBHOOK_MAX_FINISHED_DELIVERIES, docs/capacity.md).

export type StoredPhase = "Pending" | "Retrying" | "Succeeded" | "Discarded" | "DeadLettered";
export const STORED_PHASES: readonly StoredPhase[] = ["Pending", "Retrying", "Succeeded", "Discarded", "DeadLettered"];
export const FINISHED_PHASES = ["Succeeded", "Discarded", "DeadLettered"] as const;

export interface StorageMetrics {
  /** Finished deliveries deleted because the cluster held more than the budget. */
  evicted: Counter<"phase">;
  /** The configured budget, so an alert can compare the stored count with it. */
  budget: Gauge;
  /** Deliveries stored in the API server by phase; the leader answers it (read at scrape time). */
  stored: Gauge<"phase">;
  /** Where `stored` reads its counts from (set by the terminal index). */
  setStoredSource(source: () => Partial<Record<StoredPhase, number>>): void;
  /** Finished deliveries stored per namespace and phase (the fair shares' input); the leader answers it. */
  namespaceStored: Gauge<"namespace" | "phase">;
  /** Where `namespaceStored` reads its counts from. */
  setNamespaceSource(source: () => ReadonlyMap<string, Readonly<Record<FinishedPhase, number>>>): void;
  /** Finished deliveries deleted because their namespace was over its fair share of a cluster-wide limit. */
  namespaceEvictions: Counter<"namespace" | "phase" | "limit">;
}

export type FinishedPhase = (typeof FINISHED_PHASES)[number];
/** The cluster-wide limits shared fairly between namespaces (the `limit` label). */
export const SHARED_LIMITS = ["max_finished_deliveries", "dlq_max_entries"] as const;

function storageMetrics(registry: Registry, leading: () => boolean): StorageMetrics {
  const registers = [registry];
  let source: (() => Partial<Record<StoredPhase, number>>) | undefined;
  const evicted = new Counter({
    name: "webhook_deliveries_evicted_total",
    help: "Finished deliveries deleted because the cluster held more than WEBHOOK_MAX_FINISHED_DELIVERIES, by phase (Succeeded first, then Discarded, then DeadLettered).",
    labelNames: ["phase"],
    registers,
  });
  for (const phase of FINISHED_PHASES) evicted.inc({ phase }, 0);
  const budget = new Gauge({ name: "webhook_finished_deliveries_budget", help: "WEBHOOK_MAX_FINISHED_DELIVERIES: finished deliveries kept before the oldest are deleted.", registers });
  const stored = new Gauge({
    name: "webhook_deliveries_stored",
    help: "WebhookDeliveries stored in the API server by phase (Succeeded and Discarded as of the last sweep plus the watch since). Exported by the leader only.",
    labelNames: ["phase"],
    registers,
    collect() {
      this.reset();
      if (!leading() || !source) return;
      const counts = source();
      for (const phase of STORED_PHASES) this.set({ phase }, counts[phase] ?? 0);
    },
  });
  let namespaceSource: (() => ReadonlyMap<string, Readonly<Record<FinishedPhase, number>>>) | undefined;
  const namespaceStored = new Gauge({
    name: "webhook_namespace_finished_deliveries",
    help: "Finished deliveries stored per namespace and phase (Succeeded and Discarded as of the last sweep plus the watch since): what the namespace's fair share of WEBHOOK_MAX_FINISHED_DELIVERIES and WEBHOOK_DLQ_MAX_ENTRIES is measured against. Exported by the leader only.",
    labelNames: ["namespace", "phase"],
    registers,
    collect() {
      this.reset();
      if (!leading() || !namespaceSource) return;
      for (const [namespace, counts] of namespaceSource()) for (const phase of FINISHED_PHASES) this.set({ namespace, phase }, counts[phase] ?? 0);
    },
  });
  const namespaceEvictions = new Counter({
    name: "webhook_namespace_evictions_total",
    help: "Finished deliveries deleted because their namespace held more than its fair share of a cluster-wide limit (limit: max_finished_deliveries, dlq_max_entries), by namespace and phase.",
    labelNames: ["namespace", "phase", "limit"],
    registers,
  });
  return { evicted, budget, stored, setStoredSource: (s) => (source = s), namespaceStored, setNamespaceSource: (s) => (namespaceSource = s), namespaceEvictions };
}

/** Why the publish door refused a caller's credentials: the reason the caller is not told. */
export const PUBLISH_AUTH_FAILURE_REASONS = ["missing_token", "invalid_token", "wrong_audience"] as const;
export type PublishAuthFailureReason = (typeof PUBLISH_AUTH_FAILURE_REASONS)[number];

export interface PublishDoorMetrics {
  /** hookline_publish_auth_failures_total{reason}: answered 401. */
  authFailures: Counter<"reason">;
  /** hookline_publish_auth_throttled_total: answered 429, too many failed authentications from the address. */
  authThrottled: Counter;
  /** hookline_publish_authz_throttled_total: answered 429 without a SubjectAccessReview, too many refused authorizations for the caller. */
  authzThrottled: Counter;
}

function publishDoorMetrics(registry: Registry): PublishDoorMetrics {
  const registers = [registry];
  const authFailures = new Counter({
    name: "hookline_publish_auth_failures_total",
    help: "Publish door requests refused 401, by why the credentials failed: missing_token, invalid_token (unknown, expired, revoked), wrong_audience (a token not issued for the door's audiences). The caller is told none of this.",
    labelNames: ["reason"],
    registers,
  });
  for (const reason of PUBLISH_AUTH_FAILURE_REASONS) authFailures.inc({ reason }, 0);
  const authThrottled = new Counter({
    name: "hookline_publish_auth_throttled_total",
    help: "Publish door requests refused 429 without a TokenReview: their client address had used up its allowance of failed authentications (PUBLISH_AUTH_FAILURE_BURST, PUBLISH_AUTH_FAILURE_PER_MINUTE).",
    registers,
  });
  const authzThrottled = new Counter({
    name: "hookline_publish_authz_throttled_total",
    help: "Publish door requests refused 429 without a SubjectAccessReview: their caller (an authenticated identity) had used up its allowance of refused authorizations (10 at once, then 10 a minute), e.g. a token without rights trying namespace after namespace.",
    registers,
  });
  return { authFailures, authThrottled, authzThrottled };
}

// ---------------------------------------------------------------------------------------------
// The OAuth2 token cache (src/delivery/engine/oauth2.ts): bounded per namespace and in all.

export const OAUTH2_EVICTION_REASONS = ["namespace", "total"] as const;

export interface OAuth2Metrics {
  /** hookline_oauth2_tokens_cached: access tokens held now. */
  tokens: Gauge;
  /** hookline_oauth2_token_evictions_total{reason}: tokens dropped to stay within a bound. */
  evictions: Counter<"reason">;
  /** Where the gauge reads the number of tokens held. */
  setTokensSource(source: () => number): void;
}

function oauth2Metrics(registry: Registry): OAuth2Metrics {
  const registers = [registry];
  let source: (() => number) | undefined;
  const tokens = new Gauge({
    name: "hookline_oauth2_tokens_cached",
    help: "OAuth2 access tokens held for spec.oauth2 grants (at most 256 per namespace and 4096 in all; each used at most 24 h whatever its expires_in).",
    registers,
    collect() {
      this.set(source ? source() : 0);
    },
  });
  const evictions = new Counter({
    name: "hookline_oauth2_token_evictions_total",
    help: "OAuth2 access tokens dropped from the cache before they expired, to stay within a bound: reason namespace (the namespace held 256 grants' tokens; its least recently used went) or total (4096 in all; the least recently used of the namespace holding the most went). A dropped token is fetched again when next needed.",
    labelNames: ["reason"],
    registers,
  });
  for (const reason of OAUTH2_EVICTION_REASONS) evictions.inc({ reason }, 0);
  return { tokens, evictions, setTokensSource: (s) => (source = s) };
}

// ---------------------------------------------------------------------------------------------
// The kept payloads (src/delivery/kept-payloads.ts): pending deliveries' payloads held for their
// attempts within HOOKLINE_PAYLOAD_CACHE_BYTES, shared between namespaces.

export interface PayloadCacheMetrics {
  /** hookline_payload_cache_bytes{namespace}: what each namespace's kept payloads weigh now. */
  bytes: Gauge<"namespace">;
  /** hookline_payload_cache_reads_total{result}: hit (kept), miss (read from the API server). */
  reads: Counter<"result">;
  /** hookline_payload_cache_evictions_total{reason}: payloads dropped to stay within the budget. */
  evictions: Counter<"reason">;
  /** Where the gauge reads the bytes per namespace. */
  setBytesSource(source: () => ReadonlyMap<string, number>): void;
}

function payloadCacheMetrics(registry: Registry): PayloadCacheMetrics {
  const registers = [registry];
  let source: (() => ReadonlyMap<string, number>) | undefined;
  const bytes = new Gauge({
    name: "hookline_payload_cache_bytes",
    help: "Bytes of pending deliveries' payloads kept in memory for their attempts (each counted with a fixed overhead), per namespace; together at most HOOKLINE_PAYLOAD_CACHE_BYTES.",
    labelNames: ["namespace"],
    registers,
    collect() {
      this.reset();
      for (const [namespace, b] of source?.() ?? []) this.set({ namespace }, b);
    },
  });
  const reads = new Counter({
    name: "hookline_payload_cache_reads_total",
    help: "Payloads an attempt needed: result hit (kept in memory) or miss (read from the API server: too big to keep, evicted, or the cache was full).",
    labelNames: ["result"],
    registers,
  });
  for (const result of ["hit", "miss"]) reads.inc({ result }, 0);
  const evictions = new Counter({
    name: "hookline_payload_cache_evictions_total",
    help: "Kept payloads dropped to stay within HOOKLINE_PAYLOAD_CACHE_BYTES (reason total: the least recently kept of the namespace holding the most went); a dropped payload is read from the API server when its attempt comes.",
    labelNames: ["reason"],
    registers,
  });
  evictions.inc({ reason: "total" }, 0);
  return { bytes, reads, evictions, setBytesSource: (s) => (source = s) };
}

// ---------------------------------------------------------------------------------------------
// Stream mode's bounds (docs/stream-mode.md#limits): what a replica holds in memory against
// HOOKLINE_STREAM_MAX_HELD_BYTES, and each namespace's stream against its quota and age. The
// namespace label is bounded by the namespaces served; a namespace's series go with its stream.

export const STREAM_QUOTAS = ["messages", "bytes"] as const;
export type StreamQuotaName = (typeof STREAM_QUOTAS)[number];

export interface StreamLimitMetrics {
  /** webhook_stream_held_bytes{namespace}: this replica's, every replica exports its own. */
  heldBytes: Gauge<"namespace">;
  heldBudget: Gauge;
  /** webhook_stream_publish_refused_total{namespace,quota}: publishes the HTTP door had refused by a full namespace. */
  refused: Counter<"namespace" | "quota">;
  /** The configured bounds, exported by every replica. */
  setLimits(limits: { heldBytes: number; messages: number; bytes: number; maxAgeMs: number }): void;
  /** The leader's reading of one namespace's stream; ignored on a replica that does not lead. */
  setNamespace(namespace: string, usage: { messages: number; bytes: number; oldestAt: number | undefined }): void;
  /** A namespace's stream is gone: its series too. */
  forgetNamespace(namespace: string): void;
  notLeading(): void;
}

function streamLimitMetrics(registry: Registry, leading: () => boolean): StreamLimitMetrics {
  const registers = [registry];
  const heldBytes = new Gauge({
    name: "webhook_stream_held_bytes",
    help: "Stream mode: what the stream messages this replica holds in memory (fetched and not answered yet, attempts in flight included) take of HOOKLINE_STREAM_MAX_HELD_BYTES, per namespace; each counts twice its size (its bytes and its request body).",
    labelNames: ["namespace"],
    registers,
  });
  const heldBudget = new Gauge({ name: "webhook_stream_held_bytes_budget", help: "Stream mode: HOOKLINE_STREAM_MAX_HELD_BYTES, the bytes of stream messages one replica holds at most.", registers });
  const usage = new Gauge({
    name: "webhook_stream_namespace_usage",
    help: "Stream mode: what a namespace's stream holds (events not yet delivered to every subscription): quota messages or bytes. Exported by the leader.",
    labelNames: ["namespace", "quota"],
    registers,
  });
  const quota = new Gauge({ name: "webhook_stream_namespace_quota", help: "Stream mode: the quota of every namespace's stream, messages (HOOKLINE_STREAM_NAMESPACE_MAX_MESSAGES) and bytes (HOOKLINE_STREAM_NAMESPACE_MAX_BYTES); publishes are refused at it.", labelNames: ["quota"], registers });
  const oldest = new Gauge({
    name: "webhook_stream_oldest_message_timestamp_seconds",
    help: "Stream mode: when (Unix seconds) the oldest event a namespace's stream holds was stored; absent when it holds none. Exported by the leader.",
    labelNames: ["namespace"],
    registers,
  });
  const maxAge = new Gauge({ name: "webhook_stream_max_age_seconds", help: "Stream mode: HOOKLINE_STREAM_MAX_AGE_MS in seconds: an event not delivered by this age becomes a dead letter (reason Expired).", registers });
  const refused = new Counter({
    name: "webhook_stream_publish_refused_total",
    help: "Stream mode: publishes the HTTP door answered 429 because the namespace's stream was at its quota (messages or bytes). Producers publishing to NATS directly are refused by JetStream and not counted here.",
    labelNames: ["namespace", "quota"],
    registers,
  });
  return {
    heldBytes,
    heldBudget,
    refused,
    setLimits: (l) => {
      heldBudget.set(l.heldBytes);
      quota.set({ quota: "messages" }, l.messages);
      quota.set({ quota: "bytes" }, l.bytes);
      maxAge.set(l.maxAgeMs / 1000);
    },
    setNamespace: (namespace, u) => {
      if (!leading()) return;
      usage.set({ namespace, quota: "messages" }, u.messages);
      usage.set({ namespace, quota: "bytes" }, u.bytes);
      if (u.oldestAt === undefined) oldest.remove({ namespace });
      else oldest.set({ namespace }, u.oldestAt / 1000);
    },
    forgetNamespace: (namespace) => {
      for (const q of STREAM_QUOTAS) usage.remove({ namespace, quota: q });
      oldest.remove({ namespace });
    },
    notLeading: () => {
      usage.reset();
      oldest.reset();
    },
  };
}
