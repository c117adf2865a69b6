// Stream mode's transport (HOOKLINE_NATS_URL): every replica delivers from the stream; the
// leader makes and removes the consumers and reads (and removes) each namespace's stream. In two
// steps: prepareStream() makes the connection and the hooks the engine is built with (the
// endpoint state shared between replicas, the subscription listeners); then its setup() adds the
// rest and registers it with the manager.
import type { Logger } from "pino";
import type { Config } from "../../config/config.js";
import type { TransportHooks } from "../../delivery/setup.js";
import type { Shared } from "../../delivery/shared.js";
import type { Manager } from "../../runtime/manager.js";
import { ConsumerSync } from "./consumer-sync.js";
import { HeldBudget } from "./held-bytes.js";
import { StreamLink } from "./link.js";
import { NamespaceStreams } from "./namespace-streams.js";
import { SharedEndpoints } from "./shared-endpoints.js";
import { StreamDelivery, withSubscriptionListeners } from "./stream-delivery.js";

export interface StreamMode {
  delivery: StreamDelivery;
  consumers: ConsumerSync;
  namespaces: NamespaceStreams;
}

export interface StreamPrep {
  link: StreamLink;
  /** For the engine's setup. */
  hooks: TransportHooks;
  /** After the engine: the stream's parts, registered with the manager. */
  setup(manager: Manager, s: Shared): StreamMode;
  /** Set by setup(). */
  mode?: StreamMode;
}

export function prepareStream(config: Config, url: string, log: Logger, isLeader: () => boolean): StreamPrep {
  const link = new StreamLink({
    url,
    name: `hookline operator ${config.leaderElection.identity}`,
    log,
    stream: { replicas: config.streamReplicas, maxAgeMs: config.streamMaxAgeMs, namespaceMaxMessages: config.streamNamespaceMaxMessages, namespaceMaxBytes: config.streamNamespaceMaxBytes, owner: config.installation },
    auth: config.natsAuth,
  });
  let shared: SharedEndpoints | undefined;
  const prep: StreamPrep = {
    link,
    hooks: {
      sharedEndpoints: (inner, endpoints, breakerOf) =>
        (shared = new SharedEndpoints({
          inner,
          endpoints,
          me: config.leaderElection.identity,
          breakerConfig: breakerOf,
          healthProbeIntervalMs: config.healthProbeIntervalMs,
          isLeader,
          onAdopted: (subKey) => prep.mode?.delivery.wakeSubscription(subKey),
          log,
        })),
      subscriptionHandler: (inner) => withSubscriptionListeners(inner, [(k) => prep.mode?.delivery.subscriptionChanged(k), (k, spec) => prep.mode?.consumers.subscriptionChanged(k, spec)]),
    },
    setup: (manager, s) => {
      if (!shared) throw new Error("stream mode: the engine was built without the stream's hooks");
      return (prep.mode = setupStream(manager, s, link, shared, log));
    },
  };
  return prep;
}

function setupStream(manager: Manager, s: Shared, link: StreamLink, shared: SharedEndpoints, log: Logger): StreamMode {
  const { config, metrics } = s;
  const delivery = new StreamDelivery({
    link,
    shared,
    client: s.client,
    outcomes: s.outcomes,
    caches: s.caches,
    endpoints: s.endpoints,
    step: s.step,
    executor: s.executor,
    finals: s.finals,
    events: s.events,
    metrics,
    budget: new HeldBudget(config.streamMaxHeldBytes, (ns, bytes) => metrics.streamLimits.heldBytes.set({ namespace: ns }, bytes)),
    maxAgeMs: config.streamMaxAgeMs,
    log,
  });
  metrics.streamLimits.setLimits({ heldBytes: config.streamMaxHeldBytes, messages: config.streamNamespaceMaxMessages, bytes: config.streamNamespaceMaxBytes, maxAgeMs: config.streamMaxAgeMs });
  const common = { link, caches: s.caches, namespaces: config.watchNamespaces, installation: config.installation, metrics, log };
  const namespaces = new NamespaceStreams(common);
  const consumers = new ConsumerSync({ ...common, forget: (uid) => shared.forget(uid), lagChanged: (subKey) => s.rollUp(subKey, false) });
  manager.add({ name: "nats", start: () => link.start(), stop: () => link.stop(), notReady: () => link.problem() }, { group: "server" });
  // Every replica delivers from the stream; consumers are made and removed by the leader.
  manager.add(delivery, { group: "worker" });
  manager.add(consumers, { group: "leader" });
  manager.add(namespaces, { group: "leader" });
  return { delivery, consumers, namespaces };
}
