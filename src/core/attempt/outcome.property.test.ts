// Properties of applyAttempt over whole generated delivery histories (attempt after attempt from
// a fresh delivery until it is final): attempts count exactly the counted attempts; history
// keeps the last 10 and ends with the new record; a 2xx succeeds; 410 is Gone, other
// non-retried statuses PermanentFailure; never more than maxAttempts counted attempts, the last
// retryable failure dead-letters as Exhausted; the next attempt is never before now nor sooner
// than the backoff (Retry-After counting up to 1 h); and every status written parses with the
// CRD's status schema, string limits included, whatever the error text and replay reason.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { deliveryStatusSchema, type DeliveryStatus } from "../../api/delivery.js";
import { fitToSchema } from "../../api/fit.js";
import { subscriptionSpecSchema } from "../../api/subscription.js";
import { RETRY_AFTER_CAP_MS, backoffDelay } from "./backoff.js";
import { classify, classifyStatus } from "./classify.js";
import { clipText } from "../../api/fit.js";
import { historyLimit, applyAttempt, deliveredFinal, type AttemptResult } from "./outcome.js";
import { resolvePolicy, type Policy } from "./policy.js";
import { fromRfc3339, toRfc3339 } from "../rfc3339.js";

const T0 = Date.UTC(2025, 5, 15, 12, 0, 0);
const basePolicy = resolvePolicy(subscriptionSpecSchema.parse({ url: "https://hooks.acme.example/orders" }), {
  deliveryTimeoutMs: 10_000,
  breaker: { failureThreshold: 5, successThreshold: 1, cooldownMs: 60_000 },
});
const policyArb: fc.Arbitrary<Policy> = fc
  .record({
    maxAttempts: fc.integer({ min: 1, max: 15 }),
    initialBackoffMs: fc.integer({ min: 10, max: 3_600_000 }),
    multiplier: fc.integer({ min: 1, max: 10 }),
    maxBackoffMs: fc.integer({ min: 10, max: 86_400_000 }),
    jitterPercent: fc.integer({ min: 0, max: 100 }),
    respectRetryAfter: fc.boolean(),
    maxReplays: fc.integer({ min: 1, max: 5 }),
  })
  .map((g) => ({
    ...basePolicy,
    retry: { maxAttempts: g.maxAttempts, initialBackoffMs: g.initialBackoffMs, multiplier: g.multiplier, maxBackoffMs: Math.max(g.maxBackoffMs, g.initialBackoffMs), jitterPercent: g.jitterPercent, respectRetryAfter: g.respectRetryAfter },
    deadLetter: { ...basePolicy.deadLetter, maxReplays: g.maxReplays },
  }));

/** Error texts as transports produce them, and worse: long, non-ASCII, astral-plane. */
const errorTextArb = fc.oneof(
  fc.constantFrom("connect ECONNREFUSED 10.0.0.1:443", "getaddrinfo ENOTFOUND hooks.acme.example", "Headers Timeout Error"),
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.tuple(fc.constantFrom("x", "é", "漢", "😀"), fc.integer({ min: 500, max: 40_000 })).map(([c, n]) => c.repeat(n)),
);
const retryAfterArb = fc.option(
  fc.oneof(fc.nat(10_000).map(String), fc.integer({ min: -3_600, max: 7_200 }).map((s) => new Date(T0 + s * 1000).toUTCString()), fc.string({ maxLength: 20 })),
  { nil: undefined },
);
const statusCodeArb = fc.oneof(
  fc.constantFrom(200, 204, 408, 410, 429, 500, 503, 301, 400, 404, 422),
  fc.integer({ min: 100, max: 599 }),
);
type Kind = { kind: "response"; status: number; retryAfter: string | undefined } | { kind: "error"; code: string; error: string } | { kind: "interrupted"; error: string };
const attemptKindArb: fc.Arbitrary<Kind> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant("response" as const), status: statusCodeArb, retryAfter: retryAfterArb }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("error" as const),
      code: fc.constantFrom("ECONNREFUSED", "ENOTFOUND", "UND_ERR_HEADERS_TIMEOUT", "CERT_HAS_EXPIRED", "HOOKLINE_BLOCKED_ADDRESS", "EWHATEVER"),
      error: errorTextArb,
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("interrupted" as const), error: errorTextArb }) },
);
const stepArb = fc.record({ kind: attemptKindArb, dt: fc.integer({ min: 0, max: 4_000_000 }), duration: fc.double({ min: 0, max: 120_000, noNaN: true }), random: fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }) });

function attemptOf(k: Kind, now: number, durationMs: number): AttemptResult {
  const startedAt = now - Math.round(durationMs);
  if (k.kind === "response") return { startedAt, durationMs, responseStatus: k.status, ...(k.retryAfter === undefined ? {} : { retryAfter: k.retryAfter }), classification: classifyStatus(k.status) };
  if (k.kind === "error") return { startedAt, durationMs, error: k.error, classification: classify({ kind: "error", code: k.code, name: "Error" }) };
  return { startedAt, durationMs, error: k.error, classification: "interrupted" };
}

/**
 * The schema check of the status as written: the operator's one status writer fits every
 * string and list to its limit (api/fit.ts); reports which paths break it.
 */
function expectValidStatus(status: DeliveryStatus): void {
  const r = deliveryStatusSchema.safeParse(written(status));
  if (!r.success) expect.fail(`status does not parse: ${r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
}

/** Strings holding half of a surrogate pair: the API server would store U+FFFD in their place. */
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
function brokenStrings(value: unknown, path = "status"): string[] {
  if (typeof value === "string") return loneSurrogate.test(value) ? [path] : [];
  if (value && typeof value === "object") return Object.entries(value).flatMap(([k, v]) => brokenStrings(v, `${path}.${k}`));
  return [];
}

const written = (status: DeliveryStatus) => fitToSchema(deliveryStatusSchema, status);

const isTerminal = (s: DeliveryStatus) => s.phase === "Succeeded" || s.phase === "DeadLettered" || s.phase === "Discarded";

describe("applyAttempt (properties)", () => {
  it("over a delivery's whole life: exact counting, history, final phases, never more than maxAttempts, next attempt never early", () => {
    fc.assert(
      fc.property(policyArb, fc.array(stepArb, { minLength: 1, maxLength: 25, size: "max" }), fc.constantFrom<"requeue" | "dead-letter">("requeue", "requeue", "dead-letter"), (policy, steps, interruptedAction) => {
        let status: DeliveryStatus | undefined;
        let now = T0;
        for (const step of steps) {
          if (status && isTerminal(status)) break;
          now += step.dt;
          const attempt = attemptOf(step.kind, now, step.duration);
          const prevAttempts = status?.attempts ?? 0;
          const prevNumber = status?.lastAttempt?.number ?? 0;
          const { status: next, final } = applyAttempt({ status, generation: 1, now, attempt, policy, random: () => step.random, interruptedAction });
          const c = attempt.classification;
          const counted = c === "interrupted" ? 0 : 1;
          // Stream mode asks deliveredFinal alone for a delivered attempt (it keeps no status): exactly applyAttempt's final.
          if (c !== "interrupted" && c.verdict === "delivered") expect(deliveredFinal(attempt)).toEqual(final);
          else {
            expect(deliveredFinal(attempt)).toBeUndefined();
            expect(final?.phase).not.toBe("Succeeded");
          }

          expect(next.attempts).toBe(prevAttempts + counted);
          expect(next.attempts).toBeLessThanOrEqual(policy.retry.maxAttempts);
          expect(next.lastAttempt?.number).toBe(prevNumber + 1);
          // Every attempt so far, up to the policy's limit (maxAttempts + maxReplays, 10..64).
          expect(next.history!.length).toBe(Math.min(prevNumber + 1, historyLimit(policy)));
          expect(next.history!.at(-1)).toEqual({ ...next.lastAttempt, ...(next.lastAttempt?.error !== undefined ? { error: clipText(next.lastAttempt.error, 256) } : {}) });
          expectValidStatus(next);

          if (c === "interrupted") {
            if (interruptedAction === "dead-letter") expect(next.deadLetter?.reason).toBe("Drain");
            else expect(fromRfc3339(next.nextAttemptAt)).toBe(now);
          } else if (c.verdict === "delivered") {
            expect(next).toMatchObject({ phase: "Succeeded", finishedAt: toRfc3339(now) });
            expect(next.nextAttemptAt).toBeUndefined();
            expect(final?.phase).toBe("Succeeded");
          } else if (c.verdict === "gone") {
            expect(next).toMatchObject({ phase: "DeadLettered", deadLetter: { reason: "Gone" }, finishedAt: toRfc3339(now) });
          } else if (c.verdict === "permanent") {
            expect(next).toMatchObject({ phase: "DeadLettered", deadLetter: { reason: c.reason === "blocked" ? "Blocked" : "PermanentFailure" } });
            if (attempt.responseStatus !== undefined && attempt.responseStatus >= 400 && attempt.responseStatus <= 499) expect(next.deadLetter?.reason).toBe("PermanentFailure");
          } else if (next.attempts! >= policy.retry.maxAttempts) {
            expect(next).toMatchObject({ phase: "DeadLettered", deadLetter: { reason: "Exhausted" }, finishedAt: toRfc3339(now) });
          } else {
            expect(next.phase).toBe("Retrying");
            const at = fromRfc3339(next.nextAttemptAt)!;
            const backoff = backoffDelay(next.attempts!, policy.retry, () => step.random);
            expect(at).toBeGreaterThanOrEqual(now + backoff);
            expect(at - now).toBeLessThanOrEqual(Math.max(backoff, RETRY_AFTER_CAP_MS));
          }
          status = next;
        }
      }),
      { numRuns: 150 },
    );
  });

  it("one failure with any error text (long, non-ASCII) gives a status the schema accepts, whatever it leads to", () => {
    // Isolates each final phase's message from the rest of a history.
    fc.assert(
      fc.property(policyArb, attemptKindArb, fc.nat(14), (policy, kind, earlier) => {
        const prev: DeliveryStatus | undefined = earlier === 0 ? undefined : { phase: "Retrying", attempts: Math.min(earlier, policy.retry.maxAttempts - 1) };
        expectValidStatus(applyAttempt({ status: prev, generation: 1, now: T0, attempt: attemptOf(kind, T0, 5), policy, random: () => 0.5 }).status);
      }),
      { numRuns: 200 },
    );
  });

  it("never writes half of a surrogate pair: cut error texts end on a whole character", () => {
    const astralArb = fc.tuple(fc.integer({ min: 0, max: 1_100 }), fc.constantFrom("😀", "𝄞")).map(([n, c]) => "a".repeat(n) + c.repeat(600));
    fc.assert(
      fc.property(policyArb, astralArb, fc.constantFrom("ECONNREFUSED", "HOOKLINE_BLOCKED_ADDRESS", "CERT_HAS_EXPIRED"), (policy, error, code) => {
        const { status } = applyAttempt({ status: undefined, generation: 1, now: T0, attempt: attemptOf({ kind: "error", code, error }, T0, 5), policy, random: () => 0.5 });
        expect(brokenStrings(written(status))).toEqual([]);
      }),
    );
  });

  it("a 410 gives DeadLettered(Gone) and any other non-retried 4xx PermanentFailure, from any non-final status", () => {
    fc.assert(
      fc.property(policyArb, fc.integer({ min: 400, max: 499 }).filter((s) => s !== 408 && s !== 429), fc.nat(14), (policy, code, earlier) => {
        const prev: DeliveryStatus | undefined = earlier === 0 ? undefined : { phase: "Retrying", attempts: Math.min(earlier, policy.retry.maxAttempts - 1) };
        const { status } = applyAttempt({ status: prev, generation: 1, now: T0, attempt: attemptOf({ kind: "response", status: code, retryAfter: undefined }, T0, 5), policy, random: () => 0.5 });
        expect(status.deadLetter?.reason).toBe(code === 410 ? "Gone" : "PermanentFailure");
        expect(status.phase).toBe("DeadLettered");
      }),
    );
  });

  it("a Retry-After on 429/503 (when respected) is honoured up to 1 h, never shortening the backoff", () => {
    fc.assert(
      fc.property(policyArb, fc.constantFrom(429, 503), fc.nat(10_000), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (policy, code, seconds, r) => {
        const p = { ...policy, retry: { ...policy.retry, maxAttempts: Math.max(2, policy.retry.maxAttempts), respectRetryAfter: true } };
        const { status } = applyAttempt({ status: undefined, generation: 1, now: T0, attempt: attemptOf({ kind: "response", status: code, retryAfter: String(seconds) }, T0, 5), policy: p, random: () => r });
        const backoff = backoffDelay(1, p.retry, () => r);
        expect(fromRfc3339(status.nextAttemptAt)! - T0).toBe(Math.max(backoff, Math.min(seconds * 1000, RETRY_AFTER_CAP_MS)));
      }),
    );
  });

  it("a replay of a dead letter writes a status the schema accepts, whatever its reason, request id and error text", () => {
    const reasonArb = fc.oneof(fc.string({ unit: "binary", minLength: 5, maxLength: 60 }), fc.tuple(fc.constantFrom("r", "é", "😀"), fc.integer({ min: 5, max: 3_000 })).map(([c, n]) => c.repeat(n)));
    fc.assert(
      fc.property(policyArb, attemptKindArb, reasonArb, fc.option(fc.string({ maxLength: 200 }), { nil: undefined }), (policy, kind, reason, requestId) => {
        const prev: DeliveryStatus = {
          phase: "DeadLettered",
          attempts: policy.retry.maxAttempts,
          deadLetter: { at: toRfc3339(T0 - 1_000), reason: "Exhausted", message: "earlier" },
          finishedAt: toRfc3339(T0 - 1_000),
          replays: 0,
        };
        const { status } = applyAttempt({
          status: prev,
          generation: 1,
          now: T0,
          attempt: attemptOf(kind, T0, 5),
          policy,
          random: () => 0.5,
          replay: { reason, ...(requestId === undefined ? {} : { requestId }) },
        });
        expect(status.attempts).toBe(prev.attempts! + (kind.kind === "interrupted" ? 0 : 1));
        expectValidStatus(status);
      }),
      { numRuns: 150 },
    );
  });
});
