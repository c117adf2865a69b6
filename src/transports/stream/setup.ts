// Stream mode's transport (HOOKLINE_NATS_URL): every replica delivers from the stream; the
// leader makes and removes the consumers and reads (and removes) each namespace's stream. The
// connection and the shared endpoint state are built earlier (the endpoint registry reports to
// them); this adds the rest and registers it with the manager.
import type { Shared } from "../../delivery/shared.js";
import type { Manager } from "../../runtime/manager.js";
import { ConsumerSync } from "./consumer-sync.js";
import { HeldBudget } from "./held-bytes.js";
import type { StreamLink } from "./link.js";
import { NamespaceStreams } from "./namespace-streams.js";
import type { SharedEndpoints } from "./shared-endpoints.js";
import { StreamDelivery } from "./stream-delivery.js";

export interface StreamMode {
  delivery: StreamDelivery;
  consumers: ConsumerSync;
  namespaces: NamespaceStreams;
}

export function setupStream(manager: Manager, s: Shared, link: StreamLink, shared: SharedEndpoints, log = s.log.child({ component: "stream" })): StreamMode {
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
  // Every replica delivers from the stream; consumers are made and removed by the leader.
  manager.add(delivery, { group: "worker" });
  manager.add(consumers, { group: "leader" });
  manager.add(namespaces, { group: "leader" });
  return { delivery, consumers, namespaces };
}
