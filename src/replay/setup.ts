// The replay feature: the one replay engine and the WebhookReplay objects it runs. Its work comes
// through the leader's queues (replay keys, and the deliveries a replay enqueues).
import type { Shared } from "../delivery/shared.js";
import type { DeadLetterIndex } from "./replay.js";
import { Replayer } from "./replay.js";
import { ReplayObjects } from "./objects.js";

export function setupReplay(s: Shared, terminal: DeadLetterIndex): { replayer: Replayer; replays: ReplayObjects } {
  const replayer = new Replayer({
    client: s.client,
    caches: s.caches,
    terminal,
    step: s.step,
    outcomes: s.outcomes,
    finals: s.finals,
    statusWriter: s.statusWriter,
    events: s.events,
    metrics: s.metrics,
    expectations: s.expectations.subscriptions,
    log: s.log.child({ component: "replay" }),
    touchSubscription: (subKey) => s.queues.addSubscription(subKey),
    runEnded: (ns) => {
      // A run ends only after the objects below exist (runs start from them).
      for (const key of replays.unfinishedIn(ns)) s.queues.addReplay(key);
    },
    enqueueDelivery: (key) => s.queues.addDelivery(key),
  });
  const replays = new ReplayObjects({
    caches: s.caches,
    replayer,
    statusWriter: s.statusWriter,
    events: s.events,
    expectations: s.expectations.replays,
    log: s.log.child({ controller: "replay" }),
    requeue: (key) => s.queues.addReplay(key),
  });
  return { replayer, replays };
}
