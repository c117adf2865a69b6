// Webhook signatures on the wire: the Standard Webhooks scheme (with several signatures while a
// secret is rotated) and the plain HMACSHA256Hex scheme (timestamp and body signed, or the body
// alone as a named legacy option). Pure computation over node:crypto.

import { createHmac } from "node:crypto";
import { HEX_SIGNED_CONTENT } from "../../api/subscription.js";

export type SignatureScheme = "StandardWebhooks" | "HMACSHA256Hex";

const WHSEC_PREFIX = "whsec_";
const base64Re = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2,3})?$/;

/**
 * The key bytes of a secret value: a `whsec_<base64>` secret is its decoded bytes (surrounding
 * whitespace, such as the newline `kubectl create secret --from-file` keeps, is ignored), any
 * other value its UTF-8 bytes, exactly as given. Throws an Error on an empty key or a `whsec_`
 * value that is not base64: the subscription cannot sign, which the caller reports as not Ready.
 */
export function secretBytes(value: string): Buffer {
  if (value.startsWith(WHSEC_PREFIX)) {
    const encoded = value.slice(WHSEC_PREFIX.length).trim();
    if (!base64Re.test(encoded)) throw new Error("secret starts with whsec_ but the rest is not valid base64");
    const key = Buffer.from(encoded, "base64");
    if (key.length === 0) throw new Error("secret whsec_ value decodes to an empty key");
    return key;
  }
  if (value.length === 0) throw new Error("secret is empty");
  return Buffer.from(value, "utf8");
}

/** Why a StandardWebhooks secret cannot be used; thrown by {@link signingKey}. */
export class SecretNotVerifiableError extends Error {}

/**
 * The key bytes of a secret value for `scheme`. StandardWebhooks needs the `whsec_<base64>` form:
 * the Standard Webhooks libraries base64-decode every secret they are given, so any other value
 * would sign with bytes no library derives from it (docs/adr/0006). HMACSHA256Hex takes both.
 */
export function signingKey(value: string, scheme: SignatureScheme): Buffer {
  if (scheme === "StandardWebhooks" && !value.trim().startsWith(WHSEC_PREFIX)) {
    throw new SecretNotVerifiableError(
      `is not in the whsec_<base64> form the Standard Webhooks libraries read (they base64-decode every secret, so they would compute other signatures); store "whsec_" followed by the base64 of the same bytes (the signatures stay the same: printf %s "$OLD" | base64 -w0), or use signature.scheme HMACSHA256Hex`,
    );
  }
  return secretBytes(value);
}

export interface StandardWebhooksInput {
  /** The webhook id: the event id, the same on every attempt and replay. */
  id: string;
  /** Unix seconds of this attempt. */
  timestampSeconds: number;
  /** The exact bytes sent as the request body. */
  body: string | Buffer;
  /** Current secret first, then the previous one while a secret is rotated. */
  secrets: readonly Buffer[];
}

/**
 * The Standard Webhooks headers: `webhook-signature` holds `v1,<base64 HMAC-SHA256 of
 * "<id>.<timestamp>.<body>">` per secret, space-separated, in the order given (duplicates
 * dropped). Throws when no secret is given or the timestamp is not whole seconds.
 */
export function signStandardWebhooks(input: StandardWebhooksInput): Record<string, string> {
  const timestamp = timestampHeader(input.timestampSeconds);
  const keys = unique(input.secrets);
  if (keys.length === 0) throw new Error("signStandardWebhooks needs at least one secret");
  if (keys.some((key) => key.length === 0)) throw new Error("signStandardWebhooks got an empty secret");
  const signatures = keys.map((key) => {
    const mac = createHmac("sha256", key);
    mac.update(`${input.id}.${timestamp}.`, "utf8");
    mac.update(input.body);
    return `v1,${mac.digest("base64")}`;
  });
  return {
    "webhook-id": input.id,
    "webhook-timestamp": timestamp,
    "webhook-signature": signatures.join(" "),
  };
}

/**
 * What an HMACSHA256Hex signature covers (`spec.signature.signedContent`). TimestampAndBody, the
 * default, signs `<x-webhook-timestamp>.<body>`, so a receiver can refuse an old request without
 * trusting an unsigned header. LegacyBodyOnly signs the body alone (Hookline's earlier form), for
 * receivers not yet updated: a captured request then verifies forever (docs/adr/0008).
 */
export type HexSignedContent = (typeof HEX_SIGNED_CONTENT)[number];

export interface HmacSha256HexInput {
  id: string;
  /** Unix seconds of this attempt, sent as x-webhook-timestamp (and signed with TimestampAndBody). */
  timestampSeconds: number;
  /** The exact bytes sent as the request body. */
  body: string | Buffer;
  secret: Buffer;
  signedContent: HexSignedContent;
}

/**
 * The HMACSHA256Hex headers: `x-webhook-signature: sha256=<hex HMAC-SHA256 of
 * "<x-webhook-timestamp>.<body>">`, or of the body alone with LegacyBodyOnly. The id header is
 * informative either way (deduplicate on it; it is not signed). Throws on an empty secret, a
 * timestamp that is not whole seconds, or an unknown signedContent.
 */
export function signHmacSha256Hex(input: HmacSha256HexInput): Record<string, string> {
  const timestamp = timestampHeader(input.timestampSeconds);
  if (input.secret.length === 0) throw new Error("signHmacSha256Hex needs a non-empty secret");
  if (!(HEX_SIGNED_CONTENT as readonly string[]).includes(input.signedContent)) throw new Error(`signHmacSha256Hex: unknown signedContent ${JSON.stringify(input.signedContent)}`);
  const mac = createHmac("sha256", input.secret);
  if (input.signedContent === "TimestampAndBody") mac.update(`${timestamp}.`, "utf8");
  mac.update(input.body);
  return {
    "x-webhook-id": input.id,
    "x-webhook-timestamp": timestamp,
    "x-webhook-signature": `sha256=${mac.digest("hex")}`,
  };
}

function timestampHeader(seconds: number): string {
  if (!Number.isSafeInteger(seconds) || seconds < 0) {
    throw new Error(`webhook timestamp must be whole unix seconds, got ${seconds}`);
  }
  return String(seconds);
}

function unique(keys: readonly Buffer[]): Buffer[] {
  const out: Buffer[] = [];
  for (const key of keys) if (!out.some((k) => k.equals(key))) out.push(key);
  return out;
}
