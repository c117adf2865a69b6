// The publish feature: the HTTP publish door (docs/publishing.md), served by every replica,
// leader or not, once the caches are synced. Events go in as WebhookDeliveries (CR mode) or into
// the namespace's stream (stream mode, with its quota). Nothing is added when PUBLISH_PORT is unset.
import type { Logger } from "pino";
import type { Shared } from "../delivery/shared.js";
import { serverRunnable } from "../observability/http-servers.js";
import type { Manager } from "../runtime/manager.js";
import type { StreamLink } from "../transports/stream/link.js";
import { publishServer } from "./server.js";
import type { ReloadingTls } from "../access/tls.js";

export interface PublishDoorOptions {
  log: Logger;
  /** The replica's readiness: the door answers 503 until it is ready. */
  ready: () => { ready: boolean; reason?: string };
  /** PUBLISH_TLS_CERT_FILE and _KEY_FILE, loaded (and reloaded when renewed). */
  tls?: ReloadingTls | undefined;
  /** Stream mode's connection: published events go to the namespace's stream. */
  link?: StreamLink | undefined;
  /** The port the door listens on (PUBLISH_PORT 0 picks one). */
  onListening: (port: number) => void;
  /** The address it listens on (OperatorOptions.listenHost); every interface unless given. */
  host?: string | undefined;
}

export function setupPublishDoor(manager: Manager, s: Shared, o: PublishDoorOptions): void {
  const { config, caches, metrics } = s;
  if (config.publishPort === undefined) return;
  const door = publishServer({
    client: s.client,
    log: o.log,
    ready: o.ready,
    subscriptions: () => caches.subscriptions.values(),
    pendingOf: (ns, sub) => caches.deliveriesOf(`${ns}/${sub}`).size,
    watchNamespaces: config.watchNamespaces,
    reviews: { audiences: config.publish.audiences },
    authFailures: config.publish.authFailures,
    metrics: metrics.publishDoor,
    onFilter: (namespace, subscription, result) => metrics.eventsFiltered.inc({ namespace, subscription, result }),
    ...(o.tls ? { tls: o.tls } : {}),
    ...(o.link ? { stream: o.link, streamQuota: { messages: config.streamNamespaceMaxMessages, bytes: config.streamNamespaceMaxBytes, refused: (namespace, quota) => metrics.streamLimits.refused.inc({ namespace, quota }) } } : {}),
  });
  manager.add(serverRunnable("publish", door, config.publishPort, o.onListening, o.host), { group: "after-sync" });
}
