// The composition root: builds every part of the operator from a Config and hands them to the
// manager (src/runtime/manager.ts), which starts and stops them in order. Nothing here decides
// anything about deliveries; see docs/architecture.md for the path of one delivery.
import { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { GROUP, VERSION as API_GROUP_VERSION } from "../api/names.js";
import { STATUS_FITTERS } from "../api/status-limits.js";
import { configWarnings, type Config } from "../config/config.js";
import type { PolicyDefaults } from "../core/policy.js";
import { AttemptExecutor } from "../delivery/engine/attempt.js";
import { DeliveryStep } from "../delivery/engine/step.js";
import { Backlog } from "../transports/cr/backlog.js";
import { Caches } from "../delivery/caches.js";
import { DeliveryKeys } from "../transports/cr/delivery-keys.js";
import { Credentials } from "../delivery/engine/credentials.js";
import { DeliveryReconciler } from "../transports/cr/delivery-reconciler.js";
import { combineDrains, DrainLog } from "../delivery/drain.js";
import { EndpointTransitions } from "../delivery/engine/endpoint-transitions.js";
import { EndpointRegistry } from "../delivery/engine/endpoints.js";
import { Finals, type OutcomeMeta } from "../delivery/finals.js";
import { Handlers } from "../delivery/handlers.js";
import { LeaderTerm } from "../delivery/leader-term.js";
import type { DeliveryObject, SubscriptionObject } from "../delivery/objects.js";
import { OrderingLanes } from "../delivery/ordering-lanes.js";
import { readOrderingValue } from "../delivery/payload.js";
import { OAuth2Client } from "../delivery/engine/oauth2.js";
import { OutcomeWriter } from "../delivery/outcome-writer.js";
import { SecretCache } from "../delivery/engine/secrets.js";
import { Sender } from "../delivery/engine/sender.js";
import type { LeaderQueues, Shared } from "../delivery/shared.js";
import { setupFinished } from "../finished/setup.js";
import type { TerminalIndex } from "../finished/terminal-index.js";
import type { ReplayObjects } from "../replay/objects.js";
import { setupReplay } from "../replay/setup.js";
import { setupSubscriptions } from "../subscriptions/setup.js";
import { setupStream, type StreamMode } from "../transports/stream/setup.js";
import { withSubscriptionListeners } from "../transports/stream/stream-delivery.js";
import { StreamLink } from "../transports/stream/link.js";
import { SharedEndpoints } from "../transports/stream/shared-endpoints.js";
import { WaitReports } from "../transports/cr/waits.js";
import { ApiHealth } from "../kube/api-health.js";
import { ApiError, KubeClient } from "../kube/client.js";
import { EventRecorder } from "../kube/events.js";
import { LeaderElector } from "../kube/leader.js";
import { StatusWriter } from "../kube/status-writer.js";
import { objectKey } from "../kube/types.js";
import { healthServer, metricsServer, serverRunnable } from "../observability/http-servers.js";
import { createLogger } from "../observability/logger.js";
import { Metrics } from "../observability/metrics.js";
import { createAttemptTracer } from "../observability/tracing.js";
import { setupPublishDoor } from "../publish/setup.js";
import { ReloadingTls } from "../publish/tls.js";
import { Expectations } from "../runtime/expectations.js";
import { Manager } from "../runtime/manager.js";
import { USER_AGENT, VERSION } from "../version.js";

export interface OperatorOptions {
  config: Config;
  /** Path of a kubeconfig; default: KUBECONFIG / ~/.kube/config / in-cluster. */
  kubeconfig?: string;
  log?: Logger;
  /** For tests: a private registry (default metrics of the process are skipped). */
  metrics?: Metrics;
  /** Rollup interval of subscription status (bounded write rate); default 5 s. */
  statusIntervalMs?: number;
}

const SUBSCRIPTION_STATUS_INTERVAL_MS = 5_000;
/** The last rollups of a drain get this long, while the Lease is still held. */
const FINAL_ROLLUP_BUDGET_MS = 2_000;

export class Operator {
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly config: Config;
  caches!: Caches;
  elector: LeaderElector | undefined;
  metricsPort = 0;
  healthPort = 0;
  /** Port of the publish endpoint once listening (PUBLISH_PORT; 0 picks one); undefined when off. */
  publishPort: number | undefined;
  private manager: Manager | undefined;
  private term: LeaderTerm | undefined;
  private terminal: TerminalIndex | undefined;
  private apiHealth: ApiHealth | undefined;
  private drainLog: DrainLog | undefined;
  /** Stream mode's connection (HOOKLINE_NATS_URL set); undefined in CR mode only. */
  private streamLink: StreamLink | undefined;
  private readonly unhealthyReflectors = new Set<string>();
  private stopped: Promise<void> | undefined;

  constructor(private readonly opts: OperatorOptions) {
    this.config = opts.config;
    this.log = opts.log ?? createLogger({ level: opts.config.logLevel });
    this.metrics = opts.metrics ?? new Metrics();
  }

  get isLeader(): boolean {
    return this.term?.leading ?? false;
  }

  /** Readiness, from the manager's parts (each says why it keeps the replica from being ready). */
  get ready(): { ready: boolean; reason?: string } {
    return this.manager?.ready() ?? { ready: false, reason: "starting" };
  }

  async start(): Promise<void> {
    const { config, log, metrics } = this;
    const publishLog = log.child({ component: "publish" });
    // A publish door certificate that cannot be used stops the start before anything runs, naming PUBLISH_TLS_CERT_FILE or _KEY_FILE.
    const tls = config.publishPort !== undefined && config.publish.tls ? await ReloadingTls.load(config.publish.tls, publishLog) : undefined;
    const kc = new KubeConfig();
    if (this.opts.kubeconfig) kc.loadFromFile(this.opts.kubeconfig);
    else kc.loadFromDefault();
    // The check runs only after requests failed, so after the client exists.
    const apiHealth = new ApiHealth({ graceMs: 2_000, check: () => client.request({ method: "GET", path: "/version", timeoutMs: 5_000 }) });
    const observer = {
      observe: (verb: Parameters<Metrics["observe"]>[0], resource: string, code: number, seconds: number) => {
        metrics.observe(verb, resource, code, seconds);
        apiHealth.observe(code);
      },
    };
    const client = await KubeClient.create(kc, { observer, userAgent: USER_AGENT });
    this.apiHealth = apiHealth;
    log.info(
      { server: client.server, namespaces: config.watchNamespaces.length ? config.watchNamespaces : "all", allowedNetworks: config.allowedNetworksText || "public only", mode: config.natsUrl ? `CR + stream (${config.natsUrlRedacted})` : "CR" },
      "hookline operator starting",
    );
    for (const w of configWarnings(config)) log.warn({ variable: w.variable, advice: w.message }, "configuration advice");

    const defaults: PolicyDefaults = { deliveryTimeoutMs: config.deliveryTimeoutMs, breaker: config.breaker };
    const expectations = { deliveries: new Expectations(), subscriptions: new Expectations(), replays: new Expectations() };
    // Every status string and list is cut to its schema's limit here, in the one writer.
    const statusWriter = new StatusWriter(client, STATUS_FITTERS);
    const events = new EventRecorder(client, log.child({ component: "events" }), { component: "hookline", host: config.leaderElection.identity });
    const sender = new Sender({ allowedNetworks: config.allowedNetworks, connectionsPerOrigin: Math.min(1000, config.maxInFlight), proxy: config.proxy });
    const secrets = new SecretCache(client, { ttlMs: config.secretRefreshMs });
    const oauth2 = new OAuth2Client(sender, { userAgent: USER_AGENT, onEvict: (reason) => metrics.oauth2.evictions.inc({ reason }) });
    metrics.oauth2.setTokensSource(() => oauth2.cached.tokens);
    const credentials = new Credentials(secrets, sender, oauth2);

    // The leader term is built last; the parts built before it wake it through these queues.
    const term: { current?: LeaderTerm } = {};
    const queues: LeaderQueues = {
      addDelivery: (key) => term.current?.addDelivery(key),
      addReplay: (key) => term.current?.addReplay(key),
      addSubscription: (key, afterMs) => term.current?.addSubscription(key, afterMs),
    };
    const late: { replays?: ReplayObjects; stream?: StreamMode } = {};
    const backlog = new Backlog((key) => queues.addDelivery(key));
    const handlers: Handlers = new Handlers({
      queues: () => (term.current?.leading ? term.current : undefined),
      deliveriesOf: (subKey) => caches.deliveriesOf(subKey),
      wakeEndpoint: (subKey) => {
        const ep = endpoints.get(subKey);
        if (ep) endpoints.wakeEndpoint(ep);
      },
      deliveryLeft: (subKey, key) => backlog.left(subKey, key, caches.policy(caches.subscription(subKey))?.maxPending),
      deliveryExpectations: expectations.deliveries,
      subscriptionExpectations: expectations.subscriptions,
      replayExpectations: expectations.replays,
      unfinishedReplays: (ns) => late.replays?.unfinishedIn(ns) ?? [],
      statusIntervalMs: this.opts.statusIntervalMs ?? SUBSCRIPTION_STATUS_INTERVAL_MS,
    });
    // Ordered subscriptions' lanes (spec.ordering), kept current from the caches.
    const lanes: OrderingLanes = new OrderingLanes({
      orderingOf: (subKey) => caches.policy(caches.subscription(subKey))?.ordering,
      deliveriesOf: (subKey) => caches.deliveriesOf(subKey),
      delivery: (key) => caches.delivery(key),
      readValue: (obj, o, signal) => readOrderingValue(client, obj, o, signal),
      wake: (key) => queues.addDelivery(key),
      events,
      subscription: (subKey) => caches.subscription(subKey),
      log: log.child({ component: "ordering" }),
    });
    const subscriptionEvents = config.natsUrl ? withSubscriptionListeners(handlers.subscription, [(k) => late.stream?.delivery.subscriptionChanged(k), (k, spec) => late.stream?.consumers.subscriptionChanged(k, spec)]) : handlers.subscription;
    // The lanes see every cache change before the handlers (and stream mode's listeners) hear of it.
    const withLanes = {
      subscription: lanes.watching(subscriptionEvents, (o: SubscriptionObject) => lanes.subscriptionChanged(objectKey(o.metadata))),
      delivery: lanes.watching(handlers.delivery, (d: DeliveryObject) => lanes.deliveryChanged(d), (d: DeliveryObject) => lanes.deliveryGone(d)),
      replay: handlers.replay,
    };
    const onHealth = (name: string, healthy: boolean) => {
      if (healthy) this.unhealthyReflectors.delete(name);
      else this.unhealthyReflectors.add(name);
    };
    const caches: Caches = (this.caches = new Caches(client, config.watchNamespaces, log.child({ component: "cache" }), withLanes, defaults, onHealth));
    const rollUp = (subKey: string, urgent: boolean) => handlers.rollUp(subKey, urgent);
    const transitions = new EndpointTransitions({ caches, events, metrics, log: log.child({ component: "endpoints" }), rollUp });
    const streamLog = log.child({ component: "stream" });
    const link = config.natsUrl ?
        (this.streamLink = new StreamLink({
          url: config.natsUrl,
          name: `hookline operator ${config.leaderElection.identity}`,
          log: streamLog,
          stream: { replicas: config.streamReplicas, maxAgeMs: config.streamMaxAgeMs, namespaceMaxMessages: config.streamNamespaceMaxMessages, namespaceMaxBytes: config.streamNamespaceMaxBytes, owner: config.installation },
          auth: config.natsAuth,
        }))
      : undefined;
    const sharedEndpoints = config.natsUrl ?
        new SharedEndpoints({
          inner: transitions,
          endpoints: () => endpoints,
          me: config.leaderElection.identity,
          breakerConfig: (subKey) => caches.policy(caches.subscription(subKey))?.breaker ?? defaults.breaker,
          healthProbeIntervalMs: config.healthProbeIntervalMs,
          isLeader: () => this.isLeader,
          onAdopted: (subKey) => late.stream?.delivery.wakeSubscription(subKey),
          log: streamLog,
        })
      : undefined;
    const endpoints: EndpointRegistry = new EndpointRegistry({
      globalMax: config.maxInFlight,
      healthProbeIntervalMs: config.healthProbeIntervalMs,
      defaults,
      // A subscription's deliveries when its endpoint recovers; parked keys carry their own wake.
      wake: (key) => queues.addDelivery(key),
      onInFlight: (n) => metrics.inFlight.set(n),
      observer: sharedEndpoints ?? transitions,
      ...(sharedEndpoints ? { replicas: () => sharedEndpoints.replicas() } : {}),
    });
    // Tracing off: the producer's trace context passes through and no OpenTelemetry module is loaded.
    const tracing = await createAttemptTracer(config.tracing, { log: log.child({ component: "tracing" }), version: VERSION });
    const executor = new AttemptExecutor({ endpoints, credentials, metrics, userAgent: USER_AGENT, tracing, log: log.child({ component: "attempt" }), ...(sharedEndpoints ? { probes: sharedEndpoints } : {}) });
    const outcomes = new OutcomeWriter<OutcomeMeta>({ client, statusWriter, expectations: expectations.deliveries, events, log: log.child({ controller: "delivery" }) });
    const finals = new Finals({ endpoints, events, metrics, rollUp: (subKey) => rollUp(subKey, false) });
    // The one delivery step of CR mode, stream mode and replay: Secrets, plan, attempt, outcome.
    const step = new DeliveryStep({ endpoints, secrets, credentials, executor, interruptedAction: config.drain.action });
    const shared: Shared = { config, client, log, metrics, events, statusWriter, secrets, credentials, caches, endpoints, executor, step, outcomes, finals, expectations, queues, isLeader: () => this.isLeader, rollUp };

    const drainLog = (this.drainLog = new DrainLog({ log, metrics, timeoutMs: config.drain.timeoutMs, action: config.drain.action }));
    const le = config.leaderElection;
    const manager = (this.manager = new Manager({
      log,
      drainMs: config.drain.timeoutMs,
      onSynced: () => log.info({ subscriptions: caches.subscriptions.size, activeDeliveries: caches.deliveries.size, deadLetters: terminal.size }, "caches synced"),
      onStopping: () => drainLog.started(endpoints.inFlight),
      ...(le.enabled ?
        {
          elector: (callbacks) =>
            (this.elector = new LeaderElector({
              client: client,
              namespace: le.leaseNamespace,
              name: le.leaseName,
              identity: le.identity,
              leaseDurationMs: le.leaseDurationMs,
              renewDeadlineMs: le.renewDeadlineMs,
              retryPeriodMs: le.retryPeriodMs,
              log: log.child({ component: "leader-election" }),
              ...callbacks,
            })),
        }
      : {}),
    }));
    // Probes answer from the first moment (not ready until synced).
    manager.add(serverRunnable("metrics", metricsServer(metrics.registry), config.metricsPort, (p) => (this.metricsPort = p)), { group: "server" });
    manager.add(serverRunnable("health", healthServer({ live: () => true, ready: () => this.ready }), config.healthPort, (p) => (this.healthPort = p)), { group: "server" });
    manager.add({ name: "crd check", start: () => this.checkCrds(client), notReady: () => (apiHealth.reachable() ? undefined : "the API server cannot be reached") }, { group: "server" });
    manager.add(
      {
        name: "caches",
        start: () => caches.start(),
        stop: () => caches.stop(),
        waitForSync: (sync) => caches.waitForSync(sync),
        notReady: () => (this.unhealthyReflectors.size ? `watches failing: ${[...this.unhealthyReflectors].join(", ")}` : undefined),
      },
      { group: "cache" },
    );

    // The features, each with its own setup.
    const terminal = (this.terminal = setupFinished(manager, shared, (rec, present) => {
      const subKey = `${rec.metadata.namespace}/${rec.subscription}`;
      if (present) lanes.deadLetterSeen(subKey, rec.metadata.name, rec.ordering);
      else lanes.deadLetterGone(subKey, rec.metadata.name);
    }));
    const deliveries = new DeliveryReconciler({
      client,
      lanes,
      deadLetterRoom: (key, subKey) => terminal.makeRoom(key, subKey),
      caches,
      endpoints,
      step,
      executor,
      waits: new WaitReports({ outcomes, events, log: log.child({ controller: "delivery" }) }),
      backlog,
      outcomes,
      finals,
      events,
      expectations: expectations.deliveries,
      log: log.child({ controller: "delivery" }),
      requeue: (key) => queues.addDelivery(key),
    });
    const { replayer, replays } = setupReplay(shared, terminal);
    late.replays = replays;
    const subscriptions = setupSubscriptions(shared, {
      deadLetters: terminal,
      bulkReplay: (sub, signal) => replayer.bulk(sub, signal),
      streamPending: (key) => late.stream?.consumers.pendingOf(key) ?? 0,
    });
    setupPublishDoor(manager, shared, { log: publishLog, ready: () => this.ready, tls, link, onListening: (p) => (this.publishPort = p) });
    if (link) manager.add({ name: "nats", start: () => link.start(), stop: () => link.stop(), notReady: () => link.problem() }, { group: "server" });
    this.term = term.current = new LeaderTerm({
      caches,
      deliveryKeys: new DeliveryKeys({ deliveries, replay: replayer, hasUnwritten: (key) => outcomes.hasUnwritten(key), endpoints }),
      subscriptions,
      replays: { reconcile: (key) => replays.reconcile(key) },
      replayRequests: () => terminal.replayRequests(),
      onStart: () => {
        backlog.reset();
        replayer.restart();
        terminal.resync();
      },
      stopReplays: (graceMs) => replayer.stop(graceMs),
      // The CR path's requests; stream mode's drain counts its own.
      inFlight: () => endpoints.inFlight - (late.stream?.delivery.inFlight ?? 0),
      deliveryExpectations: expectations.deliveries,
      metrics,
      log,
      // One worker per request in flight, plus headroom for reconciles that only write status.
      deliveryWorkers: config.maxInFlight + 16,
    });
    manager.add(this.term, { group: "leader" });
    if (link && sharedEndpoints) late.stream = setupStream(manager, shared, link, sharedEndpoints, streamLog);
    manager.add(
      {
        name: "drain report",
        stop: async () => {
          const report = combineDrains([term.current!.lastDrain, ...(late.stream ? [late.stream.delivery.lastDrain] : [])]);
          drainLog.drained(report);
          await subscriptions.flushDirty(FINAL_ROLLUP_BUDGET_MS);
          await events.flush();
          drainLog.flushed(report);
        },
      },
      { group: "after-drain" },
    );
    manager.add({ name: "tracing", stop: () => tracing.shutdown() }, { group: "closer" });
    manager.add({ name: "sender", stop: () => sender.destroy() }, { group: "closer" });
    manager.add({ name: "kube client", stop: () => client.destroy() }, { group: "closer" });
    await manager.start();
    log.info({ metricsPort: this.metricsPort, healthPort: this.healthPort, ...(this.publishPort !== undefined ? { publishPort: this.publishPort } : {}) }, "serving /metrics, /healthz and /readyz");
  }

  /** A clear message when the CRDs are missing; the watches keep retrying meanwhile. */
  private async checkCrds(client: KubeClient): Promise<void> {
    try {
      await client.request({ method: "GET", path: `/apis/${GROUP}/${API_GROUP_VERSION}` });
    } catch (err) {
      if (err instanceof ApiError && err.isNotFound) {
        this.log.error(`the ${GROUP} CRDs are not installed: run \`kubectl apply -f crds/\` (or install the Helm chart); waiting for them`);
      } else this.log.warn({ err: (err as Error).message }, "could not check the CRDs");
    }
  }

  /**
   * Graceful shutdown (the manager's order: readiness off, drain, last rollups, Lease released,
   * caches, clients, servers). The drain log lines and webhook_drain_total say how it went.
   */
  stop(): Promise<void> {
    this.stopped ??= (async () => {
      await this.manager?.stop();
      this.drainLog?.stopped();
    })();
    return this.stopped;
  }
}
