import { createHmac } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { describe, it, expect } from "vitest";
import { SecretNotVerifiableError, secretBytes, signHmacSha256Hex, signStandardWebhooks, signingKey } from "./signing.js";

// The example secret from the Standard Webhooks specification's test vectors.
const WHSEC = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const body = JSON.stringify({ id: "evt-1001", type: "order.paid", timestamp: "2025-06-15T12:00:00Z", data: { order: 1001, note: "café ☕" } });
const nowSeconds = () => Math.floor(Date.now() / 1000); // the library checks a ±5 min tolerance against the wall clock

/** What a receiver configures: the same secret, re-encoded the way every Standard Webhooks library takes it. */
const asWhsec = (key: Buffer) => `whsec_${key.toString("base64")}`;

describe("secretBytes", () => {
  const table: Array<[string, string, Buffer]> = [
    ["whsec_ is decoded", WHSEC, Buffer.from("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "base64")],
    ["whsec_ with a trailing newline", `${WHSEC}\n`, Buffer.from("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "base64")],
    ["whsec_ with padding", "whsec_aGVsbG8=", Buffer.from("hello")],
    ["whsec_ without padding", "whsec_aGVsbG8", Buffer.from("hello")],
    ["plain value is UTF-8", "s3cr3t", Buffer.from("s3cr3t", "utf8")],
    ["plain value keeps whitespace", "s3cr3t\n", Buffer.from("s3cr3t\n", "utf8")],
    ["non-ASCII is UTF-8", "clé", Buffer.from([0x63, 0x6c, 0xc3, 0xa9])],
    ["a prefix that is not whsec_ is plain", "WHSEC_aGVsbG8=", Buffer.from("WHSEC_aGVsbG8=", "utf8")],
  ];

  it.each(table)("%s", (_name, value, expected) => {
    expect(secretBytes(value).equals(expected)).toBe(true);
  });

  it.each([
    ["", /empty/],
    ["whsec_", /empty key/],
    ["whsec_not base64!", /not valid base64/],
    ["whsec_a", /not valid base64/],
    ["whsec_aGVs*G8=", /not valid base64/],
  ])("refuses %j", (value, message) => {
    expect(() => secretBytes(value)).toThrow(message);
  });
});

describe("signStandardWebhooks", () => {
  it("matches the Standard Webhooks specification's test vector", () => {
    const headers = signStandardWebhooks({ id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestampSeconds: 1614265330, body: '{"test": 2432232314}', secrets: [secretBytes(WHSEC)] });
    expect(headers).toEqual({
      "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
      "webhook-timestamp": "1614265330",
      "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    });
  });

  const cases: Array<[string, string | Buffer]> = [
    ["a JSON string body", body],
    ["a Buffer body", Buffer.from(body, "utf8")],
    ["an empty body", ""],
  ];

  it.each(cases)("a whsec_ secret verifies with the standardwebhooks library (%s)", (_name, payload) => {
    const ts = nowSeconds();
    const headers = signStandardWebhooks({ id: "evt-1001", timestampSeconds: ts, body: payload, secrets: [secretBytes(WHSEC)] });
    expect(Object.keys(headers).sort()).toEqual(["webhook-id", "webhook-signature", "webhook-timestamp"]);
    expect(headers["webhook-timestamp"]).toBe(String(ts));
    expect(headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(() => new Webhook(WHSEC).verify(payload, headers)).not.toThrow();
  });

  it("while rotating, each of the two secrets verifies on its own, current first", () => {
    const current = secretBytes("new-plain-secret");
    const previous = secretBytes("whsec_c2VjcmV0LW9sZC0xMjM0NTY3ODkw");
    const headers = signStandardWebhooks({ id: "evt-1001", timestampSeconds: nowSeconds(), body, secrets: [current, previous] });
    const signatures = headers["webhook-signature"]!.split(" ");
    expect(signatures).toHaveLength(2);
    for (const key of [current, previous]) {
      expect(() => new Webhook(asWhsec(key)).verify(body, headers)).not.toThrow();
      expect(() => new Webhook(key, { format: "raw" }).verify(body, headers)).not.toThrow();
    }
    const [first] = signatures;
    const onlyFirst = { ...headers, "webhook-signature": first! };
    expect(() => new Webhook(asWhsec(current)).verify(body, onlyFirst)).not.toThrow();
    expect(() => new Webhook(asWhsec(previous)).verify(body, onlyFirst)).toThrow(/No matching signature/);
  });

  it("duplicate secrets give one signature", () => {
    const key = secretBytes(WHSEC);
    const headers = signStandardWebhooks({ id: "x", timestampSeconds: 1, body, secrets: [key, Buffer.from(key)] });
    expect(headers["webhook-signature"]!.split(" ")).toHaveLength(1);
  });

  const tampered: Array<[string, (h: Record<string, string>) => [string, Record<string, string>]]> = [
    ["a changed body", (h) => [body.replace("1001", "1002"), h]],
    ["a changed id", (h) => [body, { ...h, "webhook-id": "evt-1002" }]],
    ["a changed timestamp", (h) => [body, { ...h, "webhook-timestamp": String(Number(h["webhook-timestamp"]) - 1) }]],
  ];

  it.each(tampered)("the library rejects %s", (_name, tamper) => {
    const headers = signStandardWebhooks({ id: "evt-1001", timestampSeconds: nowSeconds(), body, secrets: [secretBytes(WHSEC)] });
    const [payload, changed] = tamper(headers);
    expect(() => new Webhook(WHSEC).verify(payload, changed)).toThrow(/No matching signature/);
  });

  it("the library rejects a signature made with another secret", () => {
    const headers = signStandardWebhooks({ id: "evt-1001", timestampSeconds: nowSeconds(), body, secrets: [secretBytes("other")] });
    expect(() => new Webhook(WHSEC).verify(body, headers)).toThrow(/No matching signature/);
  });

  it.each([
    ["no secrets", { secrets: [] as Buffer[] }, /at least one secret/],
    ["an empty secret", { secrets: [Buffer.alloc(0)] }, /empty secret/],
    ["fractional seconds", { timestampSeconds: 1.5 }, /whole unix seconds/],
    ["negative seconds", { timestampSeconds: -1 }, /whole unix seconds/],
  ])("refuses %s", (_name, override, message) => {
    expect(() => signStandardWebhooks({ id: "x", timestampSeconds: 1, body, secrets: [Buffer.from("k")], ...override })).toThrow(message);
  });
});

describe("signHmacSha256Hex", () => {
  const table: Array<[string, string | Buffer, Buffer]> = [
    ["JSON body, UTF-8 secret", body, secretBytes("s3cr3t")],
    ["Buffer body, whsec_ secret", Buffer.from(body), secretBytes(WHSEC)],
    ["empty body", "", Buffer.from("k")],
  ];

  it.each(table)("%s: by default sha256=<hex HMAC of \"<timestamp>.<body>\">", (_name, payload, secret) => {
    const headers = signHmacSha256Hex({ id: "evt-1001", timestampSeconds: 1_750_000_000, body: payload, secret, signedContent: "TimestampAndBody" });
    const expected = createHmac("sha256", secret).update(Buffer.concat([Buffer.from("1750000000."), Buffer.from(payload)])).digest("hex");
    expect(headers).toEqual({
      "x-webhook-id": "evt-1001",
      "x-webhook-timestamp": "1750000000",
      "x-webhook-signature": `sha256=${expected}`,
    });
    expect(headers["x-webhook-signature"]).toMatch(/^sha256=[0-9a-f]{64}$/);
  });

  it.each(table)("%s: LegacyBodyOnly is sha256=<hex HMAC of the body only>", (_name, payload, secret) => {
    const headers = signHmacSha256Hex({ id: "evt-1001", timestampSeconds: 1_750_000_000, body: payload, secret, signedContent: "LegacyBodyOnly" });
    expect(headers["x-webhook-signature"]).toBe(`sha256=${createHmac("sha256", secret).update(payload).digest("hex")}`);
    expect(headers["x-webhook-timestamp"]).toBe("1750000000");
  });

  it("matches known HMAC-SHA256 vectors: RFC 4231 case 2 (body only), and the same key and text with the timestamp prefix (computed with Python's hmac)", () => {
    const text = "what do ya want for nothing?";
    const legacy = signHmacSha256Hex({ id: "i", timestampSeconds: 0, body: text, secret: Buffer.from("Jefe"), signedContent: "LegacyBodyOnly" });
    expect(legacy["x-webhook-signature"]).toBe("sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    // python3 -c 'import hmac,hashlib; print(hmac.new(b"Jefe", b"1750000000.what do ya want for nothing?", hashlib.sha256).hexdigest())'
    const stamped = signHmacSha256Hex({ id: "i", timestampSeconds: 1_750_000_000, body: text, secret: Buffer.from("Jefe"), signedContent: "TimestampAndBody" });
    expect(stamped["x-webhook-signature"]).toBe("sha256=506036c2a6cd0a56bfbc53812d4606af2739d4d00afe61b4372e8506441ac008");
  });

  it("TimestampAndBody: a different timestamp gives a different signature; the id is not signed", () => {
    const secret = Buffer.from("k");
    const at = (id: string, ts: number) => signHmacSha256Hex({ id, timestampSeconds: ts, body, secret, signedContent: "TimestampAndBody" })["x-webhook-signature"];
    expect(at("a", 1)).not.toBe(at("a", 2));
    expect(at("a", 1)).toBe(at("b", 1));
  });

  it("LegacyBodyOnly: the signature depends on neither id nor timestamp", () => {
    const secret = Buffer.from("k");
    const a = signHmacSha256Hex({ id: "a", timestampSeconds: 1, body, secret, signedContent: "LegacyBodyOnly" });
    const b = signHmacSha256Hex({ id: "b", timestampSeconds: 2, body, secret, signedContent: "LegacyBodyOnly" });
    expect(a["x-webhook-signature"]).toBe(b["x-webhook-signature"]);
  });

  it.each([
    ["an empty secret", { secret: Buffer.alloc(0) }, /non-empty secret/],
    ["fractional seconds", { timestampSeconds: 1.5 }, /whole unix seconds/],
    ["negative seconds", { timestampSeconds: -1 }, /whole unix seconds/],
    ["an unknown signedContent", { signedContent: "Body" as "LegacyBodyOnly" }, /unknown signedContent "Body"/],
  ])("refuses %s", (_name, override, message) => {
    expect(() => signHmacSha256Hex({ id: "a", timestampSeconds: 1, body, secret: Buffer.from("k"), signedContent: "TimestampAndBody", ...override })).toThrow(message);
  });
});

describe("signingKey: which secret values a scheme can sign with", () => {
  it("StandardWebhooks takes only whsec_<base64> (the libraries base64-decode every secret)", () => {
    expect(signingKey("whsec_aGVsbG8=", "StandardWebhooks")).toEqual(Buffer.from("hello"));
    expect(() => signingKey("hello", "StandardWebhooks")).toThrow(SecretNotVerifiableError);
    expect(() => signingKey("aGVsbG8=", "StandardWebhooks")).toThrow(/whsec_<base64>/);
  });
  it("the message names the fix and never the value", () => {
    let message = "";
    try {
      signingKey("my-plain-secret", "StandardWebhooks");
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain("HMACSHA256Hex");
    expect(message).not.toContain("my-plain-secret");
  });
  it("HMACSHA256Hex takes a plain value as its UTF-8 bytes, and whsec_ decoded", () => {
    expect(signingKey("hello", "HMACSHA256Hex")).toEqual(Buffer.from("hello"));
    expect(signingKey("whsec_aGVsbG8=", "HMACSHA256Hex")).toEqual(Buffer.from("hello"));
  });
});
