// The composition root: builds every part of the operator from a Config and hands them to the
// manager (src/runtime/manager.ts), which starts and stops them in order. Nothing here decides
// anything about deliveries; see docs/architecture.md for the path of one delivery.
import { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { GROUP, VERSION as API_GROUP_VERSION } from "../api/names.js";
import { STATUS_FITTERS } from "../api/status-limits.js";
import { configWarnings, type Config } from "../config/config.js";
import type { PolicyDefaults } from "../core/policy.js";
import { AttemptExecutor } from "../delivery/attempt.js";
import { Backlog } from "../delivery/backlog.js";
import { Caches } from "../delivery/caches.js";
import { DeliveryKeys } from "../delivery/delivery-keys.js";
import { Credentials } from "../delivery/credentials.js";
import { DeliveryReconciler } from "../delivery/delivery-reconciler.js";
import { combineDrains, DrainLog } from "../delivery/drain.js";
import { EndpointTransitions } from "../delivery/endpoint-transitions.js";
import { EndpointRegistry } from "../delivery/endpoints.js";
import { Finals, type OutcomeMeta } from "../delivery/finals.js";
import { Handlers } from "../delivery/handlers.js";
import { LeaderTerm } from "../delivery/leader-term.js";
import { SUBSCRIPTIONS, type DeliveryObject, type SubscriptionObject } from "../delivery/objects.js";
import { OrderingLanes } from "../delivery/ordering-lanes.js";
import { readOrderingValue } from "../delivery/payload.js";
import { ReplayObjects } from "../replay/objects.js";
import { OAuth2Client } from "../delivery/oauth2.js";
import { OutcomeWriter } from "../delivery/outcome-writer.js";
import { Replayer } from "../replay/replay.js";
import { SecretCache } from "../delivery/secrets.js";
import { Sender } from "../delivery/sender.js";
import { ConsumerSync } from "../transports/stream/consumer-sync.js";
import { HeldBudget } from "../transports/stream/held-bytes.js";
import { StreamLink } from "../transports/stream/link.js";
import { NamespaceStreams } from "../transports/stream/namespace-streams.js";
import { SharedEndpoints } from "../transports/stream/shared-endpoints.js";
import { StreamDelivery, withSubscriptionListeners } from "../transports/stream/stream-delivery.js";
import { SubscriptionReconciler } from "../subscriptions/reconciler.js";
import { TerminalIndex } from "../finished/terminal-index.js";
import { WaitReports } from "../delivery/waits.js";
import { ApiHealth } from "../kube/api-health.js";
import { ApiError, ignoreNotFound, KubeClient } from "../kube/client.js";
import { EventRecorder } from "../kube/events.js";
import { LeaderElector } from "../kube/leader.js";
import { StatusWriter } from "../kube/status-writer.js";
import { objectKey, objectPath, splitKey } from "../kube/types.js";
import { healthServer, metricsServer, serverRunnable } from "../observability/http-servers.js";
import { createLogger } from "../observability/logger.js";
import { Metrics } from "../observability/metrics.js";
import { createAttemptTracer } from "../observability/tracing.js";
import { publishServer } from "../publish/server.js";
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
    const deliveryExpectations = new Expectations();
    const subscriptionExpectations = new Expectations();
    const replayExpectations = new Expectations();
    // Every status string and list is cut to its schema's limit here, in the one writer.
    const statusWriter = new StatusWriter(client, STATUS_FITTERS);
    const events = new EventRecorder(client, log.child({ component: "events" }), { component: "hookline", host: config.leaderElection.identity });
    const sender = new Sender({ allowedNetworks: config.allowedNetworks, connectionsPerOrigin: Math.min(1000, config.maxInFlight), proxy: config.proxy });
    const secrets = new SecretCache(client, { ttlMs: config.secretRefreshMs });
    const oauth2 = new OAuth2Client(sender, { userAgent: USER_AGENT, onEvict: (reason) => metrics.oauth2.evictions.inc({ reason }) });
    metrics.oauth2.setTokensSource(() => oauth2.cached.tokens);
    const credentials = new Credentials(secrets, sender, oauth2);

    // The leader term is built last; the parts built before it wake it through this reference.
    const term: { current?: LeaderTerm } = {};
    const late: { replays?: ReplayObjects } = {};
    const backlog = new Backlog((key) => term.current?.addDelivery(key));
    // Stream mode (HOOKLINE_NATS_URL): built after the registry it feeds; reached through this.
    const stream: { delivery?: StreamDelivery; consumers?: ConsumerSync; namespaces?: NamespaceStreams } = {};
    const handlers: Handlers = new Handlers({
      queues: () => (term.current?.leading ? term.current : undefined),
      deliveriesOf: (subKey) => caches.deliveriesOf(subKey),
      wakeEndpoint: (subKey) => {
        const ep = endpoints.get(subKey);
        if (ep) endpoints.wakeEndpoint(ep);
      },
      deliveryLeft: (subKey, key) => backlog.left(subKey, key, caches.policy(caches.subscription(subKey))?.maxPending),
      deliveryExpectations,
      subscriptionExpectations,
      replayExpectations,
      unfinishedReplays: (ns) => late.replays?.unfinishedIn(ns) ?? [],
      statusIntervalMs: this.opts.statusIntervalMs ?? SUBSCRIPTION_STATUS_INTERVAL_MS,
    });
    // Ordered subscriptions' lanes (spec.ordering), kept current from the caches.
    const lanes: OrderingLanes = new OrderingLanes({
      orderingOf: (subKey) => caches.policy(caches.subscription(subKey))?.ordering,
      deliveriesOf: (subKey) => caches.deliveriesOf(subKey),
      delivery: (key) => caches.delivery(key),
      readValue: (obj, o, signal) => readOrderingValue(client, obj, o, signal),
      wake: (key) => term.current?.addDelivery(key),
      events,
      subscription: (subKey) => caches.subscription(subKey),
      log: log.child({ component: "ordering" }),
    });
    const subscriptionEvents = config.natsUrl ? withSubscriptionListeners(handlers.subscription, [(k) => stream.delivery?.subscriptionChanged(k), (k, spec) => stream.consumers?.subscriptionChanged(k, spec)]) : handlers.subscription;
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
    const terminal = (this.terminal = new TerminalIndex({
      client,
      caches,
      namespaces: config.watchNamespaces,
      events,
      metrics,
      log: log.child({ component: "terminal-index" }),
      isLeader: () => this.isLeader,
      onReplayRequested: (key) => term.current?.addDelivery(key),
      onDeadLettersChanged: (subKey) => rollUp(subKey, false),
      onDeadLetter: (rec, present) => {
        const subKey = `${rec.metadata.namespace}/${rec.subscription}`;
        if (present) lanes.deadLetterSeen(subKey, rec.metadata.name, rec.ordering);
        else lanes.deadLetterGone(subKey, rec.metadata.name);
      },
      maxFinishedDeliveries: config.maxFinishedDeliveries,
      dlqMaxEntries: config.dlqMaxEntries,
    }));
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
    const shared = config.natsUrl ?
        new SharedEndpoints({
          inner: transitions,
          endpoints: () => endpoints,
          me: config.leaderElection.identity,
          breakerConfig: (subKey) => caches.policy(caches.subscription(subKey))?.breaker ?? defaults.breaker,
          healthProbeIntervalMs: config.healthProbeIntervalMs,
          isLeader: () => this.isLeader,
          onAdopted: (subKey) => stream.delivery?.wakeSubscription(subKey),
          log: streamLog,
        })
      : undefined;
    const endpoints: EndpointRegistry = new EndpointRegistry({
      globalMax: config.maxInFlight,
      healthProbeIntervalMs: config.healthProbeIntervalMs,
      defaults,
      // A subscription's deliveries when its endpoint recovers; parked keys carry their own wake.
      wake: (key) => term.current?.addDelivery(key),
      onInFlight: (n) => metrics.inFlight.set(n),
      observer: shared ?? transitions,
      ...(shared ? { replicas: () => shared.replicas() } : {}),
    });
    // Tracing off: the producer's trace context passes through and no OpenTelemetry module is loaded.
    const tracing = await createAttemptTracer(config.tracing, { log: log.child({ component: "tracing" }), version: VERSION });
    const executor = new AttemptExecutor({ endpoints, credentials, metrics, userAgent: USER_AGENT, tracing, log: log.child({ component: "attempt" }), ...(shared ? { probes: shared } : {}) });
    const outcomes = new OutcomeWriter<OutcomeMeta>({ client, statusWriter, expectations: deliveryExpectations, events, log: log.child({ controller: "delivery" }) });
    const finals = new Finals({ endpoints, events, metrics, rollUp: (subKey) => rollUp(subKey, false) });
    const deliveries = new DeliveryReconciler({
      client,
      lanes,
      deadLetterRoom: (key, subKey) => terminal.makeRoom(key, subKey),
      caches,
      endpoints,
      secrets,
      credentials,
      executor,
      waits: new WaitReports({ outcomes, events, log: log.child({ controller: "delivery" }) }),
      backlog,
      outcomes,
      finals,
      events,
      expectations: deliveryExpectations,
      log: log.child({ controller: "delivery" }),
      interruptedAction: config.drain.action,
      requeue: (key) => term.current?.addDelivery(key),
    });
    const replayer = new Replayer({
      client,
      caches,
      terminal,
      endpoints,
      secrets,
      executor,
      outcomes,
      finals,
      statusWriter,
      events,
      metrics,
      expectations: subscriptionExpectations,
      log: log.child({ component: "replay" }),
      touchSubscription: (subKey) => term.current?.addSubscription(subKey),
      runEnded: (ns) => {
        for (const key of late.replays?.unfinishedIn(ns) ?? []) term.current?.addReplay(key);
      },
      enqueueDelivery: (key) => term.current?.addDelivery(key),
    });
    const replays = (late.replays = new ReplayObjects({
      caches,
      replayer,
      statusWriter,
      events,
      expectations: replayExpectations,
      log: log.child({ controller: "replay" }),
      requeue: (key) => term.current?.addReplay(key),
    }));
    const subscriptions = new SubscriptionReconciler({
      caches,
      endpoints,
      secrets,
      credentials,
      statusWriter,
      events,
      expectations: subscriptionExpectations,
      metrics,
      deadLetters: terminal,
      log: log.child({ controller: "subscription" }),
      bulkReplay: (sub, signal) => replayer.bulk(sub, signal),
      streamPending: (key) => stream.consumers?.pendingOf(key) ?? 0,
      streamMode: config.natsUrl !== undefined,
      read: (key) => {
        const { namespace, name } = splitKey(key);
        return ignoreNotFound(client.request<SubscriptionObject>({ method: "GET", path: objectPath(SUBSCRIPTIONS, namespace, name) }));
      },
    });
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
      inFlight: () => endpoints.inFlight - (stream.delivery?.inFlight ?? 0),
      deliveryExpectations,
      metrics,
      log,
      // One worker per request in flight, plus headroom for reconciles that only write status.
      deliveryWorkers: config.maxInFlight + 16,
    });

    if (link && shared) {
      stream.delivery = new StreamDelivery({
        link,
        shared,
        client,
        outcomes,
        caches,
        endpoints,
        secrets,
        credentials,
        executor,
        finals,
        events,
        metrics,
        interruptedAction: config.drain.action,
        budget: new HeldBudget(config.streamMaxHeldBytes, (ns, bytes) => metrics.streamLimits.heldBytes.set({ namespace: ns }, bytes)),
        maxAgeMs: config.streamMaxAgeMs,
        log: streamLog,
      });
      metrics.streamLimits.setLimits({ heldBytes: config.streamMaxHeldBytes, messages: config.streamNamespaceMaxMessages, bytes: config.streamNamespaceMaxBytes, maxAgeMs: config.streamMaxAgeMs });
      stream.namespaces = new NamespaceStreams({ link, caches, namespaces: config.watchNamespaces, installation: config.installation, metrics, log: streamLog });
      stream.consumers = new ConsumerSync({ link, caches, namespaces: config.watchNamespaces, installation: config.installation, metrics, log: streamLog, forget: (uid) => shared.forget(uid), lagChanged: (subKey) => rollUp(subKey, false) });
    }

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
        waitForSync: (s) => caches.waitForSync(s),
        notReady: () => (this.unhealthyReflectors.size ? `watches failing: ${[...this.unhealthyReflectors].join(", ")}` : undefined),
      },
      { group: "cache" },
    );
    manager.add({ name: "terminal index", start: () => terminal.start(), stop: () => terminal.stop(), waitForSync: (s) => terminal.waitForSync(s) }, { group: "cache" });
    if (config.publishPort !== undefined) {
      const door = publishServer({
        client,
        log: publishLog,
        ready: () => this.ready,
        subscriptions: () => caches.subscriptions.values(),
        pendingOf: (ns, sub) => caches.deliveriesOf(`${ns}/${sub}`).size,
        watchNamespaces: config.watchNamespaces,
        reviews: { audiences: config.publish.audiences },
        authFailures: config.publish.authFailures,
        metrics: metrics.publishDoor,
        ...(tls ? { tls } : {}),
        ...(link ? { stream: link, streamQuota: { messages: config.streamNamespaceMaxMessages, bytes: config.streamNamespaceMaxBytes, refused: (namespace, quota) => metrics.streamLimits.refused.inc({ namespace, quota }) } } : {}),
      });
      // The HTTP publish door (docs/publishing.md): every replica serves it, leader or not.
      manager.add(serverRunnable("publish", door, config.publishPort, (p) => (this.publishPort = p)), { group: "after-sync" });
    }
    if (link) manager.add({ name: "nats", start: () => link.start(), stop: () => link.stop(), notReady: () => link.problem() }, { group: "server" });
    manager.add(this.term, { group: "leader" });
    if (stream.delivery && stream.consumers) {
      // Every replica delivers from the stream; consumers are made and removed by the leader.
      manager.add(stream.delivery, { group: "worker" });
      manager.add(stream.consumers, { group: "leader" });
      manager.add(stream.namespaces!, { group: "leader" });
    }
    manager.add(
      {
        name: "drain report",
        stop: async () => {
          const report = combineDrains([term.current!.lastDrain, ...(stream.delivery ? [stream.delivery.lastDrain] : [])]);
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
