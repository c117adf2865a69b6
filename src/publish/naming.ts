// Names and labels of the deliveries a publish creates. A delivery's name is the producer's
// idempotency key, so it is a pure function of (event id, subscription):
// the same event published twice maps to the same names, and two different pairs never share
// one. The readable form `<event id>.<subscription>` is used when the id already is a valid
// lowercase name without dots; a dot (not a dash) joins them because "evt-1" + "b-acme" and
// "evt-1-b" + "acme" would otherwise both read "evt-1-b-acme". Anything else gets a sanitized,
// truncated, dot-free form ending in a hash of both inputs, so it cannot equal a readable one.
import { createHash } from "node:crypto";

/** Longest Kubernetes object name (a DNS-1123 subdomain). */
export const MAX_NAME_LENGTH = 253;
/** Longest label value. */
export const MAX_LABEL_LENGTH = 63;
/** Hex digits of SHA-256 kept in hashed names and label values (48 bits). */
export const HASH_LENGTH = 12;

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_VALUE = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const HASHED_LABEL = new RegExp(`_[0-9a-f]{${HASH_LENGTH}}$`);

const ID_PART_MAX = 100;
const SUBSCRIPTION_PART_MAX = MAX_NAME_LENGTH - ID_PART_MAX - HASH_LENGTH - 2;

function hash(...parts: string[]): string {
  return createHash("sha256").update(JSON.stringify(parts)).digest("hex").slice(0, HASH_LENGTH);
}

/** Lowercase alphanumerics and single dashes, at most `max` characters, no dash at either end. */
function sanitize(text: string, max: number, fallback: string): string {
  const clean = text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+/, "")
    .slice(0, max)
    .replace(/-+$/, "");
  return clean || fallback;
}

/** Whether `name` is a valid Kubernetes object name (DNS-1123 subdomain). */
export function isObjectName(name: string): boolean {
  return name.length <= MAX_NAME_LENGTH && DNS_SUBDOMAIN.test(name);
}

/** The name of the delivery of event `eventId` to `subscription`: stable, valid and collision-free. */
export function deliveryName(eventId: string, subscription: string): string {
  const readable = `${eventId}.${subscription}`;
  if (DNS_LABEL.test(eventId) && isObjectName(subscription) && readable.length <= MAX_NAME_LENGTH) return readable;
  return `${sanitize(eventId, ID_PART_MAX, "event")}-${sanitize(subscription, SUBSCRIPTION_PART_MAX, "subscription")}-${hash(eventId, subscription)}`;
}

/**
 * A label value standing for `value`: itself when it is a valid label value, else a sanitized
 * prefix plus `_<hash>`. A valid value that happens to end like a hashed one is hashed too, so
 * two different values never share a label value.
 */
export function labelValue(value: string): string {
  if (value.length <= MAX_LABEL_LENGTH && LABEL_VALUE.test(value) && !HASHED_LABEL.test(value)) return value;
  const prefix =
    value
      .replace(/[^A-Za-z0-9_.-]+/g, "-")
      .replace(/^[^A-Za-z0-9]+/, "")
      .slice(0, MAX_LABEL_LENGTH - HASH_LENGTH - 1)
      .replace(/[^A-Za-z0-9]+$/, "") || "h";
  return `${prefix}_${hash(value)}`;
}
