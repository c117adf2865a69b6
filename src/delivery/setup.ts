// The delivery engine and what every feature shares, built once: the status writer and Events,
// the HTTP sender with Secrets, OAuth2 and receiver credentials, the caches (with the ordering
// lanes and the controllers' handlers listening), the one endpoint registry, the attempt executor
// and the one delivery step, the outcome writer and the leader's queues. It registers the caches
// and the closers with the manager; the features (cli/operator.ts lists them) build on `shared`.
//
// The leader term (transports/cr) and replay are built after this; the parts here that must reach
// them do so through `term` and `late`, filled in by those features' setups.
import type { Logger } from "pino";
import { LABELS } from "../api/names.js";
import { STATUS_FITTERS } from "../api/status-limits.js";
import type { Config } from "../config/config.js";
import type { PolicyDefaults } from "../core/attempt/policy.js";
import type { KubeClient } from "../kube/client.js";
import { EventRecorder } from "../kube/events.js";
import type { ReflectorHandler } from "../kube/reflector.js";
import { StatusWriter } from "../kube/status-writer.js";
import { objectKey } from "../kube/types.js";
import type { Metrics } from "../observability/metrics.js";
import { createAttemptTracer } from "../observability/tracing.js";
import { fixedFieldsLogger } from "../observability/logger.js";
import { Expectations } from "../runtime/expectations.js";
import type { Manager } from "../runtime/manager.js";
import { USER_AGENT, VERSION } from "../version.js";
import { Caches } from "./caches.js";
import { AttemptExecutor, type ProbeClaims } from "./engine/attempt.js";
import { Credentials } from "./engine/credentials.js";
import { EndpointTransitions } from "./engine/endpoint-transitions.js";
import { EndpointRegistry, type EndpointObserver } from "./engine/endpoints.js";
import { OAuth2Client } from "./engine/oauth2.js";
import { SecretCache } from "./engine/secrets.js";
import { Sender } from "./engine/sender.js";
import { DeliveryStep } from "./engine/step.js";
import { Finals, type OutcomeMeta } from "./finals.js";
import { Handlers } from "./handlers.js";
import { Notifier } from "./notifier.js";
import { KeptPayloads } from "./kept-payloads.js";
import type { LeaderTerm } from "./leader-term.js";
import type { DeliveryObject, SubscriptionObject } from "./objects.js";
import { OrderingLanes } from "./ordering-lanes.js";
import { OutcomeWriter } from "./outcome-writer.js";
import { readOrderingValue } from "./payload.js";
import type { LeaderQueues, Shared } from "./shared.js";

const SUBSCRIPTION_STATUS_INTERVAL_MS = 5_000;

/** Endpoint state shared between replicas (stream mode): it observes the registry and claims probes. */
export interface SharedEndpointState extends EndpointObserver, ProbeClaims {
  replicas(): number;
}

/** What a transport adds around the engine's parts before they are built (stream mode). */
export interface TransportHooks {
  /** Wraps the local endpoint transitions (Events, gauges) with state shared between replicas. */
  sharedEndpoints(inner: EndpointObserver, endpoints: () => EndpointRegistry, breakerOf: (subKey: string) => PolicyDefaults["breaker"]): SharedEndpointState;
  /** Others who hear of every subscription change, after the controllers' handlers. */
  subscriptionHandler(inner: ReflectorHandler<SubscriptionObject>): ReflectorHandler<SubscriptionObject>;
}

/** Filled in by the features built after the engine. */
export interface LateHooks {
  /** Replay: the replays of a namespace not finished yet (a new subscription may unblock them). */
  unfinishedReplays?: (namespace: string) => Iterable<string>;
  /** CR transport: a delivery left the active set (its subscription's backlog makes room). */
  deliveryLeft?: (subKey: string, key: string) => void;
}

export interface EngineOptions {
  config: Config;
  client: KubeClient;
  log: Logger;
  metrics: Metrics;
  isLeader: () => boolean;
  /** Rollup interval of subscription status (bounded write rate); default 5 s. */
  statusIntervalMs?: number;
  transport?: TransportHooks;
}

export interface Engine {
  shared: Shared;
  lanes: OrderingLanes;
  /** The current leader term, once transports/cr built it; the queues wake it. */
  term: { current?: LeaderTerm };
  late: LateHooks;
}

export async function setupEngine(manager: Manager, o: EngineOptions): Promise<Engine> {
  const { config, client, log, metrics } = o;
  const defaults: PolicyDefaults = { deliveryTimeoutMs: config.deliveryTimeoutMs, breaker: config.breaker };
  const expectations = { deliveries: new Expectations(), subscriptions: new Expectations(), replays: new Expectations() };
  // Every status string and list is cut to its schema's limit here, in the one writer.
  const statusWriter = new StatusWriter(client, STATUS_FITTERS);
  const events = new EventRecorder(client, log.child({ component: "events" }), { component: "hookline", host: config.leaderElection.identity, onDropped: (namespace) => metrics.eventsDropped.inc({ namespace }) });
  const sender = new Sender({ allowedNetworks: config.allowedNetworks, connectionsPerOrigin: Math.min(1000, config.maxInFlight), proxy: config.proxy });
  const secrets = new SecretCache(client, { ttlMs: config.secretRefreshMs });
  const oauth2 = new OAuth2Client(sender, { userAgent: USER_AGENT, onEvict: (reason) => metrics.oauth2.evictions.inc({ reason }) });
  metrics.oauth2.setTokensSource(() => oauth2.cached.tokens);
  const credentials = new Credentials(secrets, sender, oauth2);

  const term: Engine["term"] = {};
  const late: LateHooks = {};
  const queues: LeaderQueues = {
    addDelivery: (key) => term.current?.addDelivery(key),
    addReplay: (key) => term.current?.addReplay(key),
    addSubscription: (key, afterMs) => term.current?.addSubscription(key, afterMs),
  };
  const handlers: Handlers = new Handlers({
    queues: () => (term.current?.leading ? term.current : undefined),
    deliveriesOf: (subKey) => caches.deliveriesOf(subKey),
    wakeEndpoint: (subKey) => {
      const ep = endpoints.get(subKey);
      if (ep) endpoints.wakeEndpoint(ep);
    },
    deliveryLeft: (subKey, key) => late.deliveryLeft?.(subKey, key),
    deliveryExpectations: expectations.deliveries,
    subscriptionExpectations: expectations.subscriptions,
    replayExpectations: expectations.replays,
    unfinishedReplays: (ns) => late.unfinishedReplays?.(ns) ?? [],
    statusIntervalMs: o.statusIntervalMs ?? SUBSCRIPTION_STATUS_INTERVAL_MS,
  });
  // Ordered subscriptions' lanes (spec.ordering), kept current from the caches.
  const lanes: OrderingLanes = new OrderingLanes({
    orderingOf: (subKey) => caches.policy(caches.subscription(subKey))?.ordering,
    deliveriesOf: (subKey) => caches.deliveriesOf(subKey),
    delivery: (key) => caches.delivery(key),
    readValue: (obj, ord, signal) => readOrderingValue(client, obj, ord, signal),
    wake: (key) => queues.addDelivery(key),
    events,
    subscription: (subKey) => caches.subscription(subKey),
    log: log.child({ component: "ordering" }),
  });
  const subscriptionEvents = o.transport?.subscriptionHandler(handlers.subscription) ?? handlers.subscription;
  // The lanes see every cache change before the handlers (and a transport's listeners) hear of it.
  const withLanes = {
    subscription: lanes.watching(subscriptionEvents, (s: SubscriptionObject) => lanes.subscriptionChanged(objectKey(s.metadata))),
    delivery: lanes.watching(handlers.delivery, (d: DeliveryObject) => lanes.deliveryChanged(d), (d: DeliveryObject) => lanes.deliveryGone(d)),
    replay: handlers.replay,
  };
  const unhealthy = new Set<string>();
  const onHealth = (name: string, healthy: boolean) => void (healthy ? unhealthy.delete(name) : unhealthy.add(name));
  const payloads = new KeptPayloads({
    maxBytes: config.payloadCacheBytes,
    onEvict: (reason) => metrics.payloadCache.evictions.inc({ reason }),
    onRead: (hit) => metrics.payloadCache.reads.inc({ result: hit ? "hit" : "miss" }),
  });
  metrics.payloadCache.setBytesSource(() => payloads.bytesByNamespace());
  metrics.setProviders(config.metricProviders, (namespace, subscription) => caches.subscription(`${namespace}/${subscription}`)?.metadata.labels?.[LABELS.provider]);
  const caches: Caches = new Caches(client, config.watchNamespaces, log.child({ component: "cache" }), withLanes, defaults, onHealth, payloads);
  const rollUp = (subKey: string, urgent: boolean) => handlers.rollUp(subKey, urgent);
  const notifier = new Notifier({ client, caches, events, log: log.child({ component: "notify" }), created: (namespace, subscription, event) => metrics.notifications.inc({ namespace, subscription, event }) });
  const transitions = new EndpointTransitions({ caches, events, metrics, log: log.child({ component: "endpoints" }), rollUp, notifier });
  const sharedState = o.transport?.sharedEndpoints(transitions, () => endpoints, (subKey) => caches.policy(caches.subscription(subKey))?.breaker ?? defaults.breaker);
  const endpoints: EndpointRegistry = new EndpointRegistry({
    globalMax: config.maxInFlight,
    healthProbeIntervalMs: config.healthProbeIntervalMs,
    defaults,
    // A subscription's deliveries when its endpoint recovers; parked keys carry their own wake.
    wake: (key) => queues.addDelivery(key),
    onInFlight: (n) => metrics.inFlight.set(n),
    // Slots kept back for the other namespaces whenever two or more have subscriptions.
    namespacesKnown: (now) => caches.namespacesWithSubscriptions(now),
    observer: sharedState ?? transitions,
    ...(sharedState ? { replicas: () => sharedState.replicas(), sharedAcrossReplicas: true } : {}),
  });
  // Tracing off: the producer's trace context passes through and no OpenTelemetry module is loaded.
  const tracing = await createAttemptTracer(config.tracing, { log: log.child({ component: "tracing" }), version: VERSION });
  const executor = new AttemptExecutor({ endpoints, credentials, metrics, userAgent: USER_AGENT, tracing, log: fixedFieldsLogger(log, { component: "attempt" }), ...(sharedState ? { probes: sharedState } : {}) });
  const outcomes = new OutcomeWriter<OutcomeMeta>({ client, statusWriter, expectations: expectations.deliveries, events, log: log.child({ controller: "delivery" }) });
  const finals = new Finals({ endpoints, events, metrics, rollUp: (subKey) => rollUp(subKey, false), notifier });
  // The one delivery step of CR mode, stream mode and replay: Secrets, plan, attempt, outcome.
  const step = new DeliveryStep({ endpoints, secrets, credentials, executor, interruptedAction: config.drain.action });
  const shared: Shared = { config, client, log, metrics, events, statusWriter, secrets, credentials, caches, endpoints, executor, step, outcomes, finals, expectations, queues, isLeader: o.isLeader, rollUp };

  manager.add(
    {
      name: "caches",
      start: () => caches.start(),
      stop: () => caches.stop(),
      waitForSync: (sync) => caches.waitForSync(sync),
      notReady: () => (unhealthy.size ? `watches failing: ${[...unhealthy].join(", ")}` : undefined),
    },
    { group: "cache" },
  );
  manager.add({ name: "tracing", stop: () => tracing.shutdown() }, { group: "closer" });
  manager.add({ name: "sender", stop: () => sender.destroy() }, { group: "closer" });
  manager.add({ name: "kube client", stop: () => client.destroy() }, { group: "closer" });
  return { shared, lanes, term, late };
}
