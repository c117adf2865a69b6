import { describe, expect, it } from "vitest";
import type { DeliveryStatus } from "../../api/delivery.js";
import { subscriptionSpecSchema, type SubscriptionSpecInput } from "../../api/subscription.js";
import { BLOCKED_ADDRESS_CODE, classify, classifyStatus } from "./classify.js";
import { appendHistory, applyAttempt, deadLetter, discard, dropLateOutcome, historyLimit, waiting, type AttemptResult, type OutcomeInput } from "./outcome.js";
import { resolvePolicy, type Policy } from "./policy.js";
import { toRfc3339 } from "../rfc3339.js";

const T0 = Date.UTC(2025, 5, 15, 12, 0, 0);
const iso = toRfc3339;
const never = (): number => {
  throw new Error("random must not be called");
};

function policyOf(spec: Partial<SubscriptionSpecInput> = {}): Policy {
  return resolvePolicy(subscriptionSpecSchema.parse({ url: "https://hooks.acme.example/orders", ...spec }), {
    deliveryTimeoutMs: 10_000,
    breaker: { failureThreshold: 5, successThreshold: 1, cooldownMs: 60_000 },
  });
}

// 1s, 2s, 4s, ... capped at 30s, no jitter; 3 attempts; 2 replays.
const policy = policyOf({
  retry: { maxAttempts: 3, initialBackoff: "1s", multiplier: 2, maxBackoff: "30s", jitterPercent: 0, respectRetryAfter: true },
  deadLetter: { maxEntries: 100, maxReplays: 2 },
});

const response = (status: number, over: Partial<AttemptResult> = {}): AttemptResult => ({
  startedAt: T0 - 120,
  durationMs: 120,
  responseStatus: status,
  classification: classifyStatus(status),
  ...over,
});
const transportError = (code: string, message = `connect ${code}`): AttemptResult => ({
  startedAt: T0 - 50,
  durationMs: 50,
  error: message,
  classification: classify({ kind: "error", code, name: "Error" }),
});
const interrupted = (): AttemptResult => ({ startedAt: T0 - 25_000, durationMs: 25_000, error: "aborted", classification: "interrupted" });

function apply(status: DeliveryStatus | undefined, attempt: AttemptResult, over: Partial<OutcomeInput> = {}) {
  return applyAttempt({ status, generation: 1, now: T0, attempt, policy, random: never, ...over });
}

const succeededCondition = (s: DeliveryStatus) => s.conditions?.find((c) => c.type === "Succeeded");

/** A delivery that was dead-lettered as `reason` after `attempts` attempts. */
function deadLettered(reason: "Exhausted" | "Gone" | "PermanentFailure", over: Partial<DeliveryStatus> = {}): DeliveryStatus {
  return {
    observedGeneration: 1,
    phase: "DeadLettered",
    attempts: 3,
    lastAttempt: { number: 3, startedAt: iso(T0 - 86_400_000), durationMs: 10, responseStatus: 500, outcome: "Failed", reason: "http_5xx" },
    history: [],
    deadLetter: { at: iso(T0 - 86_400_000), reason, message: "earlier" },
    finishedAt: iso(T0 - 86_400_000),
    replays: 0,
    conditions: [{ type: "Succeeded", status: "False", reason, message: "earlier", lastTransitionTime: iso(T0 - 86_400_000), observedGeneration: 1 }],
    ...over,
  };
}

describe("applyAttempt: success", () => {
  it("first attempt 2xx -> Succeeded, finishedAt, Succeeded=True Delivered", () => {
    const r = apply(undefined, response(204, { durationMs: 119.6 }));
    expect(r.status).toMatchObject({ phase: "Succeeded", attempts: 1, finishedAt: iso(T0), observedGeneration: 1 });
    expect(r.status.lastAttempt).toEqual({ number: 1, startedAt: iso(T0 - 120), durationMs: 120, responseStatus: 204, outcome: "Succeeded", reason: "http_2xx" });
    expect(r.status.history).toEqual([r.status.lastAttempt]);
    expect(succeededCondition(r.status)).toEqual({ type: "Succeeded", status: "True", reason: "Delivered", message: expect.stringContaining("attempt 1"), lastTransitionTime: iso(T0), observedGeneration: 1 });
    expect(r.final).toEqual({ phase: "Succeeded", reason: "Delivered", message: expect.stringContaining("HTTP 204") });
  });

  it("a retry that succeeds removes nextAttemptAt and keeps counting", () => {
    const prev: DeliveryStatus = { phase: "Retrying", attempts: 2, nextAttemptAt: iso(T0 - 1), lastAttempt: { number: 2, startedAt: iso(T0 - 5000), durationMs: 1, outcome: "Failed" } };
    const r = apply(prev, response(200));
    expect(r.status.phase).toBe("Succeeded");
    expect(r.status.attempts).toBe(3);
    expect(r.status.lastAttempt?.number).toBe(3);
    expect(r.status.nextAttemptAt).toBeUndefined();
    expect(r.status.deadLetter).toBeUndefined();
  });
});

describe("applyAttempt: retryable failures", () => {
  const big = policyOf({ retry: { maxAttempts: 10, initialBackoff: "1s", multiplier: 3, maxBackoff: "20s", jitterPercent: 0, respectRetryAfter: true } });
  // after failure n: min(1s * 3^(n-1), 20s)
  it.each([
    [0, 1_000],
    [1, 3_000],
    [2, 9_000],
    [3, 20_000],
    [8, 20_000],
  ])("after %i earlier attempts the next one is due in %i ms", (earlier, delay) => {
    const prev: DeliveryStatus | undefined = earlier ? { phase: "Retrying", attempts: earlier } : undefined;
    const r = apply(prev, response(500), { policy: big, random: () => 0.5 });
    expect(r.status.phase).toBe("Retrying");
    expect(r.status.attempts).toBe(earlier + 1);
    expect(r.status.nextAttemptAt).toBe(iso(T0 + delay));
    expect(r.final).toBeUndefined();
    expect(succeededCondition(r.status)).toMatchObject({ status: "Unknown", reason: "RetryScheduled" });
  });

  it.each([
    ["408", response(408), "http_408"],
    ["429", response(429), "http_429"],
    ["502", response(502), "http_5xx"],
    ["connection refused", transportError("ECONNREFUSED"), "network"],
    ["DNS failure", transportError("ENOTFOUND"), "dns"],
    ["timeout", transportError("UND_ERR_HEADERS_TIMEOUT"), "timeout"],
  ])("%s is retried and recorded as Failed", (_name, attempt, reason) => {
    const r = apply(undefined, attempt, { random: () => 0 });
    expect(r.status).toMatchObject({ phase: "Retrying", attempts: 1, nextAttemptAt: iso(T0 + 1_000) });
    expect(r.status.lastAttempt).toMatchObject({ number: 1, outcome: "Failed", reason });
  });

  it("jitter uses the injected random: base ± jitterPercent", () => {
    const jittery = policyOf({ retry: { maxAttempts: 5, initialBackoff: "2s", multiplier: 2, maxBackoff: "1m", jitterPercent: 50, respectRetryAfter: true } });
    expect(apply(undefined, response(500), { policy: jittery, random: () => 0 }).status.nextAttemptAt).toBe(iso(T0 + 1_000));
    expect(apply(undefined, response(500), { policy: jittery, random: () => 0.5 }).status.nextAttemptAt).toBe(iso(T0 + 2_000));
    expect(apply(undefined, response(500), { policy: jittery, random: () => 0.75 }).status.nextAttemptAt).toBe(iso(T0 + 2_500));
  });

  it("a transport error records the error whole (the status writer cuts it to its limit) and no status", () => {
    const r = apply(undefined, transportError("ECONNRESET", "x".repeat(5000)), { random: () => 0 });
    expect(r.status.lastAttempt?.error).toHaveLength(5000);
    expect(r.status.lastAttempt).not.toHaveProperty("responseStatus");
    expect(r.status.lastAttempt?.durationMs).toBe(50);
  });

  it("a negative duration (clock step) is recorded as 0", () => {
    expect(apply(undefined, response(500, { durationMs: -3 }), { random: () => 0 }).status.lastAttempt?.durationMs).toBe(0);
  });
});

describe("applyAttempt: Retry-After", () => {
  const httpDate = (ms: number) => new Date(ms).toUTCString();
  const table: Array<[string, number, string, boolean, number]> = [
    ["429, seconds, respected", 429, "10", true, 10_000],
    ["503, seconds, respected", 503, "10", true, 10_000],
    ["503, HTTP-date, respected", 503, httpDate(T0 + 42_000), true, 42_000],
    ["429, ignored when respectRetryAfter is false", 429, "10", false, 1_000],
    ["503, ignored when respectRetryAfter is false", 503, "10", false, 1_000],
    ["500 never honours it", 500, "10", true, 1_000],
    ["502 never honours it", 502, "10", true, 1_000],
    ["408 never honours it", 408, "10", true, 1_000],
    ["never shorter than the backoff", 429, "0", true, 1_000],
    ["garbage is ignored", 429, "soon", true, 1_000],
    ["capped at one hour", 429, "86400", true, 3_600_000],
  ];
  it.each(table)("%s", (_name, status, retryAfter, respectRetryAfter, delay) => {
    const p = policyOf({ retry: { maxAttempts: 3, initialBackoff: "1s", multiplier: 2, maxBackoff: "30s", jitterPercent: 0, respectRetryAfter } });
    const r = apply(undefined, response(status, { retryAfter }), { policy: p, random: () => 0 });
    expect(r.status.nextAttemptAt).toBe(iso(T0 + delay));
  });
});

describe("applyAttempt: final failures", () => {
  it("the last allowed attempt failing -> DeadLettered Exhausted", () => {
    const prev: DeliveryStatus = { phase: "Retrying", attempts: 2, nextAttemptAt: iso(T0 - 1) };
    const r = apply(prev, response(503));
    expect(r.status).toMatchObject({ phase: "DeadLettered", attempts: 3, finishedAt: iso(T0) });
    expect(r.status.nextAttemptAt).toBeUndefined();
    expect(r.status.deadLetter).toEqual({ at: iso(T0), reason: "Exhausted", message: expect.stringContaining("3 attempts") });
    expect(succeededCondition(r.status)).toMatchObject({ status: "False", reason: "Exhausted" });
    expect(r.final).toMatchObject({ phase: "DeadLettered", reason: "Exhausted" });
  });

  it("maxAttempts 1: the first failure is final", () => {
    const one = policyOf({ retry: { maxAttempts: 1 } });
    expect(apply(undefined, transportError("ETIMEDOUT"), { policy: one }).status.deadLetter?.reason).toBe("Exhausted");
  });

  it("one attempt short of maxAttempts is still retried", () => {
    expect(apply({ phase: "Retrying", attempts: 1 }, response(500), { random: () => 0 }).status.phase).toBe("Retrying");
  });

  const table: Array<[string, AttemptResult, string, string, string]> = [
    ["410", response(410), "Gone", "Gone", "http_410"],
    ["400", response(400), "PermanentFailure", "PermanentFailure", "http_4xx"],
    ["401", response(401), "PermanentFailure", "PermanentFailure", "http_4xx"],
    ["404", response(404), "PermanentFailure", "PermanentFailure", "http_4xx"],
    ["301", response(301), "PermanentFailure", "PermanentFailure", "http_3xx"],
    ["302", response(302), "PermanentFailure", "PermanentFailure", "http_3xx"],
    ["blocked by the network guard", transportError(BLOCKED_ADDRESS_CODE, "10.0.0.1 is not allowed"), "Blocked", "Blocked", "blocked"],
  ];
  it.each(table)("%s on the first attempt -> DeadLettered %s at once", (_name, attempt, reason, outcome, metricReason) => {
    const r = apply({ phase: "Pending", attempts: 0, nextAttemptAt: iso(T0) }, attempt);
    expect(r.status).toMatchObject({ phase: "DeadLettered", attempts: 1, finishedAt: iso(T0), deadLetter: { at: iso(T0), reason } });
    expect(r.status.nextAttemptAt).toBeUndefined();
    expect(r.status.lastAttempt).toMatchObject({ outcome, reason: metricReason });
    expect(succeededCondition(r.status)).toMatchObject({ status: "False", reason });
    expect(r.final).toMatchObject({ phase: "DeadLettered", reason });
  });
});

describe("applyAttempt: interrupted by shutdown", () => {
  it("requeue: attempts unchanged, interruptions + 1, due now, Retrying", () => {
    const prev: DeliveryStatus = { phase: "Retrying", attempts: 2, nextAttemptAt: iso(T0 - 30_000), interruptions: 1, lastAttempt: { number: 4, startedAt: iso(T0 - 40_000), durationMs: 1, outcome: "Failed" } };
    const r = apply(prev, interrupted(), { interruptedAction: "requeue" });
    expect(r.status).toMatchObject({ phase: "Retrying", attempts: 2, interruptions: 2, nextAttemptAt: iso(T0) });
    expect(r.status.lastAttempt).toMatchObject({ number: 5, outcome: "Interrupted", reason: "interrupted", error: "aborted" });
    expect(succeededCondition(r.status)).toMatchObject({ status: "Unknown", reason: "Interrupted" });
    expect(r.final).toBeUndefined();
  });

  it("requeue is the default, and a first attempt stays Pending", () => {
    const r = apply(undefined, interrupted());
    expect(r.status).toMatchObject({ phase: "Pending", attempts: 0, interruptions: 1, nextAttemptAt: iso(T0) });
    expect(r.status.lastAttempt?.number).toBe(1);
  });

  it("an interrupted attempt does not use up the budget: at maxAttempts - 1 it still requeues", () => {
    const r = apply({ phase: "Retrying", attempts: 2 }, interrupted());
    expect(r.status.phase).toBe("Retrying");
    expect(r.status.attempts).toBe(2);
  });

  it("dead-letter action -> DeadLettered Drain, attempts unchanged", () => {
    const r = apply({ phase: "Retrying", attempts: 1, nextAttemptAt: iso(T0 - 1) }, interrupted(), { interruptedAction: "dead-letter" });
    expect(r.status).toMatchObject({ phase: "DeadLettered", attempts: 1, interruptions: 1, deadLetter: { reason: "Drain" }, finishedAt: iso(T0) });
    expect(r.status.nextAttemptAt).toBeUndefined();
    expect(r.final).toMatchObject({ phase: "DeadLettered", reason: "Drain" });
  });
});

describe("applyAttempt: replays", () => {
  const replay = { reason: "endpoint fixed, INC-42", requestId: "bulk-1" };

  it("success -> Succeeded with lastReplay {reason, requestId, result}, keeping its dead-letter record", () => {
    const prev = deadLettered("Gone");
    const r = apply(prev, response(200), { replay });
    expect(r.status.phase).toBe("Succeeded");
    expect(r.status.lastReplay).toEqual({ reason: replay.reason, at: iso(T0), requestId: "bulk-1", result: "Succeeded" });
    expect(r.status.lastAttempt).toMatchObject({ number: 4, replay: true, outcome: "Succeeded" });
    // The record of why it was a dead letter stays: retention keeps it as long as a dead letter.
    expect(r.status.deadLetter).toEqual(prev.deadLetter);
    expect(r.status.replays).toBe(0);
    expect(r.status.finishedAt).toBe(iso(T0));
    expect(succeededCondition(r.status)).toMatchObject({ status: "True", reason: "Delivered", message: expect.stringContaining("replay"), lastTransitionTime: iso(T0) });
    expect(r.final).toMatchObject({ phase: "Succeeded" });
  });

  it("a single replay has no requestId", () => {
    const r = apply(deadLettered("Exhausted"), response(200), { replay: { reason: "try again please" } });
    expect(r.status.lastReplay).toEqual({ reason: "try again please", at: iso(T0), result: "Succeeded" });
  });

  it.each([
    ["500", response(500)],
    ["410", response(410)],
    ["404", response(404)],
    ["timeout", transportError("ETIMEDOUT")],
  ])("failure (%s) -> DeadLettered, replays + 1, the original reason kept, no retry scheduled", (_name, attempt) => {
    // Plenty of attempts left in the policy: a replay is still one attempt only.
    const prev = deadLettered("PermanentFailure", { attempts: 1 });
    const r = apply(prev, attempt, { replay, policy: policyOf({ retry: { maxAttempts: 10 }, deadLetter: { maxEntries: 10, maxReplays: 3 } }) });
    expect(r.status.phase).toBe("DeadLettered");
    expect(r.status.replays).toBe(1);
    expect(r.status.deadLetter).toEqual(prev.deadLetter);
    expect(r.status.nextAttemptAt).toBeUndefined();
    expect(r.status.lastReplay).toEqual({ reason: replay.reason, at: iso(T0), requestId: "bulk-1", result: "Failed" });
    // A failed replay does not make it look newer: finishedAt (retention, oldest-first eviction)
    // and deadLetter.at stay when it first became a dead letter; the replay is in lastReplay.
    expect(r.status.finishedAt).toBe(iso(T0 - 86_400_000));
    expect(r.status.deadLetter?.at).toBe(iso(T0 - 86_400_000));
    expect(r.status.lastAttempt).toMatchObject({ number: 4, replay: true });
    expect(succeededCondition(r.status)).toMatchObject({ status: "False", reason: "PermanentFailure", message: expect.stringContaining("2 replays left") });
    expect(r.final).toMatchObject({ phase: "DeadLettered", reason: "ReplayFailed" });
  });

  it("the failure that reaches maxReplays -> Discarded Poison", () => {
    const r = apply(deadLettered("Exhausted", { replays: 1 }), response(500), { replay });
    expect(r.status).toMatchObject({ phase: "Discarded", replays: 2, discard: { at: iso(T0), reason: "Poison" }, finishedAt: iso(T0) });
    expect(succeededCondition(r.status)).toMatchObject({ status: "False", reason: "Poison" });
    expect(r.final).toMatchObject({ phase: "Discarded", reason: "Poison" });
  });

  it("one failure short of maxReplays stays DeadLettered", () => {
    expect(apply(deadLettered("Exhausted", { replays: 0 }), response(500), { replay }).status.phase).toBe("DeadLettered");
  });

  it("interrupted: DeadLettered, lastReplay and replays untouched, no final (even with the dead-letter drain action)", () => {
    const earlier = { reason: "an earlier replay", at: iso(T0 - 3_600_000), result: "Failed" as const };
    const prev = deadLettered("Gone", { replays: 1, lastReplay: earlier });
    for (const interruptedAction of ["requeue", "dead-letter"] as const) {
      const r = apply(prev, interrupted(), { replay, interruptedAction });
      expect(r.status.phase).toBe("DeadLettered");
      expect(r.status.lastReplay).toEqual(earlier);
      expect(r.status.replays).toBe(1);
      expect(r.status.attempts).toBe(3);
      expect(r.status.interruptions).toBe(1);
      expect(r.status.deadLetter).toEqual(prev.deadLetter);
      expect(r.status.nextAttemptAt).toBeUndefined();
      expect(r.status.lastAttempt).toMatchObject({ outcome: "Interrupted", replay: true });
      expect(r.final).toBeUndefined();
    }
  });
});

describe("applyAttempt: replays recorded only (target, delivered events sent again)", () => {
  it("a replay to another subscription records the attempt and lastReplay, and changes nothing else", () => {
    const prev = deadLettered("Exhausted", { replays: 1 });
    for (const attempt of [response(200), response(500)]) {
      const r = apply(prev, attempt, { replay: { reason: "moved to v2 endpoint", requestId: "uid-1", name: "to-v2", target: "acme-v2" } });
      expect(r.final).toBeUndefined();
      expect(r.status).toMatchObject({ phase: "DeadLettered", attempts: 3, replays: 1, finishedAt: prev.finishedAt, deadLetter: prev.deadLetter });
      expect(r.status.lastAttempt).toMatchObject({ number: 4, replay: true, target: "acme-v2" });
      expect(r.status.lastReplay).toEqual({ reason: "moved to v2 endpoint", at: iso(T0), requestId: "uid-1", replay: "to-v2", target: "acme-v2", result: attempt.responseStatus === 200 ? "Succeeded" : "Failed" });
      expect(r.status.conditions).toEqual(prev.conditions);
    }
  });

  it("a delivered event sent again stays Succeeded whatever the answer", () => {
    const delivered = apply(undefined, response(200)).status;
    const r = apply(delivered, response(503), { replay: { reason: "receiver lost its data", requestId: "uid-2" } });
    expect(r.final).toBeUndefined();
    expect(r.status).toMatchObject({ phase: "Succeeded", attempts: 1, finishedAt: delivered.finishedAt });
    expect(r.status.lastReplay).toMatchObject({ result: "Failed", requestId: "uid-2" });
    expect(r.status.history).toHaveLength(2);
  });

  it("interrupted: only the interruption is recorded, so a resumed replay does it again", () => {
    const delivered = apply(undefined, response(200)).status;
    const r = apply(delivered, interrupted(), { replay: { reason: "receiver lost its data", requestId: "uid-2" } });
    expect(r.status).toMatchObject({ phase: "Succeeded", attempts: 1, interruptions: 1 });
    expect(r.status.lastReplay).toBeUndefined();
  });
});

describe("applyAttempt: history", () => {
  it("keeps every attempt up to maxAttempts + maxReplays (at least 10), oldest first, numbered 1..n", () => {
    const few = policyOf({ retry: { maxAttempts: 3, jitterPercent: 0 }, deadLetter: { maxReplays: 2 } });
    let status: DeliveryStatus | undefined;
    for (let i = 1; i <= 13; i++) {
      status = applyAttempt({ status, generation: 1, now: T0 + i * 60_000, attempt: response(500, { startedAt: T0 + i * 60_000 }), policy: policyOf({ retry: { maxAttempts: 50 } }), random: () => 0 }).status;
      expect(status.lastAttempt?.number).toBe(i);
    }
    expect(status!.history).toHaveLength(13);
    // A policy of 3 attempts and 2 replays keeps 10 (the floor): the 3 oldest go.
    status = applyAttempt({ status, generation: 1, now: T0 + 14 * 60_000, attempt: response(500, { startedAt: T0 + 14 * 60_000 }), policy: few, random: () => 0 }).status;
    expect(status.history!.map((a) => a.number)).toEqual([5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
    expect(status.history!.map((a) => a.startedAt)).toEqual([5, 6, 7, 8, 9, 10, 11, 12, 13, 14].map((i) => iso(T0 + i * 60_000)));
    expect(status.history!.at(-1)).toEqual(status.lastAttempt);
  });

  it("keeps the whole history of 50 attempts and 5 replays (55 entries), within 32 KiB", () => {
    const max = policyOf({ retry: { maxAttempts: 50, jitterPercent: 0 }, deadLetter: { maxReplays: 5 } });
    expect(historyLimit(max)).toBe(55);
    let status: DeliveryStatus | undefined;
    for (let i = 1; i <= 60; i++) status = applyAttempt({ status, generation: 1, now: T0 + i, attempt: transportError("ECONNREFUSED", "x".repeat(1024)), policy: max, random: () => 0 }).status;
    expect(status!.history).toHaveLength(55);
    expect(status!.history![0]!.number).toBe(6);
    // The history keeps 256 characters of each error; lastAttempt all of it.
    expect(status!.history!.every((a) => a.error!.length === 256)).toBe(true);
    expect(status!.lastAttempt!.error).toHaveLength(1024);
    expect(Buffer.byteLength(JSON.stringify(status!.history))).toBeLessThanOrEqual(32 * 1024);
  });

  it("drops the oldest entries past 32 KiB (multi-byte errors), never the newest", () => {
    const record = (n: number) => ({ number: n, startedAt: iso(T0), durationMs: 1, outcome: "Failed" as const, error: "日".repeat(256) });
    let h: ReturnType<typeof appendHistory> = [];
    for (let n = 1; n <= 64; n++) h = appendHistory(h, record(n), 64);
    expect(Buffer.byteLength(JSON.stringify(h))).toBeLessThanOrEqual(32 * 1024);
    expect(h.length).toBeLessThan(64);
    expect(h.at(-1)!.number).toBe(64);
    expect(h.map((a) => a.number)).toEqual(Array.from({ length: h.length }, (_, i) => 64 - h.length + 1 + i));
  });

  it("interrupted attempts are numbered and kept too", () => {
    let status = apply(undefined, response(500), { random: () => 0 }).status;
    status = apply(status, interrupted()).status;
    status = apply(status, response(500), { random: () => 0 }).status;
    expect(status.history?.map((a) => [a.number, a.outcome])).toEqual([
      [1, "Failed"],
      [2, "Interrupted"],
      [3, "Failed"],
    ]);
    expect(status.attempts).toBe(2);
  });
});

describe("applyAttempt: conditions", () => {
  it("keep lastTransitionTime while the status stays Unknown, move it when it changes", () => {
    const many = policyOf({ retry: { maxAttempts: 5, jitterPercent: 0 } });
    const s1 = applyAttempt({ status: undefined, generation: 1, now: T0, attempt: response(500), policy: many, random: () => 0 }).status;
    const s2 = applyAttempt({ status: s1, generation: 2, now: T0 + 5_000, attempt: response(502), policy: many, random: () => 0 }).status;
    expect(succeededCondition(s1)?.lastTransitionTime).toBe(iso(T0));
    expect(succeededCondition(s2)).toMatchObject({ status: "Unknown", lastTransitionTime: iso(T0), observedGeneration: 2 });
    expect(succeededCondition(s2)?.message).not.toBe(succeededCondition(s1)?.message);
    const s3 = applyAttempt({ status: s2, generation: 2, now: T0 + 9_000, attempt: response(200), policy: many, random: never }).status;
    expect(succeededCondition(s3)).toMatchObject({ status: "True", lastTransitionTime: iso(T0 + 9_000) });
    expect(s3.conditions).toHaveLength(1);
  });

  it("does not mutate the previous status", () => {
    const prev = deadLettered("Gone");
    const copy = structuredClone(prev);
    apply(prev, response(500), { replay: { reason: "retry it now" } });
    apply(prev, response(200), { replay: { reason: "retry it now" } });
    expect(prev).toEqual(copy);
  });
});

describe("deadLetter, discard, waiting", () => {
  const prev: DeliveryStatus = {
    phase: "Retrying",
    attempts: 2,
    nextAttemptAt: iso(T0 + 1_000),
    conditions: [{ type: "Succeeded", status: "Unknown", reason: "RetryScheduled", lastTransitionTime: iso(T0 - 10_000) }],
  };

  it("deadLetter: phase, record, finishedAt, nextAttemptAt removed, attempts kept, Succeeded=False", () => {
    const r = deadLetter(prev, 3, T0, "BreakerOpen", "the endpoint's circuit breaker is Open");
    expect(r.status).toMatchObject({ phase: "DeadLettered", attempts: 2, observedGeneration: 3, finishedAt: iso(T0) });
    expect(r.status.deadLetter).toEqual({ at: iso(T0), reason: "BreakerOpen", message: "the endpoint's circuit breaker is Open" });
    expect(r.status.discard).toBeUndefined();
    expect(r.status.nextAttemptAt).toBeUndefined();
    expect(r.status.conditions).toEqual([{ type: "Succeeded", status: "False", reason: "BreakerOpen", message: "the endpoint's circuit breaker is Open", lastTransitionTime: iso(T0), observedGeneration: 3 }]);
    expect(r.final).toEqual({ phase: "DeadLettered", reason: "BreakerOpen", message: "the endpoint's circuit breaker is Open" });
  });

  it("discard: the discard record, not a dead letter; attempts 0 when there was no status", () => {
    const r = discard(undefined, 1, T0, "PayloadTooLarge", "too big");
    expect(r.status).toMatchObject({ phase: "Discarded", attempts: 0, finishedAt: iso(T0), discard: { at: iso(T0), reason: "PayloadTooLarge", message: "too big" } });
    expect(r.status.deadLetter).toBeUndefined();
    expect(succeededCondition(r.status)).toMatchObject({ status: "False", reason: "PayloadTooLarge" });
    expect(r.final).toEqual({ phase: "Discarded", reason: "PayloadTooLarge", message: "too big" });
  });

  it("waiting: a new delivery becomes Pending with attempts 0 and Succeeded=Unknown", () => {
    const s = waiting(undefined, 1, T0, "SubscriptionNotFound", "waiting for its WebhookSubscription to exist");
    expect(s).toEqual({
      observedGeneration: 1,
      phase: "Pending",
      attempts: 0,
      conditions: [{ type: "Succeeded", status: "Unknown", reason: "SubscriptionNotFound", message: "waiting for its WebhookSubscription to exist", lastTransitionTime: iso(T0), observedGeneration: 1 }],
    });
  });

  it("waiting: keeps phase, attempts and nextAttemptAt of a retrying delivery, and the transition time", () => {
    const s = waiting(prev, 2, T0, "Paused", "the subscription is paused");
    expect(s).toMatchObject({ phase: "Retrying", attempts: 2, nextAttemptAt: iso(T0 + 1_000), observedGeneration: 2 });
    expect(succeededCondition(s)).toMatchObject({ status: "Unknown", reason: "Paused", lastTransitionTime: iso(T0 - 10_000) });
  });
});

describe("dropLateOutcome: an outcome computed from a status that moved on", () => {
  const at = (number: number, phase: DeliveryStatus["phase"]): DeliveryStatus => ({ phase, attempts: number, lastAttempt: { number, startedAt: "2026-12-07T20:52:00Z", durationMs: 1, outcome: "Failed" } });
  const delivered = { status: {}, final: { phase: "Succeeded" as const, reason: "Delivered", message: "" } };
  const failed = { status: {} };
  const deadLettered = { status: {}, final: { phase: "DeadLettered" as const, reason: "MaxAttemptsExceeded", message: "" } };

  it.each([
    ["not moved: written", at(1, "Retrying"), at(1, "Retrying"), failed, false],
    ["not moved, delivered: written", at(1, "Retrying"), at(1, "Retrying"), delivered, false],
    ["a newer attempt recorded, this one failed: dropped", at(1, "Retrying"), at(2, "Retrying"), failed, true],
    ["a newer attempt recorded, this one a dead letter: dropped", at(1, "Retrying"), at(2, "Retrying"), deadLettered, true],
    ["a newer attempt recorded, this one delivered: written (else sent again)", at(1, "Retrying"), at(2, "Retrying"), delivered, false],
    ["dead-lettered meanwhile, this one delivered: dropped", at(1, "Retrying"), at(2, "DeadLettered"), delivered, true],
    ["succeeded meanwhile, this one delivered: dropped", at(1, "Retrying"), at(2, "Succeeded"), delivered, true],
    ["discarded meanwhile (no new attempt), this one delivered: dropped", at(1, "Retrying"), at(1, "Discarded"), delivered, true],
  ] as const)("%s", (_name, basis, current, result, dropped) => {
    expect(dropLateOutcome(basis, current, result)).toBe(dropped);
  });
});
