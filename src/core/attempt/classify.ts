// Classification of one attempt's outcome (a response status or a transport error) into what
// the delivery does next and the `reason` label of webhook_delivery_attempts_total.
// Errors are classified by their stable `code` (and `name`), never by message text.

/** Every value the `reason` metric label can take: a closed set, so label cardinality is bounded. */
export const METRIC_REASONS = [
  "http_2xx",
  "http_3xx",
  "http_408",
  "http_410",
  "http_429",
  "http_4xx",
  "http_5xx",
  "http_other",
  "timeout",
  "network",
  "dns",
  "tls",
  "blocked",
  "circuit_open",
  "interrupted",
  "invalid_request",
  "token_endpoint",
] as const;

export type MetricReason = (typeof METRIC_REASONS)[number];

/**
 * delivered: 2xx, done. retry: schedule another attempt (or dead-letter as Exhausted when none
 * are left). gone: 410, dead-letter at once and disable the endpoint. permanent: dead-letter at
 * once (PermanentFailure, or Blocked when reason is "blocked"; "invalid_request" is our own
 * request that could not be built, e.g. a header the HTTP client refuses).
 */
export type Verdict = "delivered" | "retry" | "gone" | "permanent";

export type AttemptOutcome =
  | { kind: "response"; status: number }
  /** A transport error: pass the innermost error's `code` and `name` (undici wraps causes). */
  | { kind: "error"; code?: string; name?: string };

export interface Classification {
  verdict: Verdict;
  reason: MetricReason;
}

/** The code our network guard gives a connection it refused (WEBHOOK_ALLOWED_NETWORKS). */
export const BLOCKED_ADDRESS_CODE = "HOOKLINE_BLOCKED_ADDRESS";

/**
 * The code of an OAuth2 token endpoint that answered without a usable token (an error status,
 * no access_token): retried like an endpoint error, since a fixed Secret or a recovered token
 * endpoint lets the next attempt through. Transport errors towards it keep their own codes.
 */
export const TOKEN_ENDPOINT_CODE = "HOOKLINE_OAUTH2_TOKEN";

/** The code the sender gives a subscription URL it cannot parse. */
export const INVALID_URL_CODE = "HOOKLINE_INVALID_URL";
/** The code the sender gives a request the HTTP client threw on before sending anything. */
export const INVALID_REQUEST_CODE = "HOOKLINE_INVALID_REQUEST";

// Our own request could not be built: the HTTP client refused it before anything was sent (a
// header it does not allow, a value with a control character, a Content-Length that does not
// match the body). Sending it again fails the same way, and it says nothing about the endpoint.
const invalidRequestCodes = new Set([
  INVALID_URL_CODE,
  INVALID_REQUEST_CODE,
  "UND_ERR_INVALID_ARG",
  "UND_ERR_NOT_SUPPORTED",
  "UND_ERR_REQ_CONTENT_LENGTH_MISMATCH",
  "ERR_INVALID_ARG_TYPE",
  "ERR_INVALID_ARG_VALUE",
  "ERR_INVALID_CHAR",
  "ERR_INVALID_HTTP_TOKEN",
  "ERR_HTTP_INVALID_HEADER_VALUE",
]);

const timeoutCodes = new Set([
  "UND_ERR_CONNECT_TIMEOUT",
  "HOOKLINE_PROXY_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "ETIMEDOUT",
]);

// getaddrinfo (EAI_*) and c-ares (node:dns) failure codes.
const dnsCodes = new Set([
  "ENOTFOUND",
  "EAI_AGAIN",
  "EAI_FAIL",
  "EAI_NONAME",
  "EAI_NODATA",
  "EAI_ADDRFAMILY",
  "ENODATA",
  "EFORMERR",
  "ESERVFAIL",
  "ENOTIMP",
  "EREFUSED",
  "EBADQUERY",
  "EBADNAME",
  "EBADFAMILY",
  "EBADRESP",
  "ETIMEOUT",
  "ENONAME",
  "EBADHINTS",
  "ENOTINITIALIZED",
  "ECANCELLED",
]);

// OpenSSL verification codes as Node reports them, plus Node's own TLS codes (ERR_TLS_*,
// ERR_SSL_*) matched by prefix below.
const tlsCodes = new Set([
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "CERT_REVOKED",
  "CERT_UNTRUSTED",
  "CERT_REJECTED",
  "CERT_SIGNATURE_FAILURE",
  "CERT_CHAIN_TOO_LONG",
  "CERT_INVALID",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "UNABLE_TO_DECRYPT_CERT_SIGNATURE",
  "UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY",
  "INVALID_PURPOSE",
  "INVALID_CA",
  "PATH_LENGTH_EXCEEDED",
  "HOSTNAME_MISMATCH",
  // A failed handshake (e.g. "wrong version number" when https meets a plain-http port).
  "EPROTO",
]);
const tlsPrefixes = ["ERR_TLS_", "ERR_SSL_", "CERT_"];

/** Classifies one attempt exactly per the contract's "On the wire" outcome rules. */
export function classify(outcome: AttemptOutcome): Classification {
  return outcome.kind === "response" ? classifyStatus(outcome.status) : classifyError(outcome.code, outcome.name);
}

export function classifyStatus(status: number): Classification {
  if (!Number.isInteger(status)) return { verdict: "permanent", reason: "http_other" };
  if (status >= 200 && status <= 299) return { verdict: "delivered", reason: "http_2xx" };
  if (status === 408) return { verdict: "retry", reason: "http_408" };
  if (status === 429) return { verdict: "retry", reason: "http_429" };
  if (status === 410) return { verdict: "gone", reason: "http_410" };
  if (status >= 500 && status <= 599) return { verdict: "retry", reason: "http_5xx" };
  // Redirects are not followed: a webhook URL that moved must be updated by its owner.
  if (status >= 300 && status <= 399) return { verdict: "permanent", reason: "http_3xx" };
  if (status >= 400 && status <= 499) return { verdict: "permanent", reason: "http_4xx" };
  // 1xx as a final status, or outside 100..599: not HTTP we understand.
  return { verdict: "permanent", reason: "http_other" };
}

function classifyError(code: string | undefined, name: string | undefined): Classification {
  if (code === BLOCKED_ADDRESS_CODE) return { verdict: "permanent", reason: "blocked" };
  if (code !== undefined && invalidRequestCodes.has(code)) return { verdict: "permanent", reason: "invalid_request" };
  // AbortSignal.timeout() rejects with a DOMException named TimeoutError (its numeric code is
  // not a string code); our own abort (drain) with one named AbortError, as does undici's
  // RequestAbortedError (UND_ERR_ABORTED).
  if (name === "TimeoutError" || (code !== undefined && timeoutCodes.has(code))) {
    return { verdict: "retry", reason: "timeout" };
  }
  if (name === "AbortError" || code === "UND_ERR_ABORTED" || code === "ABORT_ERR") {
    return { verdict: "retry", reason: "interrupted" };
  }
  if (code === TOKEN_ENDPOINT_CODE) return { verdict: "retry", reason: "token_endpoint" };
  if (code !== undefined && dnsCodes.has(code)) return { verdict: "retry", reason: "dns" };
  if (code !== undefined && (tlsCodes.has(code) || tlsPrefixes.some((p) => code.startsWith(p)))) {
    return { verdict: "retry", reason: "tls" };
  }
  // ECONNREFUSED, ECONNRESET, EPIPE, EHOSTUNREACH, ENETUNREACH, UND_ERR_SOCKET and anything we
  // do not know: a connection problem, worth another try.
  return { verdict: "retry", reason: "network" };
}

/** Whether a Retry-After header on this status sets the next delay (429 and 503). */
export function isRetryAfterStatus(status: number): boolean {
  return status === 429 || status === 503;
}

/**
 * What the outcome tells the endpoint's breaker and health: one signal per real attempt.
 * - success: 2xx.
 * - gone: 410 (health disables the endpoint; the breaker counts a failure).
 * - failure: every other answer or transport error, including 3xx/4xx: a receiver refusing
 *   every request (a wrong secret's 401s) is unhealthy in the user's eyes.
 * - none: the attempt says nothing about the receiver: interrupted (drain, shutdown: release a
 *   probe instead and resume at once), blocked by our own network policy, never made
 *   (circuit_open), or our own request that could not be built (invalid_request: nothing was
 *   sent, so the endpoint's breaker and health must not pay for our mistake).
 */
export type EndpointSignal = "success" | "failure" | "gone" | "none";

export function endpointSignal(c: Classification): EndpointSignal {
  if (c.reason === "interrupted" || c.reason === "blocked" || c.reason === "circuit_open" || c.reason === "invalid_request") return "none";
  switch (c.verdict) {
    case "delivered":
      return "success";
    case "gone":
      return "gone";
    case "retry":
    case "permanent":
      return "failure";
  }
}

/** The `status` label of webhook_delivery_attempts_total. */
export function attemptStatusLabel(c: Classification): "success" | "failure" {
  return c.verdict === "delivered" ? "success" : "failure";
}
