// CR mode's transport: WebhookDelivery objects through the leader's delivery queue. Builds the
// delivery reconciler with its backlog and wait reports, and the leader term that runs the
// delivery, subscription and replay controllers while this replica leads.
import type { Engine } from "../../delivery/setup.js";
import { LeaderTerm } from "../../delivery/leader-term.js";
import type { Reconciler } from "../../runtime/controller.js";
import type { Manager } from "../../runtime/manager.js";
import type { TerminalIndex } from "../../finished/terminal-index.js";
import type { Replayer } from "../../replay/replay.js";
import { Backlog } from "./backlog.js";
import { DeliveryKeys } from "./delivery-keys.js";
import { DeliveryReconciler } from "./delivery-reconciler.js";
import { WaitReports } from "./waits.js";

export interface CrTransportDeps {
  terminal: TerminalIndex;
  replayer: Replayer;
  replays: Reconciler;
  subscriptions: Reconciler;
  /** Requests stream mode has in flight (its drain counts them; the leader term does not). */
  streamInFlight: () => number;
}

export function setupCrTransport(manager: Manager, engine: Engine, d: CrTransportDeps): LeaderTerm {
  const { shared: s, lanes } = engine;
  const { caches, endpoints, outcomes, queues } = s;
  const log = s.log.child({ controller: "delivery" });
  const backlog = new Backlog((key) => queues.addDelivery(key));
  engine.late.deliveryLeft = (subKey, key) => backlog.left(subKey, key, caches.policy(caches.subscription(subKey))?.maxPending);
  const deliveries = new DeliveryReconciler({
    client: s.client,
    lanes,
    deadLetterRoom: (key, subKey) => d.terminal.makeRoom(key, subKey),
    caches,
    endpoints,
    step: s.step,
    executor: s.executor,
    waits: new WaitReports({ outcomes, events: s.events, log }),
    backlog,
    outcomes,
    finals: s.finals,
    events: s.events,
    expectations: s.expectations.deliveries,
    log,
    requeue: (key) => queues.addDelivery(key),
    leading: s.isLeader,
  });
  const term = new LeaderTerm({
    caches,
    deliveryKeys: new DeliveryKeys({ deliveries, replay: d.replayer, hasUnwritten: (key) => outcomes.hasUnwritten(key), endpoints }),
    subscriptions: d.subscriptions,
    replays: d.replays,
    replayRequests: () => d.terminal.replayRequests(),
    onStart: () => {
      // Breaker and health kept from an earlier term are not trusted: taken from status again.
      endpoints.newTerm();
      backlog.reset();
      d.replayer.restart();
      d.terminal.resync();
    },
    stopReplays: (graceMs) => d.replayer.stop(graceMs),
    // The CR path's requests; stream mode's drain counts its own.
    inFlight: () => endpoints.inFlight - d.streamInFlight(),
    deliveryExpectations: s.expectations.deliveries,
    metrics: s.metrics,
    log: s.log,
    // One worker per request in flight, plus headroom for reconciles that only write status.
    deliveryWorkers: s.config.maxInFlight + 16,
  });
  engine.term.current = term;
  manager.add(term, { group: "leader" });
  return term;
}
