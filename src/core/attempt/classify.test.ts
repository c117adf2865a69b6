import { describe, it, expect } from "vitest";
import {
  METRIC_REASONS,
  attemptStatusLabel,
  classify,
  endpointSignal,
  isRetryAfterStatus,
  type AttemptOutcome,
  type Classification,
  type EndpointSignal,
  type MetricReason,
  type Verdict,
} from "./classify.js";

describe("classify: responses", () => {
  const table: Array<[number, Verdict, MetricReason]> = [
    [200, "delivered", "http_2xx"],
    [201, "delivered", "http_2xx"],
    [202, "delivered", "http_2xx"],
    [204, "delivered", "http_2xx"],
    [299, "delivered", "http_2xx"],
    [100, "permanent", "http_other"],
    [101, "permanent", "http_other"],
    [199, "permanent", "http_other"],
    [300, "permanent", "http_3xx"],
    [301, "permanent", "http_3xx"],
    [302, "permanent", "http_3xx"],
    [304, "permanent", "http_3xx"],
    [307, "permanent", "http_3xx"],
    [308, "permanent", "http_3xx"],
    [400, "permanent", "http_4xx"],
    [401, "permanent", "http_4xx"],
    [403, "permanent", "http_4xx"],
    [404, "permanent", "http_4xx"],
    [405, "permanent", "http_4xx"],
    [409, "permanent", "http_4xx"],
    [413, "permanent", "http_4xx"],
    [422, "permanent", "http_4xx"],
    [425, "permanent", "http_4xx"],
    [499, "permanent", "http_4xx"],
    [408, "retry", "http_408"],
    [429, "retry", "http_429"],
    [410, "gone", "http_410"],
    [500, "retry", "http_5xx"],
    [501, "retry", "http_5xx"],
    [502, "retry", "http_5xx"],
    [503, "retry", "http_5xx"],
    [504, "retry", "http_5xx"],
    [599, "retry", "http_5xx"],
    [600, "permanent", "http_other"],
    [999, "permanent", "http_other"],
    [0, "permanent", "http_other"],
    [-1, "permanent", "http_other"],
    [200.5, "permanent", "http_other"],
  ];

  it.each(table)("status %d -> %s (%s)", (status, verdict, reason) => {
    expect(classify({ kind: "response", status })).toEqual({ verdict, reason });
  });
});

describe("classify: transport errors", () => {
  const table: Array<[string, AttemptOutcome, Verdict, MetricReason]> = [
    ["undici connect timeout", { kind: "error", code: "UND_ERR_CONNECT_TIMEOUT", name: "ConnectTimeoutError" }, "retry", "timeout"],
    ["undici headers timeout", { kind: "error", code: "UND_ERR_HEADERS_TIMEOUT", name: "HeadersTimeoutError" }, "retry", "timeout"],
    ["undici body timeout", { kind: "error", code: "UND_ERR_BODY_TIMEOUT", name: "BodyTimeoutError" }, "retry", "timeout"],
    ["socket ETIMEDOUT", { kind: "error", code: "ETIMEDOUT" }, "retry", "timeout"],
    ["AbortSignal.timeout", { kind: "error", name: "TimeoutError" }, "retry", "timeout"],
    ["AbortSignal.timeout with a numeric-looking code", { kind: "error", code: "23", name: "TimeoutError" }, "retry", "timeout"],
    ["undici socket error", { kind: "error", code: "UND_ERR_SOCKET", name: "SocketError" }, "retry", "network"],
    ["connection refused", { kind: "error", code: "ECONNREFUSED" }, "retry", "network"],
    ["connection reset", { kind: "error", code: "ECONNRESET" }, "retry", "network"],
    ["broken pipe", { kind: "error", code: "EPIPE" }, "retry", "network"],
    ["host unreachable", { kind: "error", code: "EHOSTUNREACH" }, "retry", "network"],
    ["network unreachable", { kind: "error", code: "ENETUNREACH" }, "retry", "network"],
    ["unknown code", { kind: "error", code: "E_SOMETHING_NEW" }, "retry", "network"],
    ["no code, no name", { kind: "error" }, "retry", "network"],
    ["a plain Error name", { kind: "error", name: "Error" }, "retry", "network"],
    ["DNS name not found", { kind: "error", code: "ENOTFOUND" }, "retry", "dns"],
    ["DNS temporary failure", { kind: "error", code: "EAI_AGAIN" }, "retry", "dns"],
    ["DNS server failure (c-ares)", { kind: "error", code: "ESERVFAIL" }, "retry", "dns"],
    ["DNS no data", { kind: "error", code: "ENODATA" }, "retry", "dns"],
    ["expired certificate", { kind: "error", code: "CERT_HAS_EXPIRED" }, "retry", "tls"],
    ["wrong host name", { kind: "error", code: "ERR_TLS_CERT_ALTNAME_INVALID" }, "retry", "tls"],
    ["self-signed", { kind: "error", code: "DEPTH_ZERO_SELF_SIGNED_CERT" }, "retry", "tls"],
    ["self-signed in chain", { kind: "error", code: "SELF_SIGNED_CERT_IN_CHAIN" }, "retry", "tls"],
    ["unknown issuer", { kind: "error", code: "UNABLE_TO_VERIFY_LEAF_SIGNATURE" }, "retry", "tls"],
    ["OpenSSL alert", { kind: "error", code: "ERR_SSL_TLSV1_ALERT_INTERNAL_ERROR" }, "retry", "tls"],
    ["handshake protocol error", { kind: "error", code: "EPROTO" }, "retry", "tls"],
    ["blocked by the network guard", { kind: "error", code: "HOOKLINE_BLOCKED_ADDRESS" }, "permanent", "blocked"],
    ["blocked wins over any name", { kind: "error", code: "HOOKLINE_BLOCKED_ADDRESS", name: "TimeoutError" }, "permanent", "blocked"],
    ["undici refuses a header (invalid upgrade header)", { kind: "error", code: "UND_ERR_INVALID_ARG", name: "UND_ERR_INVALID_ARG" }, "permanent", "invalid_request"],
    ["undici refuses Expect (not supported)", { kind: "error", code: "UND_ERR_NOT_SUPPORTED" }, "permanent", "invalid_request"],
    ["undici: Content-Length does not match the body", { kind: "error", code: "UND_ERR_REQ_CONTENT_LENGTH_MISMATCH" }, "permanent", "invalid_request"],
    ["Node refuses a header value", { kind: "error", code: "ERR_INVALID_CHAR", name: "TypeError" }, "permanent", "invalid_request"],
    ["Node refuses an argument", { kind: "error", code: "ERR_INVALID_ARG_TYPE" }, "permanent", "invalid_request"],
    ["the subscription URL does not parse", { kind: "error", code: "HOOKLINE_INVALID_URL" }, "permanent", "invalid_request"],
    ["undici aborted", { kind: "error", code: "UND_ERR_ABORTED", name: "AbortError" }, "retry", "interrupted"],
    ["our own abort (DOMException)", { kind: "error", name: "AbortError" }, "retry", "interrupted"],
    ["Node AbortError code", { kind: "error", code: "ABORT_ERR" }, "retry", "interrupted"],
  ];

  it.each(table)("%s", (_name, outcome, verdict, reason) => {
    expect(classify(outcome)).toEqual({ verdict, reason });
  });
});

describe("isRetryAfterStatus", () => {
  it.each([
    [429, true],
    [503, true],
    [500, false],
    [502, false],
    [408, false],
    [200, false],
    [410, false],
  ])("%d -> %s", (status, expected) => {
    expect(isRetryAfterStatus(status)).toBe(expected);
  });
});

describe("endpointSignal", () => {
  const table: Array<[Classification, EndpointSignal]> = [
    [{ verdict: "delivered", reason: "http_2xx" }, "success"],
    [{ verdict: "gone", reason: "http_410" }, "gone"],
    [{ verdict: "retry", reason: "http_5xx" }, "failure"],
    [{ verdict: "retry", reason: "timeout" }, "failure"],
    [{ verdict: "retry", reason: "dns" }, "failure"],
    [{ verdict: "permanent", reason: "http_4xx" }, "failure"],
    [{ verdict: "permanent", reason: "http_3xx" }, "failure"],
    [{ verdict: "retry", reason: "interrupted" }, "none"],
    [{ verdict: "permanent", reason: "blocked" }, "none"],
    [{ verdict: "retry", reason: "circuit_open" }, "none"],
    [{ verdict: "permanent", reason: "invalid_request" }, "none"],
  ];

  it.each(table)("%j -> %s", (c, expected) => {
    expect(endpointSignal(c)).toBe(expected);
  });
});

describe("labels", () => {
  it("every classification uses a declared metric reason", () => {
    const statuses = Array.from({ length: 1_000 }, (_, i) => i);
    for (const status of statuses) {
      expect(METRIC_REASONS).toContain(classify({ kind: "response", status }).reason);
    }
  });

  const labels: Array<[Classification, "success" | "failure"]> = [
    [{ verdict: "delivered", reason: "http_2xx" }, "success"],
    [{ verdict: "retry", reason: "http_5xx" }, "failure"],
    [{ verdict: "gone", reason: "http_410" }, "failure"],
    [{ verdict: "permanent", reason: "blocked" }, "failure"],
  ];

  it.each(labels)("%j has status label %s", (c, label) => {
    expect(attemptStatusLabel(c)).toBe(label);
  });
});
