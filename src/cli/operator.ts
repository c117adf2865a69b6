// The composition root: builds every part of the operator from a Config and runs it. Start:
// servers (probes answer at once) -> caches sync -> leader election -> controllers. Stop, in
// controller-runtime's order: readiness off -> drain workers (in-flight requests finish within
// WEBHOOK_DRAIN_TIMEOUT_MS, the rest are interrupted and recorded) -> release the Lease ->
// stop caches -> close the HTTP agent -> close servers.
import { KubeConfig } from "@kubernetes/client-node";
import type { Server } from "node:http";
import type { Logger } from "pino";
import { GROUP, VERSION as API_GROUP_VERSION } from "../api/names.js";
import { STATUS_FITTERS } from "../api/status-limits.js";
import type { Config } from "../config/config.js";
import type { PolicyDefaults } from "../core/policy.js";
import { Caches, SUBSCRIPTIONS, type DeliveryObject, type SubscriptionObject } from "../delivery/caches.js";
import { Credentials } from "../delivery/credentials.js";
import { DeliveryReconciler } from "../delivery/delivery-reconciler.js";
import { EndpointRegistry } from "../delivery/endpoints.js";
import { OAuth2Client } from "../delivery/oauth2.js";
import { Replayer } from "../delivery/replay.js";
import { SecretCache } from "../delivery/secrets.js";
import { Sender } from "../delivery/sender.js";
import { SubscriptionReconciler } from "../delivery/subscription-reconciler.js";
import { TerminalIndex } from "../delivery/terminal-index.js";
import { ApiHealth } from "../kube/api-health.js";
import { ApiError, KubeClient } from "../kube/client.js";
import { EventRecorder } from "../kube/events.js";
import { LeaderElector } from "../kube/leader.js";
import { objectKey } from "../kube/reflector.js";
import { objectPath } from "../kube/types.js";
import { StatusWriter } from "../kube/status-writer.js";
import { closeServer, healthServer, listen, metricsServer } from "../observability/http-servers.js";
import { createLogger } from "../observability/logger.js";
import { publishServer } from "../publish/server.js";
import { Metrics } from "../observability/metrics.js";
import { Controller } from "../runtime/controller.js";
import { Expectations } from "../runtime/expectations.js";
import { WorkQueue } from "../runtime/queue.js";
import { USER_AGENT } from "../version.js";

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

interface Term {
  deliveries: Controller<string>;
  subscriptions: Controller<string>;
}

const SUBSCRIPTION_STATUS_INTERVAL_MS = 5_000;

export class Operator {
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly config: Config;
  client!: KubeClient;
  caches!: Caches;
  terminal!: TerminalIndex;
  endpoints!: EndpointRegistry;
  sender!: Sender;
  events!: EventRecorder;
  elector: LeaderElector | undefined;
  deliveryReconciler!: DeliveryReconciler;
  private replayer!: Replayer;
  private subscriptionReconciler!: SubscriptionReconciler;
  private term: Term | undefined;
  private readonly deliveryExpectations = new Expectations();
  private readonly subscriptionExpectations = new Expectations();
  private servers: Server[] = [];
  private shuttingDown = false;
  private apiHealth: ApiHealth | undefined;
  private readonly unhealthyReflectors = new Set<string>();
  metricsPort = 0;
  healthPort = 0;
  /** Port of the publish endpoint once listening (PUBLISH_PORT; 0 picks one); undefined when off. */
  publishPort: number | undefined;
  private stopped: Promise<void> | undefined;

  constructor(private readonly opts: OperatorOptions) {
    this.config = opts.config;
    this.log = opts.log ?? createLogger({ level: opts.config.logLevel });
    this.metrics = opts.metrics ?? new Metrics();
  }

  get isLeader(): boolean {
    return this.term !== undefined;
  }

  get ready(): { ready: boolean; reason?: string } {
    if (this.shuttingDown) return { ready: false, reason: "shutting down" };
    if (!this.caches?.synced || !this.terminal?.synced) return { ready: false, reason: "caches not synced" };
    if (this.apiHealth && !this.apiHealth.reachable()) return { ready: false, reason: "the API server cannot be reached" };
    if (this.unhealthyReflectors.size) return { ready: false, reason: `watches failing: ${[...this.unhealthyReflectors].join(", ")}` };
    return { ready: true };
  }

  async start(): Promise<void> {
    const { config, log, metrics } = this;
    const kc = new KubeConfig();
    if (this.opts.kubeconfig) kc.loadFromFile(this.opts.kubeconfig);
    else kc.loadFromDefault();
    const apiHealth = new ApiHealth({ graceMs: 2_000, check: () => this.client.request({ method: "GET", path: "/version", timeoutMs: 5_000 }) });
    const observer = {
      observe: (verb: Parameters<Metrics["observe"]>[0], resource: string, code: number, seconds: number) => {
        metrics.observe(verb, resource, code, seconds);
        apiHealth.observe(code);
      },
    };
    this.client = await KubeClient.create(kc, { observer, userAgent: USER_AGENT });
    this.apiHealth = apiHealth;
    log.info({ server: this.client.server, namespaces: config.watchNamespaces.length ? config.watchNamespaces : "all", allowedNetworks: config.allowedNetworksText || "public only" }, "hookline operator starting");

    // Probes answer from the first moment (not ready until synced).
    await this.startServers();
    await this.checkCrds();

    const defaults: PolicyDefaults = { deliveryTimeoutMs: config.deliveryTimeoutMs, breaker: config.breaker };
    // Every status string and list is cut to its schema's limit here, in the one writer.
    const statusWriter = new StatusWriter(this.client, STATUS_FITTERS);
    this.events = new EventRecorder(this.client, log.child({ component: "events" }), { component: "hookline", host: config.leaderElection.identity });
    this.endpoints = new EndpointRegistry(config.maxInFlight, config.healthProbeIntervalMs, (key) => this.term?.deliveries.queue.add(key), (n) => metrics.inFlight.set(n));
    this.sender = new Sender({ allowedNetworks: config.allowedNetworks, connectionsPerOrigin: Math.min(1000, config.maxInFlight), proxy: config.proxy });
    const secrets = new SecretCache(this.client, { ttlMs: config.secretRefreshMs });
    const credentials = new Credentials(secrets, this.sender, new OAuth2Client(this.sender, { userAgent: USER_AGENT }));
    const onHealth = (name: string, healthy: boolean) => {
      if (healthy) this.unhealthyReflectors.delete(name);
      else this.unhealthyReflectors.add(name);
    };
    this.caches = new Caches(this.client, config.watchNamespaces, log.child({ component: "cache" }), {
      subscription: {
        add: (s) => this.onSubscription(undefined, s),
        update: (old, s) => this.onSubscription(old, s),
        delete: (s) => this.onSubscription(s, undefined),
      },
      delivery: {
        add: (d) => this.onDelivery(d, false),
        update: (_old, d) => this.onDelivery(d, false),
        delete: (d) => this.onDelivery(d, true),
      },
    }, onHealth);
    this.terminal = new TerminalIndex({
      client: this.client,
      caches: this.caches,
      namespaces: config.watchNamespaces,
      events: this.events,
      metrics,
      log: log.child({ component: "terminal-index" }),
      defaults,
      isLeader: () => this.isLeader,
      onReplayRequested: (key) => this.term?.deliveries.queue.add(key),
      onDeadLettersChanged: (subKey) => this.endpointChanged(subKey, false),
      maxFinishedDeliveries: config.maxFinishedDeliveries,
    });
    this.deliveryReconciler = new DeliveryReconciler({
      client: this.client,
      caches: this.caches,
      endpoints: this.endpoints,
      secrets,
      credentials,
      sender: this.sender,
      statusWriter,
      events: this.events,
      expectations: this.deliveryExpectations,
      metrics,
      log: log.child({ controller: "delivery" }),
      defaults,
      userAgent: USER_AGENT,
      interruptedAction: config.drain.action,
      endpointChanged: (subKey, urgent) => this.endpointChanged(subKey, urgent),
      replay: { requested: (key) => this.replayer.requested(key), reconcile: (key, signal) => this.replayer.reconcile(key, signal) },
    });
    this.replayer = new Replayer({
      caches: this.caches,
      terminal: this.terminal,
      reconciler: this.deliveryReconciler,
      statusWriter,
      events: this.events,
      metrics,
      expectations: this.subscriptionExpectations,
      log: log.child({ component: "replay" }),
      touchSubscription: (subKey) => this.term?.subscriptions.queue.add(subKey),
      enqueueDelivery: (key) => this.term?.deliveries.queue.add(key),
    });
    this.subscriptionReconciler = new SubscriptionReconciler({
      caches: this.caches,
      endpoints: this.endpoints,
      secrets,
      credentials,
      statusWriter,
      events: this.events,
      expectations: this.subscriptionExpectations,
      metrics,
      deadLetters: this.terminal,
      log: log.child({ controller: "subscription" }),
      defaults,
      bulkReplay: (sub, signal) => this.replayer.bulk(sub, signal),
      read: (key) => {
        const [namespace, name] = key.split("/") as [string, string];
        return this.client.request<SubscriptionObject>({ method: "GET", path: objectPath(SUBSCRIPTIONS, namespace, name) }).catch((err: unknown) => {
          if (err instanceof ApiError && err.isNotFound) return undefined;
          throw err;
        });
      },
    });

    this.caches.start();
    this.terminal.start();
    await Promise.all([this.caches.waitForSync(), this.terminal.waitForSync()]);
    log.info(
      { subscriptions: this.caches.subscriptions.size, activeDeliveries: this.caches.deliveries.size, deadLetters: this.terminal.size },
      "caches synced",
    );
    if (config.publishPort !== undefined) await this.startPublishServer(config.publishPort);

    const le = config.leaderElection;
    if (le.enabled) {
      this.elector = new LeaderElector({
        client: this.client,
        namespace: le.leaseNamespace,
        name: le.leaseName,
        identity: le.identity,
        leaseDurationMs: le.leaseDurationMs,
        renewDeadlineMs: le.renewDeadlineMs,
        retryPeriodMs: le.retryPeriodMs,
        log: log.child({ component: "leader-election" }),
        onStartedLeading: () => this.startLeading(),
        onStoppedLeading: () => void this.stopLeading(0),
      });
      this.elector.start();
    } else {
      this.startLeading();
    }
  }

  private async startServers(): Promise<void> {
    const metrics = metricsServer(this.metrics.registry);
    const health = healthServer({ live: () => true, ready: () => this.ready });
    this.servers.push(metrics, health);
    this.metricsPort = await listen(metrics, this.config.metricsPort);
    this.healthPort = await listen(health, this.config.healthPort);
    this.log.info({ metricsPort: this.metricsPort, healthPort: this.healthPort }, "serving /metrics, /healthz and /readyz");
  }

  /** The HTTP publish door (docs/publishing.md): every replica serves it, leader or not. */
  private async startPublishServer(port: number): Promise<void> {
    const server = publishServer({
      client: this.client,
      log: this.log.child({ component: "publish" }),
      ready: () => this.ready,
      subscriptions: () => this.caches.subscriptions.values(),
      pendingOf: (ns, sub) => this.caches.deliveriesOf(`${ns}/${sub}`).size,
      watchNamespaces: this.config.watchNamespaces,
    });
    this.servers.push(server);
    this.publishPort = await listen(server, port);
    this.log.info({ publishPort: this.publishPort }, "serving POST /v1/namespaces/{namespace}/events");
  }

  /** A clear message when the CRDs are missing; the watches keep retrying meanwhile. */
  private async checkCrds(): Promise<void> {
    try {
      await this.client.request({ method: "GET", path: `/apis/${GROUP}/${API_GROUP_VERSION}` });
    } catch (err) {
      if (err instanceof ApiError && err.isNotFound) {
        this.log.error(`the ${GROUP} CRDs are not installed: run \`kubectl apply -f crds/\` (or install the Helm chart); waiting for them`);
      } else this.log.warn({ err: (err as Error).message }, "could not check the CRDs");
    }
  }

  private startLeading(): void {
    if (this.term || this.shuttingDown) return;
    const log = this.log;
    const deliveries = new Controller<string>({
      name: "delivery",
      queue: new WorkQueue<string>(),
      reconciler: this.deliveryReconciler,
      // One worker per request in flight, plus headroom for reconciles that only write status.
      workers: this.config.maxInFlight + 16,
      log,
      metrics: this.metrics,
    });
    const subscriptions = new Controller<string>({
      name: "subscription",
      queue: new WorkQueue<string>(),
      reconciler: this.subscriptionReconciler,
      workers: 4,
      log,
      metrics: this.metrics,
    });
    this.term = { deliveries, subscriptions };
    this.replayer.restart();
    this.metrics.setLeading(true);
    for (const d of this.caches.deliveries.values()) deliveries.queue.add(objectKey(d.metadata));
    for (const key of this.terminal.replayRequests()) deliveries.queue.add(key);
    for (const s of this.caches.subscriptions.values()) subscriptions.queue.add(objectKey(s.metadata));
    this.terminal.resync();
    deliveries.start();
    subscriptions.start();
    const depth = setInterval(() => {
      this.metrics.queueDepth.set({ controller: "delivery" }, deliveries.queue.length);
      this.metrics.queueDepth.set({ controller: "subscription" }, subscriptions.queue.length);
    }, 1_000);
    depth.unref();
    this.depthTimer = depth;
  }
  private depthTimer: NodeJS.Timeout | undefined;

  /** Ends this leadership term: `graceMs` lets in-flight requests finish before they are interrupted. */
  private async stopLeading(graceMs: number): Promise<{ finishedInGrace: boolean; inFlight: number; interrupted: number }> {
    const term = this.term;
    if (!term) return { finishedInGrace: true, inFlight: 0, interrupted: 0 };
    this.term = undefined;
    // The per-subscription gauges go at once (a standby's would double `sum by` and keep alerts
    // firing); what finishes while draining no longer sets them. The new leader exports them.
    this.metrics.setLeading(false);
    clearInterval(this.depthTimer);
    const inFlight = this.endpoints.inFlight;
    let interrupted = 0;
    const [d] = await Promise.all([
      term.deliveries.stop(graceMs, () => (interrupted = this.endpoints.inFlight)),
      term.subscriptions.stop(graceMs),
      this.replayer.stop(graceMs),
    ]);
    this.deliveryExpectations.clear();
    return { finishedInGrace: d.finishedInGrace, inFlight, interrupted };
  }

  private onSubscription(old: SubscriptionObject | undefined, sub: SubscriptionObject | undefined): void {
    const obj = (sub ?? old)!;
    const key = objectKey(obj.metadata);
    const term = this.term;
    const ownWrite = sub ? this.subscriptionExpectations.observe(key, sub.metadata.resourceVersion) : (this.subscriptionExpectations.observe(key, undefined), false);
    if (!term) return;
    const specChanged = !old || !sub || old.metadata.generation !== sub.metadata.generation || !!sub.metadata.deletionTimestamp;
    const annotationsChanged = JSON.stringify(old?.metadata.annotations ?? {}) !== JSON.stringify(sub?.metadata.annotations ?? {});
    if (specChanged || annotationsChanged || !ownWrite) term.subscriptions.queue.add(key);
    if (specChanged) {
      // Deliveries waiting for this subscription (or for its old spec) look again.
      for (const d of this.caches.deliveriesOf(key)) term.deliveries.queue.add(d);
      const ep = this.endpoints.get(key);
      if (ep) this.endpoints.wakeEndpoint(ep);
    }
  }

  private onDelivery(d: DeliveryObject, gone: boolean): void {
    const key = objectKey(d.metadata);
    const ours = this.deliveryExpectations.observe(key, gone ? undefined : d.metadata.resourceVersion);
    const ref = (d.spec as { subscriptionRef?: { name?: string } } | undefined)?.subscriptionRef?.name;
    if (ref && (gone || d.metadata.generation === 1)) this.endpointChanged(`${d.metadata.namespace}/${ref}`, false);
    if (!gone && !ours) this.term?.deliveries.queue.add(key);
  }

  /** Subscription status is written at a bounded rate; at once for breaker and health transitions. */
  private endpointChanged(subKey: string, urgent: boolean): void {
    this.term?.subscriptions.queue.addAfter(subKey, urgent ? 0 : (this.opts.statusIntervalMs ?? SUBSCRIPTION_STATUS_INTERVAL_MS));
  }

  /** Writes the rolled-up status of subscriptions whose endpoint changed since the last write. */
  private async flushSubscriptionStatus(budgetMs: number): Promise<void> {
    if (!this.endpoints || !this.caches) return;
    const deadline = AbortSignal.timeout(budgetMs);
    const dirty = [...this.endpoints.all()].filter((ep) => ep.dirty || ep.succeededDelta || ep.discardedDelta);
    await Promise.allSettled(dirty.map((ep) => this.subscriptionReconciler.rollUpOnly(ep.key, deadline)));
  }

  /**
   * Graceful shutdown. Returns when everything is closed. The drain log lines and the
   * webhook_drain_total metric say how it went.
   */
  stop(): Promise<void> {
    this.stopped ??= this.doStop();
    return this.stopped;
  }

  private async doStop(): Promise<void> {
    const log = this.log;
    const started = Date.now();
    this.shuttingDown = true;
    const drainMs = this.config.drain.timeoutMs;
    const inFlightAtStart = this.endpoints?.inFlight ?? 0;
    log.info({ inFlight: inFlightAtStart, drainTimeoutMs: drainMs }, "shutdown: not ready, no new attempts, draining in-flight deliveries");
    // The Lease is kept (and renewed) while draining, so no one else sends these deliveries.
    const { finishedInGrace, interrupted } = await this.stopLeading(drainMs);
    if (finishedInGrace) {
      this.metrics.drain.inc({ result: "drained" });
      log.info({ msg: "webhook_deliveries_drained", drained: inFlightAtStart, durationMs: Date.now() - started });
    } else {
      this.metrics.drain.inc({ result: "timeout" });
      log.warn({ msg: "webhook_drain_timeout", inFlightAtStart, interrupted, drainTimeoutMs: drainMs, action: this.config.drain.action });
    }
    await this.flushSubscriptionStatus(2_000);
    await this.events?.flush();
    log.info({ msg: "webhook_drain_flushed", interrupted, ...(interrupted ? { recordedAs: this.config.drain.action === "dead-letter" ? "DeadLettered (Drain)" : "interrupted attempts, due at once" } : {}), durationMs: Date.now() - started });
    // Now that nothing is in flight, hand the Lease over.
    if (this.elector) await this.elector.stop(true);
    await Promise.all([this.caches?.stop(), this.terminal?.stop()]);
    await this.sender?.destroy();
    await this.client?.destroy();
    await Promise.all(this.servers.map(closeServer));
    log.info({ durationMs: Date.now() - started }, "stopped");
  }
}
