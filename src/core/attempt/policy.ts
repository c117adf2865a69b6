// A subscription's spec resolved into numbers the engine uses: durations in ms, and the
// operator-wide defaults (WEBHOOK_DELIVERY_TIMEOUT_MS, WEBHOOK_CB_*) filled in where the spec
// leaves a field out.
import { parseDuration } from "../../api/duration.js";
import { retentionSchema, type SubscriptionSpec } from "../../api/subscription.js";
import { parseOrderingKey, type OrderingKey } from "../ordering-key.js";
import type { RetryPolicy } from "./retry.js";
import type { HexSignedContent, SignatureScheme } from "../request/signing.js";

export interface PolicyDefaults {
  deliveryTimeoutMs: number;
  breaker: { failureThreshold: number; successThreshold: number; cooldownMs: number };
}

export interface Policy {
  url: string;
  eventTypes: string[] | undefined;
  /** With the scheme, which decides which secret values can sign (core/request/signing.ts signingKey). */
  secretRef: { name: string; key: string; previousKey?: string; scheme: SignatureScheme } | undefined;
  /** None: unsigned by the user's choice (spec.signature.scheme); any other scheme needs secretRef. */
  scheme: SignatureScheme | "None";
  /** HMACSHA256Hex: what the signature covers (spec.signature.signedContent; default TimestampAndBody). */
  signedContent: HexSignedContent;
  headers: Record<string, string>;
  timeoutMs: number;
  retry: RetryPolicy;
  breaker: { failureThreshold: number; successThreshold: number; cooldownMs: number; whenOpen: "Defer" | "DeadLetter" };
  maxInFlight: number;
  /** spec.maxPending: active deliveries past it wait their turn (undefined: no cap). */
  maxPending: number | undefined;
  rateLimit: { perSecond: number; burst: number } | undefined;
  deadLetter: { maxEntries: number; maxReplays: number };
  retention: { succeededMs: number; deadLetteredMs: number };
  paused: boolean;
  /** Header values from Secrets (src/delivery/engine/credentials.ts reads them). */
  headersFrom: Array<{ name: string; secretKeyRef: SecretKeyRef }>;
  tls: { clientCertificateSecretRef?: { name: string }; caBundleSecretRef?: SecretKeyRef } | undefined;
  oauth2: OAuth2Policy | undefined;
  /** spec.proxy.url; undefined: the operator's HTTPS_PROXY/HTTP_PROXY/NO_PROXY decide. */
  proxyUrl: string | undefined;
  /** spec.ordering, its key parsed once; undefined: deliveries are not ordered. */
  ordering: { key: string; parsed: OrderingKey } | undefined;
  /** spec.filter: the CEL expression an event must satisfy at fan-out (core/filter.ts). */
  filter: string | undefined;
  /** spec.transform: the CEL expression that builds each attempt's body (core/transform.ts). */
  transform: string | undefined;
}

export interface SecretKeyRef {
  name: string;
  key: string;
}

export interface OAuth2Policy {
  tokenURL: string;
  clientIdSecretRef: SecretKeyRef;
  clientSecretSecretRef: SecretKeyRef;
  scopes: string[];
  audience: string | undefined;
  clientAuthentication: "ClientSecretBasic" | "ClientSecretPost";
}

/** Signed (any scheme but None) without a secretRef: nothing is sent until one is named or None chosen. */
export function secretRefMissing(policy: Policy): boolean {
  return !policy.secretRef && policy.scheme !== "None";
}

export function resolvePolicy(spec: SubscriptionSpec, defaults: PolicyDefaults): Policy {
  const cb = spec.circuitBreaker;
  return {
    url: spec.url,
    eventTypes: spec.eventTypes,
    secretRef: spec.secretRef && spec.signature.scheme !== "None" ? { name: spec.secretRef.name, key: spec.secretRef.key, ...(spec.secretRef.previousKey ? { previousKey: spec.secretRef.previousKey } : {}), scheme: spec.signature.scheme } : undefined,
    scheme: spec.signature.scheme,
    signedContent: spec.signature.signedContent,
    headers: spec.headers ?? {},
    timeoutMs: spec.timeout !== undefined ? parseDuration(spec.timeout) : defaults.deliveryTimeoutMs,
    retry: {
      maxAttempts: spec.retry.maxAttempts,
      initialBackoffMs: parseDuration(spec.retry.initialBackoff),
      multiplier: spec.retry.multiplier,
      maxBackoffMs: parseDuration(spec.retry.maxBackoff),
      jitterPercent: spec.retry.jitterPercent,
      respectRetryAfter: spec.retry.respectRetryAfter,
    },
    breaker: {
      failureThreshold: cb.failureThreshold ?? defaults.breaker.failureThreshold,
      successThreshold: cb.successThreshold ?? defaults.breaker.successThreshold,
      cooldownMs: cb.cooldown !== undefined ? parseDuration(cb.cooldown) : defaults.breaker.cooldownMs,
      whenOpen: cb.whenOpen,
    },
    maxInFlight: spec.maxInFlight,
    maxPending: spec.maxPending,
    rateLimit: spec.rateLimit ? { perSecond: spec.rateLimit.perSecond, burst: spec.rateLimit.burst ?? spec.rateLimit.perSecond } : undefined,
    deadLetter: { maxEntries: spec.deadLetter.maxEntries, maxReplays: spec.deadLetter.maxReplays },
    retention: retentionOf(spec.retention),
    paused: spec.paused,
    headersFrom: (spec.headersFrom ?? []).map((h) => ({ name: h.name, secretKeyRef: { name: h.secretKeyRef.name, key: h.secretKeyRef.key } })),
    tls: spec.tls
      ? {
          ...(spec.tls.clientCertificateSecretRef ? { clientCertificateSecretRef: { name: spec.tls.clientCertificateSecretRef.name } } : {}),
          ...(spec.tls.caBundleSecretRef ? { caBundleSecretRef: { name: spec.tls.caBundleSecretRef.name, key: spec.tls.caBundleSecretRef.key } } : {}),
        }
      : undefined,
    oauth2: spec.oauth2
      ? {
          tokenURL: spec.oauth2.tokenURL,
          clientIdSecretRef: { ...spec.oauth2.clientIdSecretRef },
          clientSecretSecretRef: { ...spec.oauth2.clientSecretSecretRef },
          scopes: spec.oauth2.scopes ?? [],
          audience: spec.oauth2.audience,
          clientAuthentication: spec.oauth2.clientAuthentication,
        }
      : undefined,
    proxyUrl: spec.proxy?.url,
    ordering: orderingOf(spec.ordering?.key),
    filter: spec.filter,
    transform: spec.transform,
  };
}

/** The parsed ordering key; undefined when there is none (the schema refused any other). */
function orderingOf(key: string | undefined): Policy["ordering"] {
  const parsed = key === undefined ? undefined : parseOrderingKey(key);
  return key !== undefined && parsed ? { key, parsed } : undefined;
}

/** How long finished deliveries are kept, in ms. */
function retentionOf(r: SubscriptionSpec["retention"]): Policy["retention"] {
  return { succeededMs: parseDuration(r.succeeded), deadLetteredMs: parseDuration(r.deadLettered) };
}

/** The schema's default retention: what applies to a delivery whose subscription is gone or invalid. */
export const DEFAULT_RETENTION: Policy["retention"] = retentionOf(retentionSchema.parse({}));

/** Whether a subscription listing `eventTypes` wants `eventType`: omitted or "*" match all,
 *  "order.*" matches "order.paid" (and "order.paid.v2"), anything else matches exactly. */
export function matchesEventType(eventTypes: readonly string[] | undefined, eventType: string): boolean {
  if (!eventTypes || eventTypes.length === 0) return true;
  return eventTypes.some((t) => t === "*" || t === eventType || (t.endsWith(".*") && eventType.startsWith(t.slice(0, -1))));
}
