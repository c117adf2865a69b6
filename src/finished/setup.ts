// The finished deliveries' feature: the index of them (retention, sweep, dead-letter cap,
// storage budget), synced with the caches before the leader starts.
import type { Shared } from "../delivery/shared.js";
import type { Manager } from "../runtime/manager.js";
import type { TerminalRecord } from "./records.js";
import { TerminalIndex } from "./terminal-index.js";

export function setupFinished(manager: Manager, s: Shared, onDeadLetter: (rec: TerminalRecord, present: boolean) => void): TerminalIndex {
  const terminal = new TerminalIndex({
    client: s.client,
    caches: s.caches,
    namespaces: s.config.watchNamespaces,
    events: s.events,
    metrics: s.metrics,
    log: s.log.child({ component: "terminal-index" }),
    isLeader: s.isLeader,
    onReplayRequested: (key) => s.queues.addDelivery(key),
    onDeadLettersChanged: (subKey) => s.rollUp(subKey, false),
    onDeadLetter,
    maxFinishedDeliveries: s.config.maxFinishedDeliveries,
    dlqMaxEntries: s.config.dlqMaxEntries,
  });
  manager.add({ name: "terminal index", start: () => terminal.start(), stop: () => terminal.stop(), waitForSync: (sync) => terminal.waitForSync(sync) }, { group: "cache" });
  return terminal;
}
