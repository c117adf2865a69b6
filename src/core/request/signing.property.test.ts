// Properties of Standard Webhooks signing, checked with the reference `standardwebhooks` library:
// any id, any timestamp, any UTF-8 body (astral-plane characters included) and both secret
// forms verify; while rotating, each of the two keys verifies on its own. A `whsec_<base64>`
// secret is its decoded bytes; any other value is its UTF-8 bytes as given (secretBytes), which a
// receiver configures as whsec_<base64 of those bytes> or as a raw key. HMACSHA256Hex (below) is
// checked against a hand-written receiver: timestamp and body signed, tolerance enforced.
import { createHmac, timingSafeEqual } from "node:crypto";
import fc from "fast-check";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it, vi } from "vitest";
import { secretBytes, signHmacSha256Hex, signStandardWebhooks } from "./signing.js";

// The library checks the timestamp against the wall clock (±5 min): verify with the clock set to
// the signed timestamp, so any timestamp can be checked.
afterEach(() => {
  vi.useRealTimers();
});

const idArb = fc.oneof(fc.string({ minLength: 1, maxLength: 64 }), fc.string({ unit: "binary", minLength: 1, maxLength: 32 }), fc.uuid());
// Whole seconds from 1970 to year 9999 (Date's range is larger; the headers carry decimal seconds).
const timestampArb = fc.oneof(fc.integer({ min: 0, max: 253_402_300_799 }), fc.integer({ min: 1_600_000_000, max: 2_000_000_000 }));
const bodyArb = fc.oneof(
  fc.string({ unit: "binary", maxLength: 300 }), // any code point, astral plane included
  fc.string({ unit: fc.constantFrom("😀", "𝄞", "漢", "é", "\u0000", "\n", "\"", "a"), maxLength: 50 }),
  fc.json(),
);
const keyBytesArb = fc.uint8Array({ minLength: 1, maxLength: 64 }).map((a) => Buffer.from(a));
/** A secret as a user stores it, and the key bytes it means. */
const secretArb = fc.oneof(
  keyBytesArb.map((key) => ({ value: `whsec_${key.toString("base64")}`, key })),
  fc
    .string({ unit: "binary", minLength: 1, maxLength: 40 })
    .filter((s) => !s.startsWith("whsec_"))
    .map((value) => ({ value, key: Buffer.from(value, "utf8") })),
);

function verifies(key: Buffer, body: string, headers: Record<string, string>): void {
  // The two ways a receiver configures a key: whsec_<base64> and raw bytes.
  new Webhook(`whsec_${key.toString("base64")}`).verify(body, headers, { jsonParse: false });
  new Webhook(key, { format: "raw" }).verify(body, headers, { jsonParse: false });
}

describe("signStandardWebhooks (properties)", () => {
  it("verifies with the standardwebhooks library for any id, timestamp, UTF-8 body and secret form", () => {
    fc.assert(
      fc.property(idArb, timestampArb, bodyArb, secretArb, fc.boolean(), (id, ts, body, secret, asBuffer) => {
        const key = secretBytes(secret.value);
        expect(key.equals(secret.key)).toBe(true);
        const headers = signStandardWebhooks({ id, timestampSeconds: ts, body: asBuffer ? Buffer.from(body, "utf8") : body, secrets: [key] });
        vi.setSystemTime(ts * 1000);
        expect(() => verifies(key, body, headers)).not.toThrow();
      }),
      { numRuns: 120 },
    );
  });

  it("while rotating, two keys give two signatures, each verifying with its own key alone", () => {
    fc.assert(
      fc.property(idArb, timestampArb, bodyArb, secretArb, secretArb, (id, ts, body, current, previous) => {
        const [a, b] = [secretBytes(current.value), secretBytes(previous.value)];
        fc.pre(!a.equals(b));
        const headers = signStandardWebhooks({ id, timestampSeconds: ts, body, secrets: [a, b] });
        const signatures = headers["webhook-signature"]!.split(" ");
        expect(signatures).toHaveLength(2);
        vi.setSystemTime(ts * 1000);
        expect(() => verifies(a, body, headers)).not.toThrow();
        expect(() => verifies(b, body, headers)).not.toThrow();
        // Each signature on its own belongs to its key, current first.
        expect(() => verifies(a, body, { ...headers, "webhook-signature": signatures[0]! })).not.toThrow();
        expect(() => verifies(b, body, { ...headers, "webhook-signature": signatures[1]! })).not.toThrow();
        expect(() => verifies(a, body, { ...headers, "webhook-signature": signatures[1]! })).toThrow(/No matching signature/);
      }),
      { numRuns: 100 },
    );
  });

  it("a whsec_ secret means the same key with or without base64 padding and with surrounding whitespace", () => {
    fc.assert(
      fc.property(keyBytesArb, fc.constantFrom("", "\n", " \n"), (key, ws) => {
        const padded = key.toString("base64");
        expect(secretBytes(`whsec_${padded}${ws}`).equals(key)).toBe(true);
        expect(secretBytes(`whsec_${padded.replace(/=+$/, "")}`).equals(key)).toBe(true);
      }),
    );
  });

  it("a changed body, id or timestamp does not verify", () => {
    fc.assert(
      fc.property(idArb, timestampArb, bodyArb, secretArb, fc.constantFrom("body", "id", "timestamp"), (id, ts, body, secret, what) => {
        const key = secretBytes(secret.value);
        const headers = signStandardWebhooks({ id, timestampSeconds: ts, body, secrets: [key] });
        vi.setSystemTime(ts * 1000);
        const changed =
          what === "body" ? [`${body} `, headers]
          : what === "id" ? [body, { ...headers, "webhook-id": `${id}x` }]
          : [body, { ...headers, "webhook-timestamp": String(ts + 1) }];
        expect(() => verifies(key, changed[0] as string, changed[1] as Record<string, string>)).toThrow(/No matching signature/);
      }),
      { numRuns: 100 },
    );
  });
});

// HMACSHA256Hex, checked against a receiver written the way docs/receivers.md writes one: the
// HMAC of "<x-webhook-timestamp>.<raw body>" (or of the body alone for LegacyBodyOnly), compared
// in constant time, with the timestamp within a tolerance of the receiver's clock.
function receiverAccepts(key: Buffer, body: Buffer, headers: Record<string, string>, nowSeconds: number, legacy = false): boolean {
  const ts = headers["x-webhook-timestamp"] ?? "";
  if (!/^\d+$/.test(ts) || Math.abs(nowSeconds - Number(ts)) > 300) return false;
  const mac = createHmac("sha256", key);
  if (!legacy) mac.update(`${ts}.`);
  const expected = Buffer.from(`sha256=${mac.update(body).digest("hex")}`);
  const given = Buffer.from(headers["x-webhook-signature"] ?? "");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

describe("signHmacSha256Hex (properties)", () => {
  const secretKeyArb = secretArb.map((s) => secretBytes(s.value));
  const utf8 = (b: string) => Buffer.from(b, "utf8");

  it("TimestampAndBody verifies for any id, timestamp, body and secret, and only within the tolerance", () => {
    fc.assert(
      fc.property(idArb, timestampArb, bodyArb, secretKeyArb, fc.integer({ min: -1000, max: 1000 }), fc.boolean(), (id, ts, body, key, skew, asBuffer) => {
        const headers = signHmacSha256Hex({ id, timestampSeconds: ts, body: asBuffer ? utf8(body) : body, secret: key, signedContent: "TimestampAndBody" });
        expect(headers["x-webhook-timestamp"]).toBe(String(ts));
        expect(receiverAccepts(key, utf8(body), headers, ts + skew)).toBe(Math.abs(skew) <= 300);
        // A body-only receiver never accepts it: the two forms cannot be confused.
        expect(receiverAccepts(key, utf8(body), headers, ts, true)).toBe(false);
      }),
      { numRuns: 150 },
    );
  });

  it("TimestampAndBody: a changed timestamp, body or secret does not verify", () => {
    fc.assert(
      fc.property(idArb, timestampArb, bodyArb, secretKeyArb, fc.integer({ min: 1, max: 300 }), fc.constantFrom("timestamp", "body", "secret"), (id, ts, body, key, delta, what) => {
        const headers = signHmacSha256Hex({ id, timestampSeconds: ts, body, secret: key, signedContent: "TimestampAndBody" });
        if (what === "timestamp") expect(receiverAccepts(key, utf8(body), { ...headers, "x-webhook-timestamp": String(ts + delta) }, ts)).toBe(false);
        if (what === "body") expect(receiverAccepts(key, utf8(`${body} `), headers, ts)).toBe(false);
        // Another key: one bit flipped (appending a zero byte would not do: HMAC pads short keys with zeros).
        const other = Buffer.from(key);
        other[0]! ^= 1 << (delta % 8);
        if (what === "secret") expect(receiverAccepts(other, utf8(body), headers, ts)).toBe(false);
      }),
      { numRuns: 150 },
    );
  });

  it("TimestampAndBody: two different (timestamp, body) pairs never sign the same text (the first '.' splits it)", () => {
    fc.assert(
      fc.property(timestampArb, timestampArb, bodyArb, bodyArb, (t1, t2, b1, b2) => {
        fc.pre(t1 !== t2 || b1 !== b2);
        const key = Buffer.from("k");
        const s1 = signHmacSha256Hex({ id: "x", timestampSeconds: t1, body: b1, secret: key, signedContent: "TimestampAndBody" })["x-webhook-signature"];
        const s2 = signHmacSha256Hex({ id: "x", timestampSeconds: t2, body: b2, secret: key, signedContent: "TimestampAndBody" })["x-webhook-signature"];
        expect(s1).not.toBe(s2);
      }),
    );
  });

  it("LegacyBodyOnly is the HMAC of the body alone, the same at every timestamp and id", () => {
    fc.assert(
      fc.property(idArb, idArb, timestampArb, timestampArb, bodyArb, secretKeyArb, (id1, id2, t1, t2, body, key) => {
        const a = signHmacSha256Hex({ id: id1, timestampSeconds: t1, body, secret: key, signedContent: "LegacyBodyOnly" });
        const b = signHmacSha256Hex({ id: id2, timestampSeconds: t2, body, secret: key, signedContent: "LegacyBodyOnly" });
        expect(a["x-webhook-signature"]).toBe(b["x-webhook-signature"]);
        expect(receiverAccepts(key, utf8(body), a, t1, true)).toBe(true);
      }),
    );
  });
});
