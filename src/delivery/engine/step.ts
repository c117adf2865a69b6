// The one delivery step around the attempt executor, for CR mode, stream mode and replay:
// gather (the subscription's signing keys and receiver credentials), plan (core/attempt/plan.ts, or
// admitReplay for a replay) in the same turn as the endpoint state it reads, run (the executor)
// and outcome (core/attempt/outcome.ts, with the one clock and randomness). What differs between them is
// the transport, their port onto this step: how it loads what to send (`message`), where it
// parks (`wake`), how it records an outcome (`record`) and how it schedules the next try (what
// it does with the outcome's nextAttemptAt).
import type { DeliveryStatus } from "../../api/delivery.js";
import { applyAttempt, type AttemptResult, type OutcomeResult, type ReplayInput } from "../../core/attempt/outcome.js";
import type { OrderView } from "../../core/ordering.js";
import { admitReplay, plan, type Action, type DeliveryView, type SecretView, type SubscriptionView } from "../../core/attempt/plan.js";
import type { Policy } from "../../core/attempt/policy.js";
import type { TraceContext } from "../../core/request/trace-context.js"; // [tracing]
import type { SubscriptionStatus } from "../../api/subscription.js";
import type { AttemptExecutor } from "./attempt.js";
import { secretsFor, type Credentials, type ResolvedCredentials } from "./credentials.js"; // [receiver-credentials]
import type { Endpoint, EndpointRegistry } from "./endpoints.js";
import type { RequestBody } from "./request.js";
import type { SecretCache } from "./secrets.js";

export interface DeliveryStepDeps {
  endpoints: EndpointRegistry;
  secrets: SecretCache;
  /** [receiver-credentials] headersFrom, tls, oauth2 and proxy (src/delivery/engine/credentials.ts). */
  credentials: Credentials;
  executor: AttemptExecutor;
  /** What an interrupted attempt becomes (WEBHOOK_DRAIN_TIMEOUT_ACTION). */
  interruptedAction: "requeue" | "dead-letter";
  now?: () => number;
  /** Backoff jitter. */
  random?: () => number;
}

/** What the executor signs and sends with. */
export interface StepSecrets {
  /** What plan() sees of them (a missing Secret or credential makes the delivery wait). */
  secret: SecretView;
  /** Signing keys, the current one first. */
  keys: Buffer[];
  creds: ResolvedCredentials | undefined;
}

/** The subscription a delivery goes to, as the transport read it from its cache. */
export interface StepSubscription {
  key: string;
  /** The object's uid and status (an endpoint is re-made for a new uid); undefined: no such object. */
  object: { uid: string | undefined; status: SubscriptionStatus | undefined } | undefined;
  view: SubscriptionView;
}

/** A step planned: the action, and the endpoint state it was planned with. */
export interface Planned {
  action: Action;
  endpoint: Endpoint | undefined;
  now: number;
}

/** One attempt of a planned step: the transport's side (what to send, where it came from). */
export interface StepAttempt {
  key: string;
  endpoint: Endpoint;
  policy: Policy;
  action: Extract<Action, { type: "Attempt" }>;
  secrets: Pick<StepSecrets, "keys" | "creds">;
  /** What to send; undefined when there is nothing to send any more (the delivery is gone). */
  message: (signal: AbortSignal) => Promise<RequestBody | undefined>;
  signal: AbortSignal;
  /** The status before the attempt: the attempt's number is its last attempt's plus one. */
  status: DeliveryStatus | undefined;
  trace?: TraceContext | undefined; // [tracing]
  /** An operator's replay (and, for the log line, its target subscription). */
  replay?: ReplayInput;
}

export class DeliveryStep {
  readonly now: () => number;
  private readonly random: () => number;

  constructor(private readonly d: DeliveryStepDeps) {
    this.now = d.now ?? Date.now;
    this.random = d.random ?? Math.random;
  }

  /** The signing keys and receiver credentials, read only when an attempt may follow (`due`). */
  gather(namespace: string, policy: Policy | undefined, due: boolean): Promise<StepSecrets> {
    return secretsFor(this.d, namespace, policy, due);
  }

  /**
   * plan() with the endpoint it reads, in one turn: from here to the executor taking the
   * endpoint's slots (run) there must be no await, so two deliveries never both take the one
   * probe or the last token. `delivery` is called in the same turn (CR mode's backlog count).
   */
  plan(key: string, sub: StepSubscription, secret: SecretView, delivery: (policy: Policy | undefined) => DeliveryView, order?: OrderView): Planned {
    const now = this.now();
    const policy = sub.view.kind === "ok" ? sub.view.policy : undefined;
    const endpoint = policy && sub.object ? this.d.endpoints.ensure(sub.key, sub.object.uid, sub.object.status, policy, now) : undefined;
    const action = plan({
      now,
      delivery: delivery(policy),
      subscription: sub.view,
      secret,
      endpoint: endpoint ? this.d.endpoints.view(endpoint, key) : undefined,
      ...(order ? { order } : {}),
    });
    return { action, endpoint, now };
  }

  /** A replay's admission (core/attempt/plan.ts admitReplay), in one turn with run() as plan() is. */
  planReplay(key: string, sub: StepSubscription & { object: NonNullable<StepSubscription["object"]> }, policy: Policy): Planned & { action: ReturnType<typeof admitReplay>; endpoint: Endpoint } {
    const now = this.now();
    const endpoint = this.d.endpoints.ensure(sub.key, sub.object.uid, sub.object.status, policy, now);
    return { action: admitReplay(now, policy, this.d.endpoints.view(endpoint, key)), endpoint, now };
  }

  /** Parks `key` on its endpoint (or for a global slot); `wake` is how its transport steps it again. */
  park(endpoint: Endpoint, key: string, why: Extract<Action, { type: "Park" }>["why"], wake: () => void): void {
    this.d.endpoints.park(endpoint, key, why, wake);
  }

  /**
   * One attempt through the executor; `record` (the transport's: it computes the outcome with
   * `outcome`) runs before the endpoint's slot is freed. Undefined when nothing was sent.
   */
  run<T>(a: StepAttempt, record: (attempt: AttemptResult) => Promise<T>): Promise<T | undefined> {
    return this.d.executor.run(
      {
        key: a.key,
        endpoint: a.endpoint,
        policy: a.policy,
        commit: a.action.commit,
        probe: a.action.probe,
        viaReplay: a.replay !== undefined,
        keys: a.secrets.keys,
        credentials: a.secrets.creds, // [receiver-credentials]
        message: a.message,
        signal: a.signal,
        attempt: (a.status?.lastAttempt?.number ?? 0) + 1,
        ...(a.replay?.target ? { target: a.replay.target } : {}),
        trace: a.trace, // [tracing]
      },
      record,
    );
  }

  /**
   * An attempt's outcome (core/attempt/outcome.ts applyAttempt) with the step's clock, randomness and
   * drain action: the same computation for every transport. `generation` is the delivery's
   * (stream mode has none of its own).
   */
  outcome(status: DeliveryStatus | undefined, generation: number | undefined, attempt: AttemptResult, policy: Policy, replay?: ReplayInput): OutcomeResult {
    return applyAttempt({ status, generation, now: this.now(), attempt, policy, random: this.random, interruptedAction: this.d.interruptedAction, ...(replay ? { replay } : {}) });
  }
}
