// Unsigned requests only by explicit choice: signature.scheme None, never a forgotten secretRef.
import { describe, expect, it } from "vitest";
import { subscriptionSpecSchema, type SubscriptionSpecInput } from "../../api/subscription.js";
import { resolvePolicy } from "../../core/attempt/policy.js";
import { SECRET_REQUIRED_MESSAGE, secretsFor } from "./credentials.js";
import { buildRequest } from "./request.js";

const policyOf = (spec: Partial<SubscriptionSpecInput>) =>
  resolvePolicy(subscriptionSpecSchema.parse({ url: "https://hooks.acme.example/orders", ...spec }), { deliveryTimeoutMs: 10_000, breaker: { failureThreshold: 5, successThreshold: 1, cooldownMs: 30_000 } });

const deps = (keys: Buffer[] = [Buffer.from("k")]) => ({
  secrets: { keys: () => Promise.resolve({ kind: "ok" as const, keys }) },
  credentials: { resolveDue: () => Promise.resolve(undefined) },
});

describe("secretsFor: a subscription without secretRef", () => {
  it("waits like a missing Secret unless its scheme is None (the message names the fields and the fix)", async () => {
    for (const scheme of [undefined, "StandardWebhooks", "HMACSHA256Hex"] as const) {
      const got = await secretsFor(deps(), "shop", policyOf(scheme ? { signature: { scheme } } : {}), true);
      expect(got.secret).toEqual({ kind: "missing", message: SECRET_REQUIRED_MESSAGE });
      expect(got.keys).toEqual([]);
    }
    expect(SECRET_REQUIRED_MESSAGE).toContain("spec.secretRef");
    expect(SECRET_REQUIRED_MESSAGE).toContain("spec.signature.scheme");
  });

  it("with scheme None sends unsigned (no Secret read); not due or paused reads nothing either", async () => {
    expect((await secretsFor(deps(), "shop", policyOf({ signature: { scheme: "None" } }), true)).secret).toEqual({ kind: "none" });
    expect((await secretsFor(deps(), "shop", policyOf({}), false)).secret).toEqual({ kind: "none" });
    expect((await secretsFor(deps(), "shop", policyOf({ paused: true }), true)).secret).toEqual({ kind: "none" });
  });

  it("with secretRef signs as before", async () => {
    const got = await secretsFor(deps([Buffer.from("key")]), "shop", policyOf({ secretRef: { name: "signing" } }), true);
    expect(got.secret).toEqual({ kind: "ok" });
    expect(got.keys).toEqual([Buffer.from("key")]);
  });
});

describe("the schema: scheme None", () => {
  it("refuses secretRef with scheme None, naming secretRef", () => {
    const r = subscriptionSpecSchema.safeParse({ url: "https://hooks.acme.example/orders", secretRef: { name: "signing" }, signature: { scheme: "None" } });
    expect(r.success).toBe(false);
    expect(JSON.stringify(r.error?.issues)).toContain("signature.scheme None sends unsigned requests");
    expect(r.error?.issues[0]?.path).toEqual(["secretRef"]);
  });
});

describe("buildRequest with scheme None", () => {
  it("sends webhook-id and webhook-timestamp, and no signature header", () => {
    const policy = policyOf({ signature: { scheme: "None" } });
    const req = buildRequest({ message: { id: "evt-1", type: "order.paid", body: "{}" }, policy, keys: [], userAgent: "hookline/test", startedAt: 1_750_000_000_123 });
    expect(req.headers).toMatchObject({ "webhook-id": "evt-1", "webhook-timestamp": "1750000000" });
    expect(Object.keys(req.headers).filter((h) => h.includes("signature"))).toEqual([]);
    expect(req.headers).not.toHaveProperty("x-webhook-id");
  });
});
