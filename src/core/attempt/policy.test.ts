import { describe, expect, it } from "vitest";
import { subscriptionSpecSchema, type SubscriptionSpecInput } from "../../api/subscription.js";
import { matchesEventType, resolvePolicy, type PolicyDefaults } from "./policy.js";

const defaults: PolicyDefaults = { deliveryTimeoutMs: 7_000, breaker: { failureThreshold: 9, successThreshold: 3, cooldownMs: 45_000 } };
const URL_ = "https://hooks.acme.example/orders";
const resolve = (spec: Partial<SubscriptionSpecInput> = {}, d: PolicyDefaults = defaults) => resolvePolicy(subscriptionSpecSchema.parse({ url: URL_, ...spec }), d);

describe("resolvePolicy: operator defaults", () => {
  it("a minimal spec takes timeout and breaker thresholds from the environment, the rest from the schema", () => {
    expect(resolve()).toEqual({
      url: URL_,
      eventTypes: undefined,
      secretRef: undefined,
      scheme: "StandardWebhooks",
      signedContent: "TimestampAndBody",
      headers: {},
      timeoutMs: 7_000,
      retry: { maxAttempts: 6, initialBackoffMs: 1_000, multiplier: 2, maxBackoffMs: 30_000, jitterPercent: 10, respectRetryAfter: true },
      breaker: { failureThreshold: 9, successThreshold: 3, cooldownMs: 45_000, whenOpen: "Defer" },
      maxInFlight: 10,
      rateLimit: undefined,
      deadLetter: { maxEntries: 10_000, maxReplays: 5 },
      retention: { succeededMs: 3_600_000, deadLetteredMs: 720 * 3_600_000 },
      paused: false,
      headersFrom: [],
      tls: undefined,
      oauth2: undefined,
      proxyUrl: undefined,
    });
  });

  it("values in the spec win over the environment", () => {
    const p = resolve({ timeout: "2500ms", circuitBreaker: { failureThreshold: 2, successThreshold: 4, cooldown: "90s", whenOpen: "DeadLetter" } });
    expect(p.timeoutMs).toBe(2_500);
    expect(p.breaker).toEqual({ failureThreshold: 2, successThreshold: 4, cooldownMs: 90_000, whenOpen: "DeadLetter" });
  });

  it.each<[string, SubscriptionSpecInput["circuitBreaker"], { failureThreshold: number; successThreshold: number; cooldownMs: number }]>([
    ["only failureThreshold", { failureThreshold: 1 }, { failureThreshold: 1, successThreshold: 3, cooldownMs: 45_000 }],
    ["only successThreshold", { successThreshold: 20 }, { failureThreshold: 9, successThreshold: 20, cooldownMs: 45_000 }],
    ["only cooldown", { cooldown: "1s" }, { failureThreshold: 9, successThreshold: 3, cooldownMs: 1_000 }],
    ["only whenOpen", { whenOpen: "DeadLetter" }, { failureThreshold: 9, successThreshold: 3, cooldownMs: 45_000 }],
  ])("a breaker with %s fills the others from the environment, field by field", (_name, circuitBreaker, expected) => {
    expect(resolve({ circuitBreaker }).breaker).toMatchObject(expected);
  });

  it("the defaults are read per call, not cached", () => {
    const other: PolicyDefaults = { deliveryTimeoutMs: 100, breaker: { failureThreshold: 1, successThreshold: 1, cooldownMs: 1_000 } };
    expect(resolve({}, other).timeoutMs).toBe(100);
    expect(resolve({}, other).breaker.cooldownMs).toBe(1_000);
    expect(resolve().timeoutMs).toBe(7_000);
  });
});

describe("resolvePolicy: durations", () => {
  it.each([
    ["timeout", { timeout: "1.5s" }, (p: ReturnType<typeof resolve>) => p.timeoutMs, 1_500],
    ["initialBackoff", { retry: { initialBackoff: "250ms" } }, (p: ReturnType<typeof resolve>) => p.retry.initialBackoffMs, 250],
    ["maxBackoff", { retry: { maxBackoff: "1h30m" } }, (p: ReturnType<typeof resolve>) => p.retry.maxBackoffMs, 5_400_000],
    ["cooldown", { circuitBreaker: { cooldown: "2m" } }, (p: ReturnType<typeof resolve>) => p.breaker.cooldownMs, 120_000],
    ["retention.succeeded", { retention: { succeeded: "0s" } }, (p: ReturnType<typeof resolve>) => p.retention.succeededMs, 0],
    ["retention.deadLettered", { retention: { deadLettered: "24h" } }, (p: ReturnType<typeof resolve>) => p.retention.deadLetteredMs, 86_400_000],
  ] as Array<[string, Partial<SubscriptionSpecInput>, (p: ReturnType<typeof resolve>) => number, number]>)("%s is parsed to ms", (_name, spec, pick, ms) => {
    expect(pick(resolve(spec))).toBe(ms);
  });
});

describe("resolvePolicy: what HMACSHA256Hex signs", () => {
  it.each<[string, SubscriptionSpecInput["signature"], string]>([
    ["omitted: the timestamped form", { scheme: "HMACSHA256Hex" }, "TimestampAndBody"],
    ["TimestampAndBody", { scheme: "HMACSHA256Hex", signedContent: "TimestampAndBody" }, "TimestampAndBody"],
    ["LegacyBodyOnly", { scheme: "HMACSHA256Hex", signedContent: "LegacyBodyOnly" }, "LegacyBodyOnly"],
  ])("signature.signedContent %s", (_name, signature, expected) => {
    expect(resolve({ signature }).signedContent).toBe(expected);
  });
});

describe("resolvePolicy: the rest of the spec", () => {
  it.each([
    [{ perSecond: 50, burst: 100 }, { perSecond: 50, burst: 100 }],
    [{ perSecond: 50 }, { perSecond: 50, burst: 50 }],
    [{ perSecond: 1, burst: 1 }, { perSecond: 1, burst: 1 }],
  ])("rateLimit %j -> %j (burst defaults to perSecond)", (rateLimit, expected) => {
    expect(resolve({ rateLimit }).rateLimit).toEqual(expected);
  });

  it("secretRef: key defaults to secret, previousKey only when set", () => {
    expect(resolve({ secretRef: { name: "acme-signing" } }).secretRef).toEqual({ name: "acme-signing", key: "secret", scheme: "StandardWebhooks" });
    expect(resolve({ secretRef: { name: "acme-signing" } }).secretRef).not.toHaveProperty("previousKey");
    expect(resolve({ secretRef: { name: "s", key: "current", previousKey: "previous" } }).secretRef).toEqual({ name: "s", key: "current", previousKey: "previous", scheme: "StandardWebhooks" });
    expect(resolve({ secretRef: { name: "s" }, signature: { scheme: "HMACSHA256Hex" } }).secretRef).toMatchObject({ scheme: "HMACSHA256Hex" });
  });

  it("copies eventTypes, headers, scheme, maxInFlight, deadLetter and paused", () => {
    const p = resolve({
      eventTypes: ["order.*"],
      headers: { "X-Tenant": "acme" },
      signature: { scheme: "HMACSHA256Hex" },
      maxInFlight: 3,
      deadLetter: { maxEntries: 7, maxReplays: 0 },
      paused: true,
    });
    expect(p).toMatchObject({ eventTypes: ["order.*"], headers: { "X-Tenant": "acme" }, scheme: "HMACSHA256Hex", maxInFlight: 3, deadLetter: { maxEntries: 7, maxReplays: 0 }, paused: true });
  });

  it("retry fields are carried over as given", () => {
    expect(resolve({ retry: { maxAttempts: 50, multiplier: 10, jitterPercent: 0, respectRetryAfter: false } }).retry).toEqual({
      maxAttempts: 50,
      initialBackoffMs: 1_000,
      multiplier: 10,
      maxBackoffMs: 30_000,
      jitterPercent: 0,
      respectRetryAfter: false,
    });
  });
});

describe("matchesEventType", () => {
  const table: Array<[readonly string[] | undefined, string, boolean]> = [
    [undefined, "order.paid", true],
    [[], "order.paid", true],
    [["*"], "order.paid", true],
    [["*"], "x", true],
    [["order.paid"], "order.paid", true],
    [["order.paid"], "order.Paid", false],
    [["order.paid"], "order.paid.v2", false],
    [["order.paid"], "order", false],
    [["order.paid.v2"], "order.paid", false],
    [["order.*"], "order.paid", true],
    [["order.*"], "order.paid.v2", true],
    [["order.*"], "order", false],
    [["order.*"], "orders.paid", false],
    [["order.*"], "preorder.paid", false],
    [["order.*"], "invoice.order.paid", false],
    [["order.paid.*"], "order.paid.v2", true],
    [["order.paid.*"], "order.paid", false],
    [["order.paid.*"], "order.refunded.v2", false],
    [["invoice.paid", "order.*"], "order.refunded", true],
    [["invoice.paid", "order.paid"], "order.refunded", false],
    [["invoice.*", "*"], "anything", true],
  ];
  it.each(table)("%j matches %s: %s", (eventTypes, eventType, expected) => {
    expect(matchesEventType(eventTypes, eventType)).toBe(expected);
  });
});

describe("resolvePolicy: receiver credentials", () => {
  it("carries headersFrom, tls, oauth2 (with its defaults) and the proxy url", () => {
    const p = resolve({
      headersFrom: [{ name: "X-Api-Key", secretKeyRef: { name: "tenant", key: "api-key" } }],
      tls: { clientCertificateSecretRef: { name: "client-cert" }, caBundleSecretRef: { name: "ca" } },
      oauth2: { tokenURL: "https://auth.example/token", clientIdSecretRef: { name: "oauth", key: "id" }, clientSecretSecretRef: { name: "oauth", key: "secret" }, scopes: ["a", "b"] },
      proxy: { url: "http://proxy.infra:3128" },
    });
    expect(p.headersFrom).toEqual([{ name: "X-Api-Key", secretKeyRef: { name: "tenant", key: "api-key" } }]);
    expect(p.tls).toEqual({ clientCertificateSecretRef: { name: "client-cert" }, caBundleSecretRef: { name: "ca", key: "ca.crt" } });
    expect(p.oauth2).toEqual({
      tokenURL: "https://auth.example/token",
      clientIdSecretRef: { name: "oauth", key: "id" },
      clientSecretSecretRef: { name: "oauth", key: "secret" },
      scopes: ["a", "b"],
      audience: undefined,
      clientAuthentication: "ClientSecretBasic",
    });
    expect(p.proxyUrl).toBe("http://proxy.infra:3128");
  });

  it("a CA bundle alone, without a client certificate", () => {
    expect(resolve({ tls: { caBundleSecretRef: { name: "ca", key: "bundle.pem" } } }).tls).toEqual({ caBundleSecretRef: { name: "ca", key: "bundle.pem" } });
  });
});
