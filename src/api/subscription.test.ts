// The operator's own check of spec.headers (zod), the same rules as the CRD's CEL: it refuses
// what an older, laxer CRD let through, with a message naming the header.
import { describe, expect, it } from "vitest";
import { headersSchema, subscriptionSpecSchema } from "./subscription.js";

const issues = (headers: Record<string, string>) => {
  const r = headersSchema.safeParse(headers);
  return r.success ? [] : r.error.issues.map((i) => i.message);
};

describe("headersSchema", () => {
  it.each([
    ["Connection", "close", 'header "Connection" may not be set: it controls the connection'],
    ["Expect", "100-continue", 'header "Expect" may not be set: it controls the connection'],
    ["TE", "trailers", 'header "TE" may not be set'],
    ["Proxy-Authorization", "Basic eA==", 'header "Proxy-Authorization" may not be set'],
    ["Host", "evil.example", 'header "Host" may not be set'],
    ["webhook-signature", "v1,forged", 'header "webhook-signature" may not be set: Hookline sets it'],
    ["X-Tenant", "a\u0007b", 'header "X-Tenant": its value has a character other than tab and printable ASCII'],
    ["X-Tenant", "a\r\nX-Injected: 1", 'header "X-Tenant": its value has a character other than tab and printable ASCII'],
    ["X-Tenant", "Zoë", 'header "X-Tenant": its value has a character other than tab and printable ASCII'],
    ["X-Tenant", "\u0100", 'header "X-Tenant": its value has a character other than tab and printable ASCII'],
  ])("refuses %s: %j, naming it", (name, value, message) => {
    const got = issues({ "X-Ok": "fine", [name]: value });
    expect(got).toHaveLength(1);
    expect(got[0]).toContain(message);
  });

  it("accepts ordinary headers, including names that only contain refused words", () => {
    expect(issues({ "X-Tenant": "acme-42", Authorization: "Bearer a.b~c", "X-Connection-Id": "c1", "X-Proxy-Hint": "none", "X-Tab": "a\tb ~" })).toEqual([]);
  });
});

describe("signature", () => {
  const parse = (signature: unknown) => subscriptionSpecSchema.safeParse({ url: "https://hooks.example.com/", signature });

  it.each([
    [{ scheme: "HMACSHA256Hex" }, { scheme: "HMACSHA256Hex", signedContent: "TimestampAndBody" }],
    [{ scheme: "HMACSHA256Hex", signedContent: "LegacyBodyOnly" }, { scheme: "HMACSHA256Hex", signedContent: "LegacyBodyOnly" }],
    [{ scheme: "StandardWebhooks", signedContent: "TimestampAndBody" }, { scheme: "StandardWebhooks", signedContent: "TimestampAndBody" }],
    [{}, { scheme: "StandardWebhooks", signedContent: "TimestampAndBody" }],
    [undefined, { scheme: "StandardWebhooks", signedContent: "TimestampAndBody" }],
  ])("accepts %j", (input, expected) => {
    const r = parse(input);
    expect(r.success).toBe(true);
    expect(r.data?.signature).toEqual(expected);
  });

  it.each([
    [{ scheme: "StandardWebhooks", signedContent: "LegacyBodyOnly" }, "signedContent LegacyBodyOnly applies to scheme HMACSHA256Hex only"],
    [{ signedContent: "LegacyBodyOnly" }, "signedContent LegacyBodyOnly applies to scheme HMACSHA256Hex only"],
    [{ scheme: "HMACSHA256Hex", signedContent: "Body" }, "Invalid option"],
  ])("refuses %j, naming signedContent", (input, message) => {
    const r = parse(input);
    expect(r.success).toBe(false);
    expect(r.error!.issues[0]!.path).toEqual(["signature", "signedContent"]);
    expect(r.error!.issues[0]!.message).toContain(message);
  });
});

describe("secretRef keys", () => {
  const parse = (secretRef: unknown) => subscriptionSpecSchema.safeParse({ url: "https://hooks.example.com/", secretRef });

  it.each([
    [{ name: "acme-signing", key: "signing/current" }, "secretRef.key"],
    [{ name: "acme-signing", key: "" }, "secretRef.key"],
    [{ name: "acme-signing", key: "k".repeat(254) }, "secretRef.key"],
    [{ name: "acme-signing", previousKey: "clé" }, "secretRef.previousKey"],
    [{ name: "acme-signing", previousKey: "a b" }, "secretRef.previousKey"],
  ])("refuses %j (it can never be a Secret's key), naming %s: an object an older CRD let through", (secretRef, field) => {
    const r = parse(secretRef);
    expect(r.success).toBe(false);
    expect(new Set(r.error!.issues.map((i) => i.path.join(".")))).toEqual(new Set([field]));
  });

  it("accepts the longest key and every character a Secret key may have; the key defaults to secret", () => {
    const longest = "k".repeat(253);
    expect(parse({ name: "s", key: longest, previousKey: "a-b_c.D9" }).data!.secretRef).toEqual({ name: "s", key: longest, previousKey: "a-b_c.D9" });
    expect(parse({ name: "s" }).data!.secretRef).toEqual({ name: "s", key: "secret" });
  });
});
