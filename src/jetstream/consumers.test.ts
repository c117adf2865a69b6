import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ACK_WAIT_MARGIN_MS, ConsumerSpecError, consumerConfig, consumerName, orphanedConsumers, type HooklineConsumer } from "./consumers.js";
import { backoffMs } from "./jetstream.js";

const sub = { namespace: "shop", name: "acme", uid: "0b5e3c1e-7d2a-4e7b-9d38-0f2f6a0c9d11" };
const policy = { eventTypes: ["order.*", "invoice.paid"], maxInFlight: 7, timeoutMs: 10_000 };

describe("consumerName", () => {
  it("is readable, short and valid as a consumer name whatever the subscription name", () => {
    expect(consumerName(sub)).toMatch(/^shop_acme_[0-9a-f]{16}$/);
    const long = { namespace: "n".repeat(63), name: `${"a".repeat(100)}.${"b".repeat(152)}`, uid: "u" };
    expect(consumerName(long).length).toBeLessThanOrEqual(63);
    expect(consumerName({ ...sub, name: "acme.v2.hooks" })).toMatch(/^shop_acme-v2-hooks_[0-9a-f]{16}$/);
  });

  it("never gives two subscriptions (or the same name with a new uid) the same consumer", () => {
    const name = fc.stringMatching(/^[a-z0-9]([-a-z0-9.]{0,20}[a-z0-9])?$/).filter((n) => !n.includes("..") && !/[.-]\.|\.-/.test(n));
    const identity = fc.record({ namespace: fc.constantFrom("shop", "shop-2", "a"), name, uid: fc.constantFrom("u1", "u2") });
    fc.assert(
      fc.property(identity, identity, (a, b) => {
        fc.pre(JSON.stringify(a) !== JSON.stringify(b));
        const na = consumerName(a);
        expect(na).not.toBe(consumerName(b));
        expect(na).toMatch(/^[a-z0-9_-]{1,63}$/);
      }),
      { numRuns: 2000 },
    );
    expect(consumerName({ ...sub, name: "a.b" })).not.toBe(consumerName({ ...sub, name: "a-b" }));
  });

  it("refuses what no subscription has, naming the field", () => {
    expect(() => consumerName({ ...sub, name: "Acme" })).toThrow(ConsumerSpecError);
    expect(() => consumerName({ ...sub, uid: " " })).toThrow(/no uid/);
    let err: unknown;
    try {
      consumerConfig(sub, { ...policy, maxInFlight: 0 });
    } catch (e) {
      err = e;
    }
    expect((err as ConsumerSpecError).field).toBe("spec.maxInFlight");
  });
});

describe("consumerConfig", () => {
  it("maps the subscription: filters from eventTypes, max_ack_pending from maxInFlight, ack_wait from the timeout", () => {
    expect(consumerConfig(sub, policy)).toEqual({
      durable_name: consumerName(sub),
      description: "Hookline: WebhookSubscription shop/acme",
      ack_policy: "explicit",
      deliver_policy: "new",
      replay_policy: "instant",
      filter_subjects: ["hookline.shop.invoice.paid", "hookline.shop.order.>"],
      max_ack_pending: 7,
      ack_wait: (10_000 + ACK_WAIT_MARGIN_MS) * 1_000_000,
      max_deliver: -1,
      metadata: { "hookline.dev/namespace": "shop", "hookline.dev/subscription": "acme", "hookline.dev/uid": sub.uid },
    });
    expect(consumerConfig(sub, { ...policy, eventTypes: undefined }).filter_subjects).toEqual(["hookline.shop.>"]);
  });

  it("names the installation that made it in its metadata", () => {
    expect(consumerConfig(sub, policy, "hookline/hookline").metadata).toEqual({ "hookline.dev/namespace": "shop", "hookline.dev/subscription": "acme", "hookline.dev/uid": sub.uid, "hookline.dev/installation": "hookline/hookline" });
  });
});

describe("orphanedConsumers", () => {
  const c = (namespace: string, name: string, uid: string): HooklineConsumer => ({ consumer: consumerName({ namespace, name, uid }), namespace, name, uid, filterSubjects: [], pending: 0, ackPending: 0 });
  it("finds consumers of deleted (or re-created) subscriptions, within the served namespaces only", () => {
    const all = [c("shop", "acme", "u1"), c("shop", "gone", "u2"), c("shop", "acme-again", "old"), c("billing", "x", "u3")];
    const live = [{ namespace: "shop", name: "acme", uid: "u1" }, { namespace: "shop", name: "acme-again", uid: "new" }];
    expect(orphanedConsumers(all, live).map((o) => o.name)).toEqual(["gone", "acme-again", "x"]);
    expect(orphanedConsumers(all, live, ["shop"]).map((o) => o.name)).toEqual(["gone", "acme-again"]);
  });

  it("leaves the consumers another installation made, whatever their subscriptions", () => {
    const mine = { ...c("shop", "gone", "u2"), installation: "hookline/hookline" };
    const theirs = { ...c("shop", "theirs", "u9"), installation: "other/hookline" };
    // Made before installations claimed consumers: on this installation's stream, so its own.
    const unclaimed = c("shop", "old", "u8");
    expect(orphanedConsumers([mine, theirs, unclaimed], [], undefined, "hookline/hookline").map((o) => o.name)).toEqual(["gone", "old"]);
  });
});

describe("backoffMs", () => {
  it("reconnect backoff doubles from 250 ms to 5 s with at most 20 % jitter", () => {
    expect([0, 1, 2, 3, 4, 5, 10, 50].map((n) => backoffMs(n, () => 0))).toEqual([250, 500, 1000, 2000, 4000, 5000, 5000, 5000]);
    expect(backoffMs(50, () => 1)).toBe(6000);
  });
});
