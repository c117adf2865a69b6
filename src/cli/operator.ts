// The composition root: connects to the API server, builds the delivery engine
// (src/delivery/setup.ts) and lists the features' setups; the manager (src/runtime/manager.ts)
// starts and stops their parts in order. Nothing here decides anything about deliveries; see
// docs/architecture.md for the path of one delivery.
import type { Logger } from "pino";
import { GROUP, VERSION as API_GROUP_VERSION } from "../api/names.js";
import { configWarnings, type Config } from "../config/config.js";
import type { Caches } from "../delivery/caches.js";
import { DrainLog, drainReportPart } from "../delivery/drain.js";
import { setupEngine, type Engine } from "../delivery/setup.js";
import { setupFinished } from "../finished/setup.js";
import { connectApi, crdCheck } from "../kube/connect.js";
import { LeaderElector } from "../kube/leader.js";
import { ALL_INTERFACES, healthServer, metricsServer, serverRunnable } from "../observability/http-servers.js";
import { createLogger } from "../observability/logger.js";
import { Metrics } from "../observability/metrics.js";
import { setupPublishDoor } from "../publish/setup.js";
import { kubernetesMetricsGuard } from "../access/metrics-guard.js";
import { METRICS_TLS, ReloadingTls } from "../access/tls.js";
import { setupReplay } from "../replay/setup.js";
import { Manager } from "../runtime/manager.js";
import { setupSubscriptions } from "../subscriptions/setup.js";
import { setupCrTransport } from "../transports/cr/setup.js";
import { prepareStream } from "../transports/stream/setup.js";
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
  /**
   * The address the metrics, health and publish servers listen on; default every interface (a
   * pod's, for Prometheus, the kubelet and publishers). `hookline dev` gives 127.0.0.1: on a
   * developer's machine nothing else needs them, and the probes (and /metrics unless
   * METRICS_AUTH=kubernetes) do not authenticate.
   */
  listenHost?: string;
}

/** The last rollups of a drain get this long, while the Lease is still held. */
const FINAL_ROLLUP_BUDGET_MS = 2_000;

export class Operator {
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly config: Config;
  elector: LeaderElector | undefined;
  metricsPort = 0;
  healthPort = 0;
  /** Port of the publish endpoint once listening (PUBLISH_PORT; 0 picks one); undefined when off. */
  publishPort: number | undefined;
  private manager: Manager | undefined;
  private engine: Engine | undefined;
  private drainLog: DrainLog | undefined;
  private stopped: Promise<void> | undefined;

  constructor(private readonly opts: OperatorOptions) {
    this.config = opts.config;
    this.log = opts.log ?? createLogger({ level: opts.config.logLevel });
    this.metrics = opts.metrics ?? new Metrics();
  }

  get caches(): Caches {
    if (!this.engine) throw new Error("the operator has not started");
    return this.engine.shared.caches;
  }

  /** This replica's leader term runs, and (with leader election) its Lease was renewed within the renew deadline. */
  get isLeader(): boolean {
    return (this.engine?.term.current?.leading ?? false) && (this.elector?.leaseFresh ?? true);
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
    // So does the metrics server's (METRICS_TLS_CERT_FILE or _KEY_FILE).
    const metricsTls = config.metrics.tls ? await ReloadingTls.load(config.metrics.tls, log.child({ component: "metrics" }), { owner: METRICS_TLS }) : undefined;
    const api = await connectApi({ kubeconfig: this.opts.kubeconfig, env: process.env, userAgent: USER_AGENT, observer: metrics });
    const { client } = api;
    // METRICS_AUTH=kubernetes: /metrics asks the API server who is scraping (access/metrics-guard.ts).
    const metricsGuard = config.metrics.auth === "kubernetes" ? kubernetesMetricsGuard(client) : undefined;
    log.info(
      { server: client.server, namespaces: config.watchNamespaces.length ? config.watchNamespaces : "all", allowedNetworks: config.allowedNetworksText || "public only", mode: config.natsUrl ? `CR + stream (${config.natsUrlRedacted})` : "CR" },
      "hookline operator starting",
    );
    for (const w of configWarnings(config)) log.warn({ variable: w.variable, advice: w.message }, "configuration advice");

    const drainLog = (this.drainLog = new DrainLog({ log, metrics, timeoutMs: config.drain.timeoutMs, action: config.drain.action }));
    const le = config.leaderElection;
    const manager = (this.manager = new Manager({
      log,
      drainMs: config.drain.timeoutMs,
      onSynced: () => log.info({ subscriptions: shared.caches.subscriptions.size, activeDeliveries: shared.caches.deliveries.size, deadLetters: terminal.size }, "caches synced"),
      onStopping: () => drainLog.started(shared.endpoints.inFlight),
      // The Lease as configured (LEADER_ELECT, LEADER_ELECTION_*).
      ...(le.enabled ? { elector: (callbacks) => (this.elector = new LeaderElector({ ...le, client, namespace: le.leaseNamespace, name: le.leaseName, log: log.child({ component: "leader-election" }), onLateAnswer: (write) => metrics.leaderLateAnswers.inc({ write }), ...callbacks })) } : {}),
    }));
    // Probes answer from the first moment (not ready until synced).
    manager.add(serverRunnable("metrics", metricsServer(metrics.registry, { guard: metricsGuard, tls: metricsTls }), config.metricsPort, (p) => (this.metricsPort = p), this.opts.listenHost), { group: "server" });
    manager.add(serverRunnable("health", healthServer({ live: () => true, ready: () => this.ready }), config.healthPort, (p) => (this.healthPort = p), this.opts.listenHost), { group: "server" });
    manager.add(crdCheck(api, GROUP, API_GROUP_VERSION, log), { group: "server" });

    // The engine, then the features, each with its own setup.
    const stream = config.natsUrl ? prepareStream(config, config.natsUrl, log.child({ component: "stream" }), () => this.isLeader) : undefined;
    const engine = (this.engine = await setupEngine(manager, { config, client, log, metrics, isLeader: () => this.isLeader, statusIntervalMs: this.opts.statusIntervalMs, transport: stream?.hooks }));
    const { shared, lanes } = engine;
    const terminal = setupFinished(manager, shared, (rec, present) => {
      const subKey = `${rec.metadata.namespace}/${rec.subscription}`;
      if (present) lanes.deadLetterSeen(subKey, rec.metadata.name, rec.ordering);
      else lanes.deadLetterGone(subKey, rec.metadata.name);
    });
    const { replayer, replays } = setupReplay(shared, terminal);
    engine.late.unfinishedReplays = (ns) => replays.unfinishedIn(ns);
    const subscriptions = setupSubscriptions(shared, {
      deadLetters: terminal,
      bulkReplay: (sub, signal) => replayer.bulk(sub, signal),
      streamPending: (key) => stream?.mode?.consumers.pendingOf(key) ?? 0,
    });
    setupPublishDoor(manager, shared, { log: publishLog, ready: () => this.ready, tls, link: stream?.link, onListening: (p) => (this.publishPort = p), host: this.opts.listenHost });
    const term = setupCrTransport(manager, engine, { terminal, replayer, replays, subscriptions, streamInFlight: () => stream?.mode?.delivery.inFlight ?? 0 });
    const streamMode = stream?.setup(manager, shared);
    const flushes = [() => subscriptions.flushDirty(FINAL_ROLLUP_BUDGET_MS), () => shared.events.flush()];
    manager.add(drainReportPart(drainLog, () => [term.lastDrain, ...(streamMode ? [streamMode.delivery.lastDrain] : [])], flushes), { group: "after-drain" });
    await manager.start();
    log.info({ host: this.opts.listenHost ?? ALL_INTERFACES, metricsPort: this.metricsPort, metricsAuth: config.metrics.auth, metricsTls: config.metrics.tls !== undefined, healthPort: this.healthPort, ...(this.publishPort !== undefined ? { publishPort: this.publishPort } : {}) }, "serving /metrics, /healthz and /readyz");
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
