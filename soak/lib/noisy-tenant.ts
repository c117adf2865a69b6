// The tenant mix (CR mode): a noisy tenant, namespace soak-noisy, that floods for a while every
// pool the soak's own tenants share with it, as test/integration/noisy-neighbour.test.ts does:
// ten times the workload's rate, a hanging endpoint (request slots), 200 KiB payloads (memory),
// a paused subscription holding its deliveries, and a subscription whose deliveries are all dead
// letters at once (the dead-letter cap and the storage budget). The soak's history ignores the
// namespace: the invariants are about the other tenants, which must keep every promise while it
// floods (no relaxation: a flood is not a fault window).
import { API_VERSION, DELIVERY } from "../../src/api/names.js";
import type { SubscriptionSpecInput } from "../../src/api/subscription.js";
import { CONTENT_TYPE, type KubeClient } from "../../src/kube/client.js";
import { collectionPath, objectPath, CORE } from "../../src/kube/types.js";
import { DELIVERIES, SUBSCRIPTIONS } from "../../bench/lib/kube.js";
import { sleep } from "../../bench/lib/util.js";
import type { ReceiverProcess } from "./receivers.js";
import { ensureNamespace, withRetry } from "./workload.js";

export const NOISY_NS = "soak-noisy";
const SECRET = "noisy-signing";
const BIG = "x".repeat(200 * 1024);

/** The noisy tenant's subscriptions, each aimed at one shared pool. */
const SUBSCRIPTIONS_OF_NOISY: Array<{ name: string; spec: (url: (endpoint: string) => string) => SubscriptionSpecInput }> = [
  { name: "n-hang", spec: (url) => ({ url: url("n-hang"), timeout: "5s", maxInFlight: 10, retry: { maxAttempts: 2, initialBackoff: "1s" } }) },
  { name: "n-big", spec: (url) => ({ url: url("n-big"), maxInFlight: 10 }) },
  { name: "n-paused", spec: (url) => ({ url: url("n-paused"), paused: true }) },
  { name: "n-dead", spec: (url) => ({ url: url("n-dead"), eventTypes: ["not.subscribed"] }) },
];

export class NoisyTenant {
  created = 0;
  refused = 0;
  floods = 0;
  private n = 0;

  constructor(
    private readonly client: KubeClient,
    private readonly receiver: ReceiverProcess,
  ) {}

  /** The namespace, its Secret and subscriptions; the hanging endpoint hangs. */
  async setup(): Promise<void> {
    await ensureNamespace(this.client, NOISY_NS);
    const secret = { apiVersion: "v1", kind: "Secret", metadata: { name: SECRET, namespace: NOISY_NS }, stringData: { secret: `whsec_${Buffer.from("noisy tenant signing key 24b").toString("base64")}` } };
    await withRetry(() => this.client.request({ method: "PATCH", path: objectPath(CORE.secrets, NOISY_NS, SECRET), query: { fieldManager: "soak", force: true }, contentType: CONTENT_TYPE.apply, body: secret }));
    const url = (endpoint: string) => this.receiver.url(`/e/${NOISY_NS}.${endpoint}/v1`);
    for (const s of SUBSCRIPTIONS_OF_NOISY) {
      const obj = { apiVersion: API_VERSION, kind: "WebhookSubscription", metadata: { name: s.name, namespace: NOISY_NS }, spec: { ...s.spec(url), secretRef: { name: SECRET, key: "secret" } } };
      await withRetry(() => this.client.request({ method: "PATCH", path: objectPath(SUBSCRIPTIONS, NOISY_NS, s.name), query: { fieldManager: "soak", force: true }, contentType: CONTENT_TYPE.apply, body: obj }));
    }
    await this.hang();
  }

  /** The hanging endpoint hangs again (the settle phase and receiver restarts make every endpoint answer 200). */
  async hang(): Promise<void> {
    await this.receiver.set(`${NOISY_NS}.n-hang`, { kind: "hang" });
  }

  /** `perSecond` deliveries for `ms`, on a schedule, spread over the four subscriptions (every tenth of n-big's with 200 KiB). */
  async flood(ms: number, perSecond: number): Promise<void> {
    this.floods++;
    await this.hang().catch(() => undefined);
    const start = Date.now();
    const sends: Array<Promise<void>> = [];
    for (let i = 0; Date.now() - start < ms; i++) {
      const wait = start + (i * 1000) / perSecond - Date.now();
      if (wait > 0) await sleep(wait);
      const sub = SUBSCRIPTIONS_OF_NOISY[i % SUBSCRIPTIONS_OF_NOISY.length]!.name;
      const name = `flood-${++this.n}`;
      const payload = sub === "n-big" && this.n % 10 === 0 ? { pad: BIG, n: this.n } : { n: this.n };
      const body = { apiVersion: API_VERSION, kind: DELIVERY.kind, metadata: { name, namespace: NOISY_NS }, spec: { subscriptionRef: { name: sub }, eventType: "order.paid", payload } };
      sends.push(
        this.client.request({ method: "POST", path: collectionPath(DELIVERIES, NOISY_NS), body }).then(
          () => void this.created++,
          // The API server down (a fault at the same time), or too busy: the flood goes on.
          () => void this.refused++,
        ),
      );
    }
    await Promise.all(sends);
  }
}
