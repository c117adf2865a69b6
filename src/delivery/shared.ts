// What the operator's features share, built once by the composition root (cli/operator.ts) and
// handed to each feature's setup(manager, shared): the clients, the caches, the one endpoint
// registry and attempt executor, the outcome writer, and the leader's queues. A feature takes
// what it needs from here and registers its runnables with the manager itself.
import type { Logger } from "pino";
import type { Config } from "../config/config.js";
import type { KubeClient } from "../kube/client.js";
import type { EventRecorder } from "../kube/events.js";
import type { StatusWriter } from "../kube/status-writer.js";
import type { Metrics } from "../observability/metrics.js";
import type { Expectations } from "../runtime/expectations.js";
import type { AttemptExecutor } from "./engine/attempt.js";
import type { Caches } from "./caches.js";
import type { Credentials } from "./engine/credentials.js";
import type { EndpointRegistry } from "./engine/endpoints.js";
import type { Finals, OutcomeMeta } from "./finals.js";
import type { OutcomeWriter } from "./outcome-writer.js";
import type { SecretCache } from "./engine/secrets.js";
import type { DeliveryStep } from "./engine/step.js";

/** The leader's work queues; nothing is queued while this replica does not lead. */
export interface LeaderQueues {
  addDelivery(key: string): void;
  addReplay(key: string): void;
  addSubscription(key: string, afterMs?: number): void;
}

export interface Shared {
  config: Config;
  client: KubeClient;
  log: Logger;
  metrics: Metrics;
  events: EventRecorder;
  statusWriter: StatusWriter;
  secrets: SecretCache;
  credentials: Credentials;
  caches: Caches;
  endpoints: EndpointRegistry;
  executor: AttemptExecutor;
  /** The one delivery step (Secrets, plan, attempt, outcome) every transport and replay goes through. */
  step: DeliveryStep;
  outcomes: OutcomeWriter<OutcomeMeta>;
  finals: Finals;
  expectations: { deliveries: Expectations; subscriptions: Expectations; replays: Expectations };
  queues: LeaderQueues;
  isLeader: () => boolean;
  /** Rolls a subscription's endpoint state up into its status (`urgent`: now, not at the next interval). */
  rollUp: (subKey: string, urgent: boolean) => void;
}
