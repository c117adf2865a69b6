// The invalid-spec table: specs the API server must refuse, each with the field its message
// names, the rule's message, and the one part of the CRD schema that refuses it.
//
// test/integration/crds.test.ts submits every case to the installed hookline.dev CRDs and
// checks the refusal; test/integration/crd-mutation.test.ts deletes each case's rule from a
// private copy of the CRD and checks that the same write is then accepted, so every rule in
// this table is shown to be the thing doing the refusing.
import { EVENT_ID_MESSAGE } from "../../src/api/delivery.js";
import { DURATION_PATTERN } from "../../src/api/duration.js";
import { TRACEPARENT_MESSAGE } from "../../src/api/trace-context.js";
import { kubectl, kubectlOk } from "./cluster.js";
import type { KubectlResult } from "./cluster.js";

export type CaseKind = "subscription" | "delivery";

export const CASE_KINDS: Record<CaseKind, string> = { subscription: "WebhookSubscription", delivery: "WebhookDelivery" };

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/**
 * Where a rule lives: `path` is a list of keys from the CRD's `openAPIV3Schema` to the schema
 * node that holds it (see `at`), then exactly one of
 * - `keyword`: a keyword of that node (`minimum`, `maximum`, `enum`, `pattern`),
 * - `required`: an entry of that node's `required` list,
 * - `rule`: text found in exactly one `x-kubernetes-validations[].rule` of that node.
 */
export type Enforcer =
  | { path: string[]; keyword: "minimum" | "maximum" | "enum" | "pattern" }
  | { path: string[]; required: string }
  | { path: string[]; rule: string };

export interface InvalidSpecCase {
  name: string;
  kind: CaseKind;
  /** The spec created. For an update case, a valid spec created first. */
  spec: JsonObject;
  /** For an update case: the spec then written over it, which is refused. */
  update?: JsonObject;
  /** The field the refusal names, as the API server spells it (`spec.retry.maxAttempts`). */
  field: string;
  /** Text of the rule's message. */
  message: string;
  enforcedBy: Enforcer;
}

/**
 * A field path (`spec.retry.maxAttempts`, `spec.eventTypes[]` for the items of a list, `` for
 * the root) as a path of keys into openAPIV3Schema.
 */
export function at(fieldPath: string): string[] {
  const path: string[] = [];
  for (const part of fieldPath.split(".").filter(Boolean)) {
    const name = part.replace(/\[\]$/, "");
    path.push("properties", name);
    if (part.endsWith("[]")) path.push("items");
  }
  return path;
}

export function describeEnforcer(e: Enforcer): string {
  let where = "";
  for (const [i, key] of e.path.entries()) {
    if (key === "items") where += "[]";
    else if (e.path[i - 1] === "properties") where += where ? `.${key}` : key;
  }
  where ||= "<root>";
  if ("keyword" in e) return `${where}: ${e.keyword}`;
  if ("required" in e) return `${where}: required "${e.required}"`;
  return `${where}: x-kubernetes-validations rule containing "${e.rule}"`;
}

const URL_OK = "https://hooks.example.com/orders";
const sub = (extra: JsonObject = {}): JsonObject => ({ url: URL_OK, ...extra });
const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const del = (extra: JsonObject = {}): JsonObject => ({ subscriptionRef: { name: "acme" }, eventType: "order.paid", payload: { order: 1001 }, ...extra });

const ge = (n: number) => `should be greater than or equal to ${n}`;
const le = (n: number) => `should be less than or equal to ${n}`;
const durationPattern = `should match '${DURATION_PATTERN}'`;
const nameRule = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/** Headers the subscription may not set, one case each, refused with a message naming the header. */
const headerCase = (name: string, headers: Record<string, string>, message: string, rule: string): InvalidSpecCase => ({
  name: `headers ${name}`,
  kind: "subscription",
  spec: sub({ headers: { "X-Tenant": "acme", ...headers } }),
  field: "spec.headers",
  message,
  enforcedBy: { path: at("spec.headers"), rule },
});
const RESERVED_RULE = "'content-type', 'user-agent'";
const CONNECTION_RULE = "startsWith('proxy-')";
const VALUE_RULE = "self[k].matches(";
const VALUE_WHY = "its value has a character other than tab and printable ASCII";
const HEADER_CASES: InvalidSpecCase[] = [
  ...["Content-Type", "User-Agent", "webhook-id", "webhook-timestamp", "webhook-signature", "x-webhook-id", "X-Webhook-Timestamp", "x-webhook-signature"].map((h) =>
    headerCase(`${h} (reserved: Hookline sets it)`, { [h]: "v1,forged" }, `header "${h}" may not be set: Hookline sets it`, RESERVED_RULE),
  ),
  ...["Connection", "Upgrade", "Keep-Alive", "Expect", "TE", "Trailer", "Transfer-Encoding", "Content-Length", "Host", "Proxy-Authorization", "proxy-connection"].map((h) =>
    headerCase(`${h} (the HTTP client owns it)`, { [h]: "close" }, `header "${h}" may not be set: it controls the connection or the message framing`, CONNECTION_RULE),
  ),
  headerCase("value with a line break", { "X-Injected": "acme\r\nX-Injected: 1" }, `header "X-Injected": ${VALUE_WHY}`, VALUE_RULE),
  headerCase("value with a control character (BEL)", { "X-Bell": "a\u0007b" }, `header "X-Bell": ${VALUE_WHY}`, VALUE_RULE),
  headerCase("value with DEL", { "X-Del": "a\u007fb" }, `header "X-Del": ${VALUE_WHY}`, VALUE_RULE),
  headerCase("value with non-ASCII (Zoë, U+0100)", { "X-Name": "Zoë \u0100" }, `header "X-Name": ${VALUE_WHY}`, VALUE_RULE),
];

const ref = (name = "tenant-token", key = "token"): JsonObject => ({ name, key });
const from = (name: string, secretKeyRef: JsonObject = ref()): JsonObject => ({ name, secretKeyRef });
const OAUTH2: JsonObject = { tokenURL: "https://auth.example.com/oauth/token", clientIdSecretRef: ref("oauth", "client-id"), clientSecretSecretRef: ref("oauth", "client-secret") };

/** The receiver-credential fields (headersFrom, tls, oauth2, proxy): the operator's zod refuses them too. */
export const CREDENTIAL_CASES: InvalidSpecCase[] = [
  {
    name: 'headersFrom name "X Token" (not an HTTP token)',
    kind: "subscription",
    spec: sub({ headersFrom: [from("X Token")] }),
    field: "spec.headersFrom[0].name",
    message: "should match '^[A-Za-z0-9!#$%&'*+.^_`|~-]+$'",
    enforcedBy: { path: at("spec.headersFrom[].name"), keyword: "pattern" },
  },
  {
    name: "headersFrom Webhook-Signature (reserved: Hookline sets it)",
    kind: "subscription",
    spec: sub({ headersFrom: [from("X-Ok"), from("Webhook-Signature")] }),
    field: "spec.headersFrom[1].name",
    message: 'header "Webhook-Signature" may not be set: Hookline sets it',
    enforcedBy: { path: at("spec.headersFrom[].name"), rule: RESERVED_RULE },
  },
  {
    name: "headersFrom Proxy-Authorization (the HTTP client owns it)",
    kind: "subscription",
    spec: sub({ headersFrom: [from("Proxy-Authorization")] }),
    field: "spec.headersFrom[0].name",
    message: 'header "Proxy-Authorization" may not be set: it controls the connection or the message framing',
    enforcedBy: { path: at("spec.headersFrom[].name"), rule: CONNECTION_RULE },
  },
  {
    name: "headersFrom Host (the HTTP client owns it)",
    kind: "subscription",
    spec: sub({ headersFrom: [from("Host")] }),
    field: "spec.headersFrom[0].name",
    message: 'header "Host" may not be set: it controls the connection or the message framing',
    enforcedBy: { path: at("spec.headersFrom[].name"), rule: CONNECTION_RULE },
  },
  {
    name: "headersFrom the same header twice (case-insensitive)",
    kind: "subscription",
    spec: sub({ headersFrom: [from("X-Token"), from("x-token", ref("other", "token"))] }),
    field: "spec.headersFrom",
    message: "headersFrom names must be unique (case-insensitive)",
    enforcedBy: { path: at("spec.headersFrom"), rule: "self.filter(o, o.name.lowerAscii() == h.name.lowerAscii()).size() == 1" },
  },
  {
    name: "headersFrom secretKeyRef.key \"a/b\"",
    kind: "subscription",
    spec: sub({ headersFrom: [from("X-Token", ref("tenant-token", "a/b"))] }),
    field: "spec.headersFrom[0].secretKeyRef.key",
    message: "should match '^[-._a-zA-Z0-9]+$'",
    enforcedBy: { path: at("spec.headersFrom[].secretKeyRef.key"), keyword: "pattern" },
  },
  {
    name: "a header in both headers and headersFrom",
    kind: "subscription",
    spec: sub({ headers: { "X-Tenant": "acme" }, headersFrom: [from("x-tenant")] }),
    field: "spec.headersFrom",
    message: "a header may be set in headers or in headersFrom, not both",
    enforcedBy: { path: at("spec"), rule: "self.headersFrom.all(h, !self.headers.exists(" },
  },
  {
    name: "oauth2 with Authorization in headers",
    kind: "subscription",
    spec: sub({ oauth2: OAUTH2, headers: { Authorization: "Bearer static" } }),
    field: "spec.oauth2",
    message: "with oauth2, Hookline sets the Authorization header",
    enforcedBy: { path: at("spec"), rule: "h.name.lowerAscii() == 'authorization'" },
  },
  {
    name: "oauth2 with authorization in headersFrom",
    kind: "subscription",
    spec: sub({ oauth2: OAUTH2, headersFrom: [from("authorization")] }),
    field: "spec.oauth2",
    message: "with oauth2, Hookline sets the Authorization header",
    enforcedBy: { path: at("spec"), rule: "h.name.lowerAscii() == 'authorization'" },
  },
  {
    name: "oauth2.tokenURL ftp://auth.example.com",
    kind: "subscription",
    spec: sub({ oauth2: { ...OAUTH2, tokenURL: "ftp://auth.example.com/token" } }),
    field: "spec.oauth2.tokenURL",
    message: "tokenURL must be an absolute http:// or https:// URL with a host",
    enforcedBy: { path: at("spec.oauth2.tokenURL"), rule: "getScheme()" },
  },
  {
    name: "oauth2 without clientSecretSecretRef",
    kind: "subscription",
    spec: sub({ oauth2: { tokenURL: "https://auth.example.com/oauth/token", clientIdSecretRef: ref("oauth", "client-id") } }),
    field: "spec.oauth2.clientSecretSecretRef",
    message: "Required value",
    enforcedBy: { path: at("spec.oauth2"), required: "clientSecretSecretRef" },
  },
  {
    name: 'oauth2.scopes entry "read write" (a space)',
    kind: "subscription",
    spec: sub({ oauth2: { ...OAUTH2, scopes: ["webhooks", "read write"] } }),
    field: "spec.oauth2.scopes[1]",
    message: "should match",
    enforcedBy: { path: at("spec.oauth2.scopes[]"), keyword: "pattern" },
  },
  {
    name: "oauth2.clientAuthentication Digest",
    kind: "subscription",
    spec: sub({ oauth2: { ...OAUTH2, clientAuthentication: "Digest" } }),
    field: "spec.oauth2.clientAuthentication",
    message: 'supported values: "ClientSecretBasic", "ClientSecretPost"',
    enforcedBy: { path: at("spec.oauth2.clientAuthentication"), keyword: "enum" },
  },
  {
    name: "tls with an http:// url",
    kind: "subscription",
    spec: { url: "http://hooks.example.com/orders", tls: { caBundleSecretRef: { name: "receiver-ca" } } },
    field: "spec.tls",
    message: "tls applies to https endpoints: the url must be https://",
    enforcedBy: { path: at("spec"), rule: "url(self.url).getScheme() == 'https'" },
  },
  {
    name: "tls with neither a client certificate nor a CA bundle",
    kind: "subscription",
    spec: sub({ tls: {} }),
    field: "spec.tls",
    message: "tls needs clientCertificateSecretRef, caBundleSecretRef or both",
    enforcedBy: { path: at("spec.tls"), rule: "has(self.clientCertificateSecretRef)" },
  },
  {
    name: 'tls.clientCertificateSecretRef.name "Client_Cert"',
    kind: "subscription",
    spec: sub({ tls: { clientCertificateSecretRef: { name: "Client_Cert" } } }),
    field: "spec.tls.clientCertificateSecretRef.name",
    message: `should match '${nameRule}'`,
    enforcedBy: { path: at("spec.tls.clientCertificateSecretRef.name"), keyword: "pattern" },
  },
  {
    name: "proxy.url socks5://proxy:1080",
    kind: "subscription",
    spec: sub({ proxy: { url: "socks5://proxy.example.com:1080" } }),
    field: "spec.proxy.url",
    message: "proxy url must be an absolute http:// or https:// URL with a host",
    enforcedBy: { path: at("spec.proxy.url"), rule: "getScheme()" },
  },
  {
    name: "proxy.url with credentials",
    kind: "subscription",
    spec: sub({ proxy: { url: "http://egress:hunter2@proxy.example.com:3128" } }),
    field: "spec.proxy.url",
    message: "proxy url may not hold credentials (user:password@)",
    enforcedBy: { path: at("spec.proxy.url"), rule: "[^/?#]*@" },
  },
];

/** Headers the API server accepts: ordinary names, values with tabs, spaces and printable ASCII. */
export const VALID_HEADERS: Record<string, string> = {
  "X-Tenant": "acme-42",
  Authorization: "Bearer abc.def~ghi",
  "X-Printable": "\ta !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ z",
  "X-Connection-Id": "c-1",
  "X-Proxy-Hint": "none",
};

export const INVALID_SPEC_CASES: InvalidSpecCase[] = [
  // Integer bounds.
  {
    name: "retry.maxAttempts 0",
    kind: "subscription",
    spec: sub({ retry: { maxAttempts: 0 } }),
    field: "spec.retry.maxAttempts",
    message: ge(1),
    enforcedBy: { path: at("spec.retry.maxAttempts"), keyword: "minimum" },
  },
  {
    name: "retry.maxAttempts 51",
    kind: "subscription",
    spec: sub({ retry: { maxAttempts: 51 } }),
    field: "spec.retry.maxAttempts",
    message: le(50),
    enforcedBy: { path: at("spec.retry.maxAttempts"), keyword: "maximum" },
  },
  {
    name: "retry.multiplier 0",
    kind: "subscription",
    spec: sub({ retry: { multiplier: 0 } }),
    field: "spec.retry.multiplier",
    message: ge(1),
    enforcedBy: { path: at("spec.retry.multiplier"), keyword: "minimum" },
  },
  {
    name: "retry.multiplier 11",
    kind: "subscription",
    spec: sub({ retry: { multiplier: 11 } }),
    field: "spec.retry.multiplier",
    message: le(10),
    enforcedBy: { path: at("spec.retry.multiplier"), keyword: "maximum" },
  },
  {
    name: "retry.jitterPercent 101",
    kind: "subscription",
    spec: sub({ retry: { jitterPercent: 101 } }),
    field: "spec.retry.jitterPercent",
    message: le(100),
    enforcedBy: { path: at("spec.retry.jitterPercent"), keyword: "maximum" },
  },
  {
    name: "circuitBreaker.failureThreshold 0",
    kind: "subscription",
    spec: sub({ circuitBreaker: { failureThreshold: 0 } }),
    field: "spec.circuitBreaker.failureThreshold",
    message: ge(1),
    enforcedBy: { path: at("spec.circuitBreaker.failureThreshold"), keyword: "minimum" },
  },
  {
    name: "circuitBreaker.failureThreshold 101",
    kind: "subscription",
    spec: sub({ circuitBreaker: { failureThreshold: 101 } }),
    field: "spec.circuitBreaker.failureThreshold",
    message: le(100),
    enforcedBy: { path: at("spec.circuitBreaker.failureThreshold"), keyword: "maximum" },
  },
  {
    name: "circuitBreaker.successThreshold 21",
    kind: "subscription",
    spec: sub({ circuitBreaker: { successThreshold: 21 } }),
    field: "spec.circuitBreaker.successThreshold",
    message: le(20),
    enforcedBy: { path: at("spec.circuitBreaker.successThreshold"), keyword: "maximum" },
  },
  {
    name: "maxInFlight 0",
    kind: "subscription",
    spec: sub({ maxInFlight: 0 }),
    field: "spec.maxInFlight",
    message: ge(1),
    enforcedBy: { path: at("spec.maxInFlight"), keyword: "minimum" },
  },
  {
    name: "rateLimit.perSecond 0",
    kind: "subscription",
    spec: sub({ rateLimit: { perSecond: 0 } }),
    field: "spec.rateLimit.perSecond",
    message: ge(1),
    enforcedBy: { path: at("spec.rateLimit.perSecond"), keyword: "minimum" },
  },
  {
    name: "deadLetter.maxEntries 0",
    kind: "subscription",
    spec: sub({ deadLetter: { maxEntries: 0 } }),
    field: "spec.deadLetter.maxEntries",
    message: ge(1),
    enforcedBy: { path: at("spec.deadLetter.maxEntries"), keyword: "minimum" },
  },
  {
    name: "deadLetter.maxReplays 101",
    kind: "subscription",
    spec: sub({ deadLetter: { maxReplays: 101 } }),
    field: "spec.deadLetter.maxReplays",
    message: le(100),
    enforcedBy: { path: at("spec.deadLetter.maxReplays"), keyword: "maximum" },
  },
  // Enums.
  {
    name: "signature.scheme HMACSHA1",
    kind: "subscription",
    spec: sub({ signature: { scheme: "HMACSHA1" } }),
    field: "spec.signature.scheme",
    message: 'Unsupported value: "HMACSHA1": supported values: "StandardWebhooks", "HMACSHA256Hex", "None"',
    enforcedBy: { path: at("spec.signature.scheme"), keyword: "enum" },
  },
  {
    name: "signature.signedContent Body (not a form Hookline signs)",
    kind: "subscription",
    spec: sub({ signature: { scheme: "HMACSHA256Hex", signedContent: "Body" } }),
    field: "spec.signature.signedContent",
    message: 'Unsupported value: "Body": supported values: "TimestampAndBody", "LegacyBodyOnly"',
    enforcedBy: { path: at("spec.signature.signedContent"), keyword: "enum" },
  },
  {
    name: "signature.signedContent LegacyBodyOnly with scheme StandardWebhooks",
    kind: "subscription",
    spec: sub({ signature: { scheme: "StandardWebhooks", signedContent: "LegacyBodyOnly" } }),
    field: "spec.signature.signedContent",
    message: "signedContent LegacyBodyOnly applies to scheme HMACSHA256Hex only",
    enforcedBy: { path: at("spec.signature"), rule: "self.scheme == 'HMACSHA256Hex'" },
  },
  {
    name: "signature.scheme None (unsigned) with a secretRef",
    kind: "subscription",
    spec: sub({ secretRef: { name: "acme-signing" }, signature: { scheme: "None" } }),
    field: "spec.secretRef",
    message: "signature.scheme None sends unsigned requests: remove secretRef, or choose StandardWebhooks or HMACSHA256Hex",
    enforcedBy: { path: at("spec"), rule: "self.signature.scheme != 'None'" },
  },
  {
    name: "signature.signedContent LegacyBodyOnly with scheme None",
    kind: "subscription",
    spec: sub({ signature: { scheme: "None", signedContent: "LegacyBodyOnly" } }),
    field: "spec.signature.signedContent",
    message: "signedContent LegacyBodyOnly applies to scheme HMACSHA256Hex only",
    enforcedBy: { path: at("spec.signature"), rule: "self.scheme == 'HMACSHA256Hex'" },
  },
  {
    name: "signature.signedContent LegacyBodyOnly without a scheme (StandardWebhooks by default)",
    kind: "subscription",
    spec: sub({ signature: { signedContent: "LegacyBodyOnly" } }),
    field: "spec.signature.signedContent",
    message: "signedContent LegacyBodyOnly applies to scheme HMACSHA256Hex only",
    enforcedBy: { path: at("spec.signature"), rule: "self.scheme == 'HMACSHA256Hex'" },
  },
  {
    name: "circuitBreaker.whenOpen Drop",
    kind: "subscription",
    spec: sub({ circuitBreaker: { whenOpen: "Drop" } }),
    field: "spec.circuitBreaker.whenOpen",
    message: 'Unsupported value: "Drop": supported values: "Defer", "DeadLetter"',
    enforcedBy: { path: at("spec.circuitBreaker.whenOpen"), keyword: "enum" },
  },
  // Duration strings: the format, then the ranges.
  {
    name: 'retry.initialBackoff "10 seconds"',
    kind: "subscription",
    spec: sub({ retry: { initialBackoff: "10 seconds" } }),
    field: "spec.retry.initialBackoff",
    message: durationPattern,
    enforcedBy: { path: at("spec.retry.initialBackoff"), keyword: "pattern" },
  },
  {
    name: 'timeout "-1s"',
    kind: "subscription",
    spec: sub({ timeout: "-1s" }),
    field: "spec.timeout",
    message: durationPattern,
    enforcedBy: { path: at("spec.timeout"), keyword: "pattern" },
  },
  {
    name: 'retention.succeeded "1d" (no day unit)',
    kind: "subscription",
    spec: sub({ retention: { succeeded: "1d" } }),
    field: "spec.retention.succeeded",
    message: durationPattern,
    enforcedBy: { path: at("spec.retention.succeeded"), keyword: "pattern" },
  },
  {
    name: "timeout 99ms (below 100ms)",
    kind: "subscription",
    spec: sub({ timeout: "99ms" }),
    field: "spec.timeout",
    message: "must be between 100ms and 2m",
    enforcedBy: { path: at("spec.timeout"), rule: "duration(self) >= duration('100ms')" },
  },
  {
    name: "timeout 2m1s (above 120s)",
    kind: "subscription",
    spec: sub({ timeout: "2m1s" }),
    field: "spec.timeout",
    message: "must be between 100ms and 2m",
    enforcedBy: { path: at("spec.timeout"), rule: "duration(self) >= duration('100ms')" },
  },
  {
    name: "circuitBreaker.cooldown 999ms (below 1s)",
    kind: "subscription",
    spec: sub({ circuitBreaker: { cooldown: "999ms" } }),
    field: "spec.circuitBreaker.cooldown",
    message: "must be between 1s and 5m",
    enforcedBy: { path: at("spec.circuitBreaker.cooldown"), rule: "duration(self) >= duration('1s')" },
  },
  {
    name: "circuitBreaker.cooldown 301s (above 300s)",
    kind: "subscription",
    spec: sub({ circuitBreaker: { cooldown: "301s" } }),
    field: "spec.circuitBreaker.cooldown",
    message: "must be between 1s and 5m",
    enforcedBy: { path: at("spec.circuitBreaker.cooldown"), rule: "duration(self) >= duration('1s')" },
  },
  {
    name: "retention.deadLettered 8761h (above a year)",
    kind: "subscription",
    spec: sub({ retention: { deadLettered: "8761h" } }),
    field: "spec.retention.deadLettered",
    message: "must be between 0s and 8760h",
    enforcedBy: { path: at("spec.retention.deadLettered"), rule: "duration(self) <= duration('8760h')" },
  },
  // CEL rules.
  {
    name: "retry.maxBackoff 5s below initialBackoff 10s",
    kind: "subscription",
    spec: sub({ retry: { initialBackoff: "10s", maxBackoff: "5s" } }),
    field: "spec.retry.maxBackoff",
    message: "maxBackoff must be greater than or equal to initialBackoff",
    enforcedBy: { path: at("spec.retry"), rule: "duration(self.maxBackoff) >= duration(self.initialBackoff)" },
  },
  {
    name: "url ftp://x",
    kind: "subscription",
    spec: { url: "ftp://x" },
    field: "spec.url",
    message: "url must be an absolute http:// or https:// URL with a host",
    enforcedBy: { path: at("spec.url"), rule: "getScheme()" },
  },
  {
    name: 'url "not a url"',
    kind: "subscription",
    spec: { url: "not a url" },
    field: "spec.url",
    message: "url must be an absolute http:// or https:// URL with a host",
    enforcedBy: { path: at("spec.url"), rule: "getScheme()" },
  },
  ...HEADER_CASES,
  ...CREDENTIAL_CASES,
  {
    name: 'headers name "X Tenant" (not an HTTP token)',
    kind: "subscription",
    spec: sub({ headers: { "X Tenant": "acme" } }),
    field: "spec.headers",
    message: "header names must be HTTP tokens",
    enforcedBy: { path: at("spec.headers"), rule: "k.matches(" },
  },
  // Required fields and patterns.
  {
    name: "url missing",
    kind: "subscription",
    spec: { eventTypes: ["order.paid"] },
    field: "spec.url",
    message: "Required value",
    enforcedBy: { path: at("spec"), required: "url" },
  },
  {
    name: 'eventTypes entry "order paid"',
    kind: "subscription",
    spec: sub({ eventTypes: ["order.paid", "order paid"] }),
    field: "spec.eventTypes[1]",
    message: "should match '^(\\*|[A-Za-z0-9][A-Za-z0-9_.:/-]*?(\\.\\*)?)$'",
    enforcedBy: { path: at("spec.eventTypes[]"), keyword: "pattern" },
  },
  {
    name: 'secretRef.name "Acme_Signing"',
    kind: "subscription",
    spec: sub({ secretRef: { name: "Acme_Signing" } }),
    field: "spec.secretRef.name",
    message: `should match '${nameRule}'`,
    enforcedBy: { path: at("spec.secretRef.name"), keyword: "pattern" },
  },
  {
    // Text no Secret can hold as a key: before the pattern, the API server took it and the
    // subscription waited for a key that could never exist.
    name: 'secretRef.key "signing/current"',
    kind: "subscription",
    spec: sub({ secretRef: { name: "acme-signing", key: "signing/current" } }),
    field: "spec.secretRef.key",
    message: "should match '^[-._a-zA-Z0-9]+$'",
    enforcedBy: { path: at("spec.secretRef.key"), keyword: "pattern" },
  },
  {
    name: 'secretRef.previousKey "clé" (non-ASCII)',
    kind: "subscription",
    spec: sub({ secretRef: { name: "acme-signing", previousKey: "clé" } }),
    field: "spec.secretRef.previousKey",
    message: "should match '^[-._a-zA-Z0-9]+$'",
    enforcedBy: { path: at("spec.secretRef.previousKey"), keyword: "pattern" },
  },
  {
    name: "delivery subscriptionRef missing",
    kind: "delivery",
    spec: { eventType: "order.paid", payload: { order: 1001 } },
    field: "spec.subscriptionRef",
    message: "Required value",
    enforcedBy: { path: at("spec"), required: "subscriptionRef" },
  },
  {
    name: "delivery eventType missing",
    kind: "delivery",
    spec: { subscriptionRef: { name: "acme" }, payload: { order: 1001 } },
    field: "spec.eventType",
    message: "Required value",
    enforcedBy: { path: at("spec"), required: "eventType" },
  },
  // A delivery is immutable: an event does not change after the fact.
  {
    name: "delivery subscriptionRef changed",
    kind: "delivery",
    spec: del(),
    update: del({ subscriptionRef: { name: "globex" } }),
    field: "spec.subscriptionRef",
    message: "subscriptionRef is immutable: create a new WebhookDelivery instead",
    enforcedBy: { path: at("spec.subscriptionRef"), rule: "self == oldSelf" },
  },
  {
    name: "delivery eventType changed",
    kind: "delivery",
    spec: del(),
    update: del({ eventType: "order.refunded" }),
    field: "spec.eventType",
    message: "eventType is immutable: create a new WebhookDelivery instead",
    enforcedBy: { path: at("spec.eventType"), rule: "self == oldSelf" },
  },
  {
    name: "delivery eventId changed",
    kind: "delivery",
    spec: del({ eventId: "evt-1001" }),
    update: del({ eventId: "evt-1002" }),
    field: "spec.eventId",
    message: "eventId is immutable: create a new WebhookDelivery instead",
    enforcedBy: { path: at("spec.eventId"), rule: "self == oldSelf" },
  },
  {
    name: "delivery eventId added after create",
    kind: "delivery",
    spec: del(),
    update: del({ eventId: "evt-1001" }),
    field: "spec.eventId",
    message: "eventId is immutable: create a new WebhookDelivery instead",
    enforcedBy: { path: at("spec"), rule: "has(self.eventId) == has(oldSelf.eventId)" },
  },
  {
    name: "delivery eventId removed after create",
    kind: "delivery",
    spec: del({ eventId: "evt-1001" }),
    update: del(),
    field: "spec.eventId",
    message: "eventId is immutable: create a new WebhookDelivery instead",
    enforcedBy: { path: at("spec"), rule: "has(self.eventId) == has(oldSelf.eventId)" },
  },
  // spec.eventId is sent as the webhook-id header: only what a header value carries unchanged.
  ...(
    [
      ["a line break (header injection)", "evt-1\r\nX-Injected: 1"],
      ["a control character", "evt\u00001"],
      ["non-ASCII", "évènement-1"],
      ["an emoji", "evt-\u{1F600}"],
      ["a leading space", " evt-1"],
      ["a trailing space", "evt-1 "],
      ["a tab", "evt\t1"],
    ] as const
  ).map(([what, eventId]): InvalidSpecCase => ({
    name: `delivery eventId with ${what}`,
    kind: "delivery",
    spec: del({ eventId }),
    field: "spec.eventId",
    message: EVENT_ID_MESSAGE,
    enforcedBy: { path: at("spec.eventId"), rule: "self.matches(" },
  })),
  {
    name: "delivery payload changed",
    kind: "delivery",
    spec: del(),
    update: del({ payload: { order: 1001, amount: 1 } }),
    field: "spec.payload",
    message: "payload is immutable: create a new WebhookDelivery instead",
    enforcedBy: { path: at("spec"), rule: "self.subscriptionRef != oldSelf.subscriptionRef" },
  },
  // spec.traceContext: the stored W3C form, immutable.
  ...(
    [
      ["upper-case hex", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"],
      ["version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],
      ["a higher version (the doors downgrade it; the stored form is 00)", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],
      ["reserved flags", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff"],
      ["an all-zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"],
      ["an all-zero parent id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"],
      ["non-ASCII", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b\u00e9-01"],
    ] as const
  ).map(([what, traceparent]): InvalidSpecCase => ({
    name: `delivery traceparent with ${what}`,
    kind: "delivery",
    spec: del({ traceContext: { traceparent } }),
    field: "spec.traceContext.traceparent",
    message: TRACEPARENT_MESSAGE,
    enforcedBy: { path: at("spec.traceContext.traceparent"), rule: "self.matches(r'^00-" },
  })),
  {
    name: "delivery tracestate with spaces around its entries",
    kind: "delivery",
    spec: del({ traceContext: { traceparent: TRACEPARENT, tracestate: "rojo=1, congo=2" } }),
    field: "spec.traceContext.tracestate",
    message: "must be a W3C tracestate",
    enforcedBy: { path: at("spec.traceContext.tracestate"), rule: "self.matches(" },
  },
  {
    name: "delivery tracestate with an upper-case key",
    kind: "delivery",
    spec: del({ traceContext: { traceparent: TRACEPARENT, tracestate: "Rojo=1" } }),
    field: "spec.traceContext.tracestate",
    message: "must be a W3C tracestate",
    enforcedBy: { path: at("spec.traceContext.tracestate"), rule: "self.matches(" },
  },
  {
    name: "delivery tracestate with 33 entries",
    kind: "delivery",
    spec: del({ traceContext: { traceparent: TRACEPARENT, tracestate: Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(",") } }),
    field: "spec.traceContext.tracestate",
    message: "must have at most 32 entries (W3C)",
    enforcedBy: { path: at("spec.traceContext.tracestate"), rule: "self.split(',').size() <= 32" },
  },
  {
    name: "delivery tracestate with a key of 257 characters",
    kind: "delivery",
    spec: del({ traceContext: { traceparent: TRACEPARENT, tracestate: `${"k".repeat(257)}=v` } }),
    field: "spec.traceContext.tracestate",
    message: "keys and values must be at most 256 characters each (W3C)",
    enforcedBy: { path: at("spec.traceContext.tracestate"), rule: "m.indexOf('=') <= 256" },
  },
  {
    name: "delivery tracestate with a repeated key",
    kind: "delivery",
    spec: del({ traceContext: { traceparent: TRACEPARENT, tracestate: "rojo=1,congo=2,rojo=3" } }),
    field: "spec.traceContext.tracestate",
    message: "must not repeat a key (W3C: one entry per key)",
    enforcedBy: { path: at("spec.traceContext.tracestate"), rule: "(',' + self).split(" },
  },
  {
    name: "delivery tracestate without a traceparent",
    kind: "delivery",
    spec: del({ traceContext: { tracestate: "rojo=1" } }),
    field: "spec.traceContext.traceparent",
    message: "Required value",
    enforcedBy: { path: at("spec.traceContext"), required: "traceparent" },
  },
  {
    name: "delivery traceContext changed",
    kind: "delivery",
    spec: del({ traceContext: { traceparent: TRACEPARENT } }),
    update: del({ traceContext: { traceparent: TRACEPARENT, tracestate: "rojo=1" } }),
    field: "spec.traceContext",
    message: "traceContext is immutable: create a new WebhookDelivery instead",
    enforcedBy: { path: at("spec.traceContext"), rule: "self == oldSelf" },
  },
  {
    name: "delivery traceContext added after create",
    kind: "delivery",
    spec: del(),
    update: del({ traceContext: { traceparent: TRACEPARENT } }),
    field: "spec.traceContext",
    message: "traceContext is immutable: create a new WebhookDelivery instead",
    enforcedBy: { path: at("spec"), rule: "has(self.traceContext) == has(oldSelf.traceContext)" },
  },
  {
    name: "delivery traceContext removed after create",
    kind: "delivery",
    spec: del({ traceContext: { traceparent: TRACEPARENT } }),
    update: del(),
    field: "spec.traceContext",
    message: "traceContext is immutable: create a new WebhookDelivery instead",
    enforcedBy: { path: at("spec"), rule: "has(self.traceContext) == has(oldSelf.traceContext)" },
  },
  {
    name: "delivery payload replaced by a scalar",
    kind: "delivery",
    spec: del(),
    update: del({ payload: "1001" }),
    field: "spec.payload",
    message: "payload is immutable: create a new WebhookDelivery instead",
    enforcedBy: { path: at("spec"), rule: "self.subscriptionRef != oldSelf.subscriptionRef" },
  },
];

// ---------------------------------------------------------------------------------------------
// Reading and editing a CRD's schema.

/** A node of an OpenAPI v3 schema, as far as these tests read it. */
export interface SchemaNode {
  type?: string;
  properties?: Record<string, SchemaNode>;
  items?: SchemaNode;
  additionalProperties?: unknown;
  required?: string[];
  "x-kubernetes-validations"?: { rule: string; message?: string; fieldPath?: string }[];
  [keyword: string]: unknown;
}

/** The parts of a CustomResourceDefinition these tests read and write. */
export interface CrdObject {
  metadata: { name: string; resourceVersion?: string; labels?: Record<string, string> };
  spec: {
    group: string;
    names: { kind: string; listKind?: string; plural: string; singular?: string; shortNames?: string[]; categories?: string[] };
    versions: { name: string; schema: { openAPIV3Schema: SchemaNode } }[];
  };
  status?: { conditions?: { type: string; status: string }[] };
}

/** Any CRD object, e.g. from subscriptionCrd() or `kubectl get crd -o json`. */
export const asCrd = (crd: object): CrdObject => crd as CrdObject;

/** The openAPIV3Schema of the CRD's (only) version. */
export function openApiSchema(crd: object): SchemaNode {
  return asCrd(crd).spec.versions[0]!.schema.openAPIV3Schema;
}

/** The schema node at `path` under openAPIV3Schema; throws naming the path when it is missing. */
export function schemaNode(crd: object, path: string[]): SchemaNode {
  let node: unknown = openApiSchema(crd);
  for (const [i, key] of path.entries()) {
    if (node === null || typeof node !== "object" || !(key in node)) {
      throw new Error(`the CRD schema has no ${path.slice(0, i + 1).join(".")}`);
    }
    node = (node as Record<string, unknown>)[key];
  }
  if (node === null || typeof node !== "object" || Array.isArray(node)) throw new Error(`${path.join(".")} is not a schema`);
  return node as SchemaNode;
}

/**
 * Checks that the enforcer names something present in the CRD (exactly one CEL rule for `rule`)
 * and returns a description of it, e.g. `minimum = 1`.
 */
export function findEnforcer(crd: object, e: Enforcer): string {
  const node = schemaNode(crd, e.path);
  if ("keyword" in e) {
    if (!(e.keyword in node)) throw new Error(`${describeEnforcer(e)}: no such keyword`);
    return `${e.keyword} = ${JSON.stringify(node[e.keyword])}`;
  }
  if ("required" in e) {
    if (!(node.required ?? []).includes(e.required)) throw new Error(`${describeEnforcer(e)}: not in required`);
    return `required includes ${e.required}`;
  }
  const rules = (node["x-kubernetes-validations"] ?? []).filter((v) => v.rule.includes(e.rule));
  if (rules.length !== 1) throw new Error(`${describeEnforcer(e)}: ${rules.length} rules match, expected exactly 1`);
  return `rule ${rules[0]!.rule}`;
}

/** A copy of `crd` with exactly the enforcer's rule deleted. */
export function withoutEnforcer<T extends object>(crd: T, e: Enforcer): T {
  findEnforcer(crd, e);
  const copy = structuredClone(crd);
  const node = schemaNode(copy, e.path);
  if ("keyword" in e) {
    delete node[e.keyword];
  } else if ("required" in e) {
    const rest = node.required!.filter((r) => r !== e.required);
    if (rest.length) node.required = rest;
    else delete node.required;
  } else {
    const rest = node["x-kubernetes-validations"]!.filter((v) => !v.rule.includes(e.rule));
    if (rest.length) node["x-kubernetes-validations"] = rest;
    else delete node["x-kubernetes-validations"];
  }
  return copy;
}

// ---------------------------------------------------------------------------------------------
// Submitting a case through kubectl.

export interface CaseTarget {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
}

export function caseObject(target: CaseTarget, spec: JsonObject): JsonObject {
  return { apiVersion: target.apiVersion, kind: target.kind, metadata: { name: target.name, namespace: target.namespace }, spec };
}

/**
 * For an update case, creates the valid object the refused update is written over.
 * `flags`: extra kubectl flags (e.g. `--validate=false`).
 */
export async function prepareCase(c: InvalidSpecCase, target: CaseTarget, flags: string[] = []): Promise<void> {
  if (!c.update) return;
  await kubectlOk(["create", ...flags, "-f", "-"], { input: JSON.stringify(caseObject(target, c.spec)) });
}

/**
 * The write that must be refused: `kubectl create` of the spec, or `kubectl replace` with the
 * update. Prints the object (JSON) when the server accepts it.
 */
export function submitCase(c: InvalidSpecCase, target: CaseTarget, opts: { dryRun: boolean; flags?: string[] }): Promise<KubectlResult> {
  const dryRun = opts.dryRun ? ["--dry-run=server"] : [];
  const verb = c.update ? "replace" : "create";
  return kubectl([verb, ...(opts.flags ?? []), ...dryRun, "-o", "json", "-f", "-"], {
    input: JSON.stringify(caseObject(target, c.update ?? c.spec)),
  });
}

/** The spec written by the case (the update for an update case). */
export function submittedSpec(c: InvalidSpecCase): JsonObject {
  return c.update ?? c.spec;
}

/**
 * The causes of a refusal as kubectl prints them: `The X "n" is invalid: <cause>` for one, or
 * one `* <cause>` line each for several. Leaves out the API server's note that CEL rules were
 * skipped because of the other errors (it names no field and refuses nothing by itself).
 */
const CEL_SKIPPED = /^<nil>: Invalid value: null: some validation rules were not checked because the object was invalid/;

export function refusalCauses(stderr: string): string[] {
  const m = /is invalid: ?([\s\S]*)$/.exec(stderr.trim());
  if (!m) return [];
  const body = m[1]!.trim();
  if (!body.startsWith("* ")) return [body];
  return body
    .split(/\n(?=\* )/)
    .map((line) => line.replace(/^\* /, "").trim())
    .filter((cause) => cause && !CEL_SKIPPED.test(cause));
}
