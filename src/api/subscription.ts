// WebhookSubscription: where and how to deliver one customer's events. The zod schema here is
// the source of truth: the CRD (crds/), the TypeScript types and the operator's runtime
// validation are all derived from it.
import { z } from "zod";
import { FILTER_MAX_LENGTH, NOTIFY_EVENTS, REPLAY_REASON_MAX_LENGTH, type NotifyEvent } from "./names.js";
import { EVENT_TYPE_KEY, isOrderingKey, ORDERING_KEY_MAX_LENGTH, ORDERING_KEY_MAX_STEPS, ORDERING_PATH_PATTERN } from "./ordering.js";
import { celIsDuration, conditions, duration, int, objectName, safeDuration, timestamp, withRules } from "./fields.js";

/** Headers Hookline sets itself; a subscription may not override them. */
export const RESERVED_HEADERS = [
  "content-type",
  "user-agent",
  "webhook-id",
  "webhook-timestamp",
  "webhook-signature",
  "x-webhook-id",
  "x-webhook-timestamp",
  "x-webhook-signature",
  // The W3C trace context of the attempt (src/observability/tracing.ts).
  "traceparent",
  "tracestate",
] as const;

/**
 * Headers about the connection and the message's framing, which the HTTP client owns: undici
 * refuses most of them (every request would fail), and the rest (Host, TE, Trailer, Proxy-*)
 * would change how the request travels, not what it says. Names starting with `proxy-` too.
 */
export const CONNECTION_HEADERS = ["connection", "upgrade", "keep-alive", "expect", "te", "trailer", "transfer-encoding", "content-length", "host"] as const;
export const CONNECTION_HEADER_PREFIX = "proxy-";

/** A subscription's eventTypes entry: "*", an exact type, or a prefix with a trailing ".*". */
export const EVENT_TYPE_PATTERN = "^(\\*|[A-Za-z0-9][A-Za-z0-9_.:/-]*?(\\.\\*)?)$";

/** A key of a Secret's data (what `kubectl create secret` accepts). */
const SECRET_KEY_PATTERN = "^[-._a-zA-Z0-9]+$";
function secretKey(description: string) {
  return z.string().min(1).max(253).regex(new RegExp(SECRET_KEY_PATTERN), { message: "must be a Secret key (letters, digits, -, _ and .)" }).meta({ description });
}

export const secretRefSchema = z
  .object({
    name: objectName("Name of a Secret in the subscription's namespace."),
    key: secretKey("Key of the current signing secret in the Secret.").default("secret"),
    previousKey: secretKey(
      "Key of the previous signing secret. While it exists in the Secret, requests carry both signatures, so receivers can rotate without downtime.",
    ).optional(),
  })
  .meta({
    description:
      "The Secret holding the signing secret. Required unless signature.scheme is None: a subscription without it is Ready=False (SecretRequired) and sends nothing. A value `whsec_<base64>` is used as its decoded bytes. StandardWebhooks needs that form (the Standard Webhooks libraries base64-decode every secret): any other value makes the subscription Ready=False (SecretNotVerifiable). HMACSHA256Hex also takes any other value, as its UTF-8 bytes.",
  });

/** What an HMACSHA256Hex signature covers; core/request/signing.ts computes it. */
export const HEX_SIGNED_CONTENT = ["TimestampAndBody", "LegacyBodyOnly"] as const;

export const signatureSchema = withRules(
  z.object({
    scheme: z
      .enum(["StandardWebhooks", "HMACSHA256Hex", "None"])
      .default("StandardWebhooks")
      .meta({
        description:
          'StandardWebhooks: webhook-id, webhook-timestamp and webhook-signature (v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">) per the Standard Webhooks specification. HMACSHA256Hex: x-webhook-id, x-webhook-timestamp and x-webhook-signature: sha256=<hex HMAC-SHA256 of "<x-webhook-timestamp>.<body>"> (see signedContent). None: unsigned requests (webhook-id and webhook-timestamp only), by explicit choice and without secretRef; a subscription of another scheme without secretRef is Ready=False (SecretRequired) and its deliveries wait.',
      }),
    signedContent: z
      .enum(HEX_SIGNED_CONTENT)
      .default("TimestampAndBody")
      .meta({
        description:
          'What the signature covers. TimestampAndBody: HMACSHA256Hex signs "<x-webhook-timestamp>.<body>", so a receiver can refuse requests older than its tolerance (StandardWebhooks always signs "<id>.<timestamp>.<body>" and takes only this value). LegacyBodyOnly, HMACSHA256Hex only: the body alone, for receivers written for the earlier form; the timestamp is then unsigned and a captured request verifies forever.',
      }),
  }),
  { description: "How requests are signed." },
  [
    {
      rule: "!has(self.signedContent) || self.signedContent != 'LegacyBodyOnly' || (has(self.scheme) && self.scheme == 'HMACSHA256Hex')",
      message: 'signedContent LegacyBodyOnly applies to scheme HMACSHA256Hex only (StandardWebhooks always signs "<id>.<timestamp>.<body>")',
      fieldPath: ".signedContent",
      check: (s) => s.signedContent !== "LegacyBodyOnly" || s.scheme === "HMACSHA256Hex",
    },
  ],
);

export const retrySchema = withRules(
  z.object({
    maxAttempts: int(1, 50, "Attempts in all, the first try included.").default(6),
    initialBackoff: duration("10ms", "1h", "Delay after the first failed attempt.").default("1s"),
    multiplier: int(1, 10, "Each delay is the previous one times this.").default(2),
    maxBackoff: duration("10ms", "24h", "Upper bound of any delay.").default("30s"),
    jitterPercent: int(0, 100, "Each delay is moved at random by up to this percentage, so retries from many deliveries spread out.").default(10),
    respectRetryAfter: z
      .boolean()
      .default(true)
      .meta({ description: "Honour a Retry-After header on 429 and 503: the next delay is never shorter than it (capped at 1h)." }),
  }),
  { description: "Exponential backoff with jitter between attempts: initialBackoff * multiplier^n, capped at maxBackoff." },
  [
    {
      // Malformed durations are left to their own pattern (one clear message each).
      rule: `!has(self.initialBackoff) || !has(self.maxBackoff) || !${celIsDuration("self.initialBackoff")} || !${celIsDuration("self.maxBackoff")} || duration(self.maxBackoff) >= duration(self.initialBackoff)`,
      message: "maxBackoff must be greater than or equal to initialBackoff",
      fieldPath: ".maxBackoff",
      check: (r) => {
        const initial = safeDuration(r.initialBackoff);
        const max = safeDuration(r.maxBackoff);
        return initial === undefined || max === undefined || max >= initial;
      },
    },
  ],
);

export const circuitBreakerSchema = z
  .object({
    failureThreshold: int(1, 100, "Consecutive failed attempts that open the breaker. Default: WEBHOOK_CB_FAILURE_THRESHOLD.").optional(),
    successThreshold: int(1, 20, "Successful probes in HalfOpen that close the breaker. Default: WEBHOOK_CB_SUCCESS_THRESHOLD.").optional(),
    cooldown: duration("1s", "300s", "How long the breaker stays Open before one probe is let through. Default: WEBHOOK_CB_TIMEOUT_MS.").optional(),
    whenOpen: z
      .enum(["Defer", "DeadLetter"])
      .default("Defer")
      .meta({
        description:
          "Defer: deliveries wait for the breaker to close without spending an attempt. DeadLetter: they are dead-lettered at once with reason BreakerOpen.",
      }),
  })
  .meta({ description: "Per-endpoint circuit breaker: a sick endpoint costs almost nothing and does not burn retry budgets." });

export const rateLimitSchema = z
  .object({
    perSecond: int(1, 10000, "Sustained requests per second to this endpoint."),
    burst: int(1, 10000, "Requests allowed at once after a quiet period. Default: perSecond.").optional(),
  })
  .meta({ description: "Token bucket limiting the request rate to this endpoint." });

export const deadLetterSchema = z
  .object({
    maxEntries: int(1, 1_000_000, "Dead letters kept for this subscription; at the limit the oldest is deleted to make room.").default(10000),
    maxReplays: int(0, 100, "Failed replays after which a dead letter is Discarded with reason Poison.").default(5),
  })
  .meta({ description: "The dead-letter store of this subscription." });

export const retentionSchema = z
  .object({
    succeeded: duration("0s", "8760h", "Delete Succeeded deliveries this long after they finish.").default("1h"),
    deadLettered: duration("0s", "8760h", "Delete DeadLettered and Discarded deliveries this long after they finish.").default("720h"),
  })
  .meta({ description: "How long finished deliveries are kept." });

const headerNamePattern = "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$";
/** What a header value may hold: HTAB and printable ASCII (no control characters, no line breaks, no non-ASCII). */
const headerValuePattern = "^[\\t\\x20-\\x7e]*$";

const celList = (names: readonly string[]) => `[${names.map((h) => `'${h}'`).join(", ")}]`;
const isReserved = (k: string) => (RESERVED_HEADERS as readonly string[]).includes(k.toLowerCase());
const isConnectionHeader = (k: string) => (CONNECTION_HEADERS as readonly string[]).includes(k.toLowerCase()) || k.toLowerCase().startsWith(CONNECTION_HEADER_PREFIX);
const celConnectionHeader = (k: string) => `(${k}.lowerAscii() in ${celList(CONNECTION_HEADERS)} || ${k}.lowerAscii().startsWith('${CONNECTION_HEADER_PREFIX}'))`;
const firstKey = (h: Record<string, string>, bad: (k: string) => boolean) => Object.keys(h).find(bad) ?? "";

const RESERVED_WHY = `Hookline sets it (reserved: ${RESERVED_HEADERS.join(", ")})`;
const CONNECTION_WHY = `it controls the connection or the message framing, which the HTTP client owns, and every request would be refused (${CONNECTION_HEADERS.join(", ")}, ${CONNECTION_HEADER_PREFIX}*)`;
const VALUE_WHY = "its value has a character other than tab and printable ASCII (control characters, line breaks and non-ASCII are refused: the HTTP client would refuse every request)";

export const headersSchema = withRules(
  z.record(z.string(), z.string().max(4096)),
  { description: "Static headers added to every request.", maxProperties: 32 },
  [
    {
      rule: `self.all(k, k.matches("${headerNamePattern}"))`,
      message: "header names must be HTTP tokens (letters, digits and !#$%&'*+.^_`|~-)",
      check: (h) => Object.keys(h).every((k) => new RegExp(headerNamePattern).test(k)),
    },
    {
      rule: `self.all(k, !(k.lowerAscii() in ${celList(RESERVED_HEADERS)}))`,
      message: `headers may not set ${RESERVED_HEADERS.join(", ")}: Hookline sets them`,
      messageExpression: `'header "' + self.filter(k, k.lowerAscii() in ${celList(RESERVED_HEADERS)})[0] + '" may not be set: ${RESERVED_WHY}'`,
      check: (h) => !Object.keys(h).some(isReserved),
      describe: (h) => `header "${firstKey(h, isReserved)}" may not be set: ${RESERVED_WHY}`,
    },
    {
      rule: `self.all(k, !${celConnectionHeader("k")})`,
      message: `headers may not set ${CONNECTION_HEADERS.join(", ")} or ${CONNECTION_HEADER_PREFIX}*: the HTTP client owns them`,
      messageExpression: `'header "' + self.filter(k, ${celConnectionHeader("k")})[0] + '" may not be set: ${CONNECTION_WHY}'`,
      check: (h) => !Object.keys(h).some(isConnectionHeader),
      describe: (h) => `header "${firstKey(h, isConnectionHeader)}" may not be set: ${CONNECTION_WHY}`,
    },
    {
      rule: `self.all(k, self[k].matches('${headerValuePattern}'))`,
      message: "header values may only contain tab and printable ASCII characters (no control characters, line breaks or non-ASCII)",
      messageExpression: `'header "' + self.filter(k, !self[k].matches('${headerValuePattern}'))[0] + '": ${VALUE_WHY}'`,
      check: (h) => Object.values(h).every((v) => new RegExp(headerValuePattern).test(v)),
      describe: (h) => `header "${firstKey(h, (k) => !new RegExp(headerValuePattern).test(h[k]!))}": ${VALUE_WHY}`,
    },
  ],
).refine((h) => Object.keys(h).length <= 32, { message: "at most 32 headers" });

// ---------------------------------------------------------------------------------------------
// Receiver credentials: header values, a client certificate, a private CA and OAuth2 client
// credentials, each read from a Secret in the subscription's namespace (never written in the
// spec), and an egress proxy. Whoever creates a subscription must be allowed to read every
// Secret it names: the chart's ValidatingAdmissionPolicy checks it (see src/api/admission.ts).

export const secretKeyRefSchema = z
  .object({
    name: objectName("Name of a Secret in the subscription's namespace."),
    key: secretKey("Key in the Secret."),
  })
  .meta({ description: "One key of a Secret in the subscription's namespace." });

/** Longest value a header may take, from the spec or from a Secret. */
export const MAX_HEADER_VALUE_LENGTH = 4096;
export const MAX_HEADERS_FROM = 32;

const headerFromNameSchema = withRules(
  z.string().min(1).max(256).regex(new RegExp(headerNamePattern), { message: "header names must be HTTP tokens (letters, digits and !#$%&'*+.^_`|~-)" }),
  { description: "The header's name (an HTTP token). Neither a header Hookline sets nor one about the connection." },
  [
    {
      rule: `!(self.lowerAscii() in ${celList(RESERVED_HEADERS)})`,
      message: `headersFrom may not set ${RESERVED_HEADERS.join(", ")}: Hookline sets them`,
      messageExpression: `'header "' + self + '" may not be set: ${RESERVED_WHY}'`,
      check: (k) => !isReserved(k),
      describe: (k) => `header "${k}" may not be set: ${RESERVED_WHY}`,
    },
    {
      rule: `!${celConnectionHeader("self")}`,
      message: `headersFrom may not set ${CONNECTION_HEADERS.join(", ")} or ${CONNECTION_HEADER_PREFIX}*: the HTTP client owns them`,
      messageExpression: `'header "' + self + '" may not be set: ${CONNECTION_WHY}'`,
      check: (k) => !isConnectionHeader(k),
      describe: (k) => `header "${k}" may not be set: ${CONNECTION_WHY}`,
    },
  ],
);

export const headerFromSchema = z
  .object({
    name: headerFromNameSchema,
    secretKeyRef: secretKeyRefSchema,
  })
  .meta({ description: "A header whose value is read from a Secret." });

const lowerNames = (list: Array<{ name: string }>) => list.map((h) => h.name.toLowerCase());

export const headersFromSchema = withRules(
  z.array(headerFromSchema).max(MAX_HEADERS_FROM),
  {
    description: `Headers whose values are read from Secrets in the subscription's namespace (re-read within 30 s of a change). A value must be 1..${MAX_HEADER_VALUE_LENGTH} characters of tab and printable ASCII; otherwise the subscription is Ready=False and its deliveries wait. Values never appear in logs, status, Events or metrics.`,
  },
  [
    {
      rule: "self.all(h, self.filter(o, o.name.lowerAscii() == h.name.lowerAscii()).size() == 1)",
      message: "headersFrom names must be unique (case-insensitive)",
      check: (list) => new Set(lowerNames(list)).size === list.length,
      describe: (list) => `headersFrom names must be unique (case-insensitive): header "${list.find((h, i) => lowerNames(list).indexOf(h.name.toLowerCase()) !== i)?.name ?? ""}" is listed more than once`,
    },
  ],
);

export const tlsSchema = withRules(
  z.object({
    clientCertificateSecretRef: z
      .object({ name: objectName("Name of a kubernetes.io/tls Secret (tls.crt, tls.key) in the subscription's namespace, e.g. one cert-manager keeps renewed.") })
      .optional()
      .meta({ description: "The client certificate (and its chain) and private key presented to the endpoint. A renewed certificate is used within 30 s, without a restart." }),
    caBundleSecretRef: z
      .object({
        name: objectName("Name of a Secret in the subscription's namespace."),
        key: secretKey("Key holding one or more PEM certificates.").default("ca.crt"),
      })
      .optional()
      .meta({ description: "The CA certificates (PEM) the endpoint's server certificate must chain to. They replace the public CAs for this endpoint: only certificates they issued are accepted." }),
  }),
  { description: "TLS towards the endpoint (the url must be https://)." },
  [
    {
      rule: "has(self.clientCertificateSecretRef) || has(self.caBundleSecretRef)",
      message: "tls needs clientCertificateSecretRef, caBundleSecretRef or both",
      check: (t) => t.clientCertificateSecretRef !== undefined || t.caBundleSecretRef !== undefined,
    },
  ],
);

/** An OAuth2 scope token (RFC 6749 section 3.3). */
const SCOPE_PATTERN = "^[\\x21\\x23-\\x5b\\x5d-\\x7e]+$";

/** CEL and TypeScript: an absolute http(s) URL with a host. */
const celHttpUrl = (e: string) => `isURL(${e}) && url(${e}).getScheme() in ['http', 'https'] && url(${e}).getHostname() != ''`;
function isHttpUrl(u: string): boolean {
  try {
    const parsed = new URL(u);
    return (parsed.protocol === "http:" || parsed.protocol === "https:") && parsed.hostname !== "";
  } catch {
    return false;
  }
}
function hasUserInfo(u: string): boolean {
  try {
    const parsed = new URL(u);
    return parsed.username !== "" || parsed.password !== "";
  } catch {
    return false;
  }
}
const USER_INFO_PATTERN = "^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@";

export const oauth2Schema = z
  .object({
    tokenURL: withRules(
      z.string().min(1).max(2048),
      { description: "The token endpoint. https, or http only to addresses the operator allows in WEBHOOK_ALLOWED_NETWORKS; reached through the same network guard, proxy and timeout as the endpoint." },
      [{ rule: celHttpUrl("self"), message: "tokenURL must be an absolute http:// or https:// URL with a host", check: isHttpUrl }],
    ),
    clientIdSecretRef: secretKeyRefSchema.meta({ description: "The client id, from a Secret in the subscription's namespace." }),
    clientSecretSecretRef: secretKeyRefSchema.meta({ description: "The client secret, from a Secret in the subscription's namespace." }),
    scopes: z
      .array(z.string().min(1).max(256).regex(new RegExp(SCOPE_PATTERN), { message: "must be an OAuth2 scope token (printable ASCII without spaces, quotes or backslashes)" }))
      .max(32)
      .optional()
      .meta({ description: "Scopes asked for (the scope parameter, space-separated).", "x-kubernetes-list-type": "set" }),
    audience: z.string().min(1).max(2048).optional().meta({ description: "Sent as the audience parameter, for token endpoints that need one (Auth0, RFC 8693 style)." }),
    clientAuthentication: z
      .enum(["ClientSecretBasic", "ClientSecretPost"])
      .default("ClientSecretBasic")
      .meta({ description: "How the client authenticates to the token endpoint: ClientSecretBasic (HTTP Basic, RFC 6749 section 2.3.1) or ClientSecretPost (client_id and client_secret in the form)." }),
  })
  .meta({
    description:
      "OAuth2 client credentials grant (RFC 6749 section 4.4): requests carry Authorization: Bearer <token>. A token is kept until shortly before it expires; a 401 from the endpoint fetches a new one and sends the request once more, within the same attempt.",
  });

export const proxySchema = z
  .object({
    url: withRules(
      z.string().min(1).max(2048),
      { description: "http://host:port or https://host:port of an HTTP CONNECT proxy. Wins over the operator's HTTPS_PROXY/HTTP_PROXY/NO_PROXY." },
      [
        { rule: celHttpUrl("self"), message: "proxy url must be an absolute http:// or https:// URL with a host", check: isHttpUrl },
        {
          rule: `!self.matches('${USER_INFO_PATTERN}')`,
          message: "proxy url may not hold credentials (user:password@): everyone who may read the subscription would see them",
          check: (u) => !hasUserInfo(u),
        },
      ],
    ),
  })
  .meta({ description: "Send this subscription's requests (and its OAuth2 token requests) through an HTTP CONNECT proxy, e.g. for a static egress address. The network guard checks both the proxy's address and the endpoint's." });

export const orderingSchema = z
  .object({
    key: withRules(
      z.string().min(1).max(ORDERING_KEY_MAX_LENGTH),
      {
        description: `What orders deliveries: "${EVENT_TYPE_KEY}" (the delivery's spec.eventType), or a JSONPath into the payload such as $.customer.id, $.items[0].sku or $['order-id'] (steps .name, ['name'] and [index] only, 1 to ${ORDERING_KEY_MAX_STEPS}). Deliveries with the same value go one at a time, oldest first (creation time, then name with numbers compared as numbers); other values in parallel; a delivery whose payload has no value there is not ordered.`,
      },
      [
        {
          rule: `self == '${EVENT_TYPE_KEY}' || self.matches(r"${ORDERING_PATH_PATTERN}")`,
          message: `ordering.key must be "${EVENT_TYPE_KEY}" or a JSONPath such as $.customer.id, $.items[0].sku or $['order-id']: only .name, ['name'] and [index] steps, 1 to ${ORDERING_KEY_MAX_STEPS}, no wildcards, filters or ..`,
          check: isOrderingKey,
        },
      ],
    ),
  })
  .meta({
    description:
      "Ordered delivery per key: at most one delivery per key value in flight, the next one waiting until the previous is final. A dead letter blocks its key until it is replayed successfully, discarded or deleted; the waiting deliveries say so in their Succeeded condition (OrderingWait, OrderingBlocked).",
  });

const celHeaderIn = (list: string, name: string) => `${list}.exists(k, k.lowerAscii() == ${name})`;

/** A CEL expression the operator compiles (spec.filter, spec.transform: core/filter.ts), at most FILTER_MAX_LENGTH characters. */
const celExpression = (description: string) => z.string().min(1).max(FILTER_MAX_LENGTH).optional().meta({ description });

export const subscriptionSpecSchema = withRules(
  z.object({
    url: withRules(
      z.string().min(1).max(2048),
      {
        description:
          "Endpoint that receives the POSTs. https, or http only to addresses the operator allows in WEBHOOK_ALLOWED_NETWORKS. Redirects are not followed.",
      },
      [
        {
          rule: "isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",
          message: "url must be an absolute http:// or https:// URL with a host",
          check: (u) => {
            try {
              const parsed = new URL(u);
              return (parsed.protocol === "http:" || parsed.protocol === "https:") && parsed.hostname !== "";
            } catch {
              return false;
            }
          },
        },
      ],
    ),
    eventTypes: withRules(
      z.array(z.string().min(1).max(256).regex(new RegExp(EVENT_TYPE_PATTERN))).max(100),
      {
        description: 'Event types to deliver: exact names, a trailing wildcard such as "order.*", or "*" (all). Omitted: all.',
        "x-kubernetes-list-type": "set",
      },
      [],
    ).optional(),
    secretRef: secretRefSchema.optional(),
    signature: signatureSchema.default({ scheme: "StandardWebhooks", signedContent: "TimestampAndBody" }),
    headers: headersSchema.optional(),
    headersFrom: headersFromSchema.optional(),
    tls: tlsSchema.optional(),
    oauth2: oauth2Schema.optional(),
    proxy: proxySchema.optional(),
    timeout: duration("100ms", "120s", "Timeout of one attempt, from connect to the response headers. Default: WEBHOOK_DELIVERY_TIMEOUT_MS.").optional(),
    retry: retrySchema.default({ maxAttempts: 6, initialBackoff: "1s", multiplier: 2, maxBackoff: "30s", jitterPercent: 10, respectRetryAfter: true }),
    circuitBreaker: circuitBreakerSchema.default({ whenOpen: "Defer" }),
    maxInFlight: int(1, 1000, "Concurrent requests to this endpoint.").default(10),
    rateLimit: rateLimitSchema.optional(),
    maxPending: int(
      1,
      1_000_000,
      "Deliveries of this subscription waiting to be delivered (Pending or Retrying) at which the publish doors refuse new events for it (HTTP 429 with Retry-After) until the backlog shrinks. A delivery created directly past it waits its turn (condition Succeeded=Unknown, reason BacklogFull). In stream mode, an ordered subscription hands no more events over while it has this many (1000 when omitted); they wait in the stream. Omitted: no cap.",
    ).optional(),
    deadLetter: deadLetterSchema.default({ maxEntries: 10000, maxReplays: 5 }),
    retention: retentionSchema.default({ succeeded: "1h", deadLettered: "720h" }),
    paused: z.boolean().default(false).meta({ description: "Hold every delivery of this subscription until unpaused." }),
    ordering: orderingSchema.optional(),
    filter: celExpression(
          'A CEL expression over the event that must be true for this subscription to get it, e.g. data.amount.value > 1000 && data.currency == "EUR". It sees data (the payload) and event (event.id, event.type, event.namespace, event.data; type and namespace are reserved words in CEL). Evaluated when an event is published (a WebhookDelivery created directly is not filtered); false: the event is skipped for this subscription. An event the filter fails on (a missing field: use has(data.x)), or whose evaluation would cost more than the budget, is skipped too and counted (webhook_events_filtered_total{result="error"}). One that does not compile makes the subscription Ready=False (InvalidFilter, naming the position), and it gets no events until fixed.',
    ),
    notify: z
      .object({
        subscriptionRef: z.object({ name: objectName("A WebhookSubscription in the same namespace that receives the notifications (not this one, nor one with this url).") }),
        events: z
          .array(z.enum(Object.keys(NOTIFY_EVENTS) as [NotifyEvent, ...NotifyEvent[]]))
          .max(4)
          .optional()
          .meta({ description: "Which: endpoint.unhealthy (health Degraded or Disabled), endpoint.breaker_opened, endpoint.throttled (a Retry-After hold began), delivery.dead_lettered. Omitted: all." }),
      })
      .optional()
      .meta({
        description:
          "Tell the owner when this endpoint fails: each change of state (not each attempt) becomes one signed event (type hookline.endpoint.unhealthy, hookline.endpoint.breaker_opened, hookline.endpoint.throttled or hookline.delivery.dead_lettered) delivered through the subscription named here, with its own retries, breaker, signature and dead letters. Never sent to this subscription itself or to one with the same url; a notification's own failure never notifies.",
      }),
    transform: celExpression(
          'A CEL expression that builds the JSON body sent to this endpoint from the event, e.g. {"text": "Order " + string(data.order) + " paid"}. It sees data and event as spec.filter does; the result (a map, a list or a value) is serialized as JSON, at most 256 KiB, and signed like any body. Applied when each attempt is sent: the delivery keeps the original event, and a replay transforms again with the current expression. An event it fails on (a missing field, over the cost budget, a value JSON cannot hold) is dead-lettered at once (PermanentFailure, the error in lastAttempt), replayable once fixed. One that does not compile makes the subscription Ready=False (InvalidTransform) and its deliveries wait (InvalidSubscription).',
    ),
  }),
  { description: "Where and how to deliver webhooks for one endpoint." },
  [
    {
      rule: `!has(self.headers) || !has(self.headersFrom) || self.headersFrom.all(h, !${celHeaderIn("self.headers", "h.name.lowerAscii()")})`,
      message: "a header may be set in headers or in headersFrom, not both",
      fieldPath: ".headersFrom",
      check: (s) => !s.headers || !s.headersFrom || !s.headersFrom.some((h) => Object.keys(s.headers!).some((k) => k.toLowerCase() === h.name.toLowerCase())),
      describe: (s) => `a header may be set in headers or in headersFrom, not both: header "${s.headersFrom?.find((h) => Object.keys(s.headers ?? {}).some((k) => k.toLowerCase() === h.name.toLowerCase()))?.name ?? ""}" is in both`,
    },
    {
      rule: `!has(self.oauth2) || ((!has(self.headers) || !${celHeaderIn("self.headers", "'authorization'")}) && (!has(self.headersFrom) || !self.headersFrom.exists(h, h.name.lowerAscii() == 'authorization')))`,
      message: "with oauth2, Hookline sets the Authorization header: remove it from headers and headersFrom",
      fieldPath: ".oauth2",
      check: (s) => !s.oauth2 || (!Object.keys(s.headers ?? {}).some((k) => k.toLowerCase() === "authorization") && !(s.headersFrom ?? []).some((h) => h.name.toLowerCase() === "authorization")),
    },
    {
      rule: "!has(self.secretRef) || !has(self.signature) || !has(self.signature.scheme) || self.signature.scheme != 'None'",
      message: "signature.scheme None sends unsigned requests: remove secretRef, or choose StandardWebhooks or HMACSHA256Hex",
      fieldPath: ".secretRef",
      check: (s) => !s.secretRef || s.signature.scheme !== "None",
    },
    {
      rule: "!has(self.tls) || !isURL(self.url) || url(self.url).getScheme() == 'https'",
      message: "tls applies to https endpoints: the url must be https://",
      fieldPath: ".tls",
      check: (s) => !s.tls || !isHttpUrl(s.url) || new URL(s.url).protocol === "https:",
    },
  ],
);

export const breakerStatusSchema = z
  .object({
    state: z.enum(["Closed", "Open", "HalfOpen"]).meta({ description: "Closed: requests flow. Open: none are sent until nextProbeAt. HalfOpen: one probe at a time." }),
    consecutiveFailures: z.int().min(0).meta({ description: "Failed attempts in a row." }),
    openedAt: timestamp("When the breaker last opened.").optional(),
    nextProbeAt: timestamp("When an Open breaker lets one probe through.").optional(),
  })
  .meta({ description: "The endpoint's circuit breaker, written on every transition." });

export const healthStatusSchema = z
  .object({
    state: z.enum(["Healthy", "Degraded", "Disabled"]).meta({ description: "Degraded after 3 consecutive failures; Disabled after 10 or on 410 Gone." }),
    reason: z.string().optional().meta({ description: "Why the endpoint is Degraded or Disabled (Failures, Gone)." }),
    consecutiveFailures: z.int().min(0).meta({ description: "Failed attempts in a row." }),
    lastSuccessAt: timestamp("Last successful attempt.").optional(),
    lastFailureAt: timestamp("Last failed attempt.").optional(),
    nextProbeAt: timestamp("When a Disabled endpoint is probed next.").optional(),
    totalAttempts: z.int().min(0).meta({ description: "Attempts made to this endpoint." }),
    totalFailures: z.int().min(0).meta({ description: "Failed attempts to this endpoint." }),
  })
  .meta({ description: "Health of the endpoint, rolled up from attempts." });

export const deliveryCountsSchema = z
  .object({
    pending: z.int().min(0).meta({ description: "Deliveries not finished yet (Pending or Retrying)." }),
    succeeded: z.int().min(0).meta({ description: "Deliveries that succeeded, counted since the subscription was created (rolled up every few seconds; a leader killed without a drain loses the increments since its last rollup: webhook_deliveries_finished_total is the exact rate)." }),
    deadLettered: z.int().min(0).meta({ description: "Dead letters held now." }),
    discarded: z.int().min(0).meta({ description: "Deliveries discarded, counted since the subscription was created (rolled up like succeeded)." }),
  })
  .meta({ description: "Delivery counts for this subscription." });

export const subscriptionReplayStatusSchema = z
  .object({
    reason: z.string().max(REPLAY_REASON_MAX_LENGTH).meta({ description: "The reason given in the hookline.dev/replay-dead-letters annotation." }),
    requestedAt: timestamp("When the replay was requested."),
    finishedAt: timestamp("When it finished; absent while it runs.").optional(),
    concurrency: z.int().min(1).max(50).optional().meta({ description: "Replays run at once." }),
    attempted: z.int().min(0).meta({ description: "Dead letters replayed or deduped: succeeded + failed + deduped." }),
    succeeded: z.int().min(0).meta({ description: "Replays that were delivered." }),
    failed: z.int().min(0).meta({ description: "Replays that failed (back to DeadLettered, or Discarded as Poison)." }),
    deduped: z.int().min(0).meta({ description: "Dead letters not sent because an equal delivery (same event id and payload) was replayed by this replay or is pending; counted in attempted too." }),
    skipped: z.int().min(0).optional().meta({ description: "Dead letters not replayed (changed or deleted meanwhile, or the subscription could not take them)." }),
    id: z.string().optional().meta({ description: "Identifies this bulk replay in each delivery's status.lastReplay.requestId." }),
    cursor: z.string().optional().meta({ description: "Progress marker: the last dead letter handled, so a restarted operator resumes." }),
    inFlight: z.array(z.string()).max(50).optional().meta({ description: "Dead letters of the batch being replayed, so a restart neither repeats nor loses them." }),
  })
  .meta({ description: "The last bulk replay of this subscription's dead letters." });

export const endpointResetStatusSchema = z
  .object({
    reason: z.string().max(REPLAY_REASON_MAX_LENGTH).meta({ description: "The reason given in the hookline.dev/reset-endpoint annotation." }),
    at: timestamp("When the operator closed the breaker and re-enabled the endpoint."),
    breaker: z.enum(["Closed", "Open", "HalfOpen"]).meta({ description: "The breaker state before the reset." }),
    health: z.enum(["Healthy", "Degraded", "Disabled"]).meta({ description: "The endpoint health before the reset." }),
  })
  .meta({ description: "The last reset of the endpoint (annotation hookline.dev/reset-endpoint)." });

export const throttleStatusSchema = z
  .object({
    since: timestamp("When the endpoint asked to slow down."),
    until: timestamp("No new attempt to the endpoint before this."),
    status: z.int().min(100).max(599).meta({ description: "The status that asked for it (429 or 503)." }),
    retryAfter: z.string().max(64).meta({ description: "Its Retry-After header." }),
  })
  .meta({ description: "The endpoint's Retry-After hold: set while the endpoint asked for no requests (429 or 503 with Retry-After), so a new leader keeps it." });

export const subscriptionStatusSchema = z
  .object({
    observedGeneration: z.int().min(0).optional().meta({ description: "The .metadata.generation the operator last acted on." }),
    conditions: conditions(
      "Ready: the operator accepted the spec and its Secret. EndpointHealthy: the endpoint answers. EndpointThrottled: True while the endpoint's Retry-After holds every delivery (since the transition, until the time in the message). ConfigurationAdvice: True while settings work against each other: reason CooldownShorterThanBackoff (the breaker cooldown shorter than the largest retry delay); it never makes the subscription not Ready.",
    ).optional(),
    breaker: breakerStatusSchema.optional(),
    health: healthStatusSchema.optional(),
    deliveries: deliveryCountsSchema.optional(),
    lastReplay: subscriptionReplayStatusSchema.optional(),
    lastReset: endpointResetStatusSchema.optional(),
    throttle: throttleStatusSchema.optional(),
  })
  .meta({ description: "Observed state of the subscription." });

export type SubscriptionSpecInput = z.input<typeof subscriptionSpecSchema>;
export type SubscriptionSpec = z.output<typeof subscriptionSpecSchema>;
export type SubscriptionStatus = z.output<typeof subscriptionStatusSchema>;
export type BreakerStatus = z.output<typeof breakerStatusSchema>;
export type HealthStatus = z.output<typeof healthStatusSchema>;
export type SubscriptionReplayStatus = z.output<typeof subscriptionReplayStatusSchema>;
