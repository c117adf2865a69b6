import { describe, it, expect } from "vitest";
import {
  admit,
  fromStatus,
  healthConfig,
  healthyEndpoint,
  recordFailure,
  recordSuccess,
  toStatus,
  type FailureKind,
  type HealthState,
  type HealthStatus,
  type HealthUpdate,
} from "./health.js";

const cfg = healthConfig(60_000);
const t0 = Date.UTC(2025, 5, 15, 12, 0, 0);

const healthy = (over: Partial<HealthState> = {}): HealthState => ({ ...healthyEndpoint, ...over });

describe("healthConfig", () => {
  it("uses the contract's thresholds", () => {
    expect(cfg).toEqual({ degradedAfter: 3, disabledAfter: 10, probeIntervalMs: 60_000 });
  });
});

describe("recordFailure", () => {
  const table: Array<[string, HealthState, FailureKind, HealthUpdate]> = [
    [
      "first failure stays Healthy",
      healthy({ totalAttempts: 5, lastSuccessAt: t0 - 1 }),
      "failure",
      { state: healthy({ consecutiveFailures: 1, totalAttempts: 6, totalFailures: 1, lastFailureAt: t0, lastSuccessAt: t0 - 1 }) },
    ],
    [
      "2nd consecutive failure stays Healthy",
      healthy({ consecutiveFailures: 1, totalAttempts: 1, totalFailures: 1 }),
      "failure",
      { state: healthy({ consecutiveFailures: 2, totalAttempts: 2, totalFailures: 2, lastFailureAt: t0 }) },
    ],
    [
      "3rd consecutive failure degrades",
      healthy({ consecutiveFailures: 2, totalAttempts: 2, totalFailures: 2 }),
      "failure",
      {
        state: { state: "Degraded", consecutiveFailures: 3, totalAttempts: 3, totalFailures: 3, lastFailureAt: t0 },
        transition: { from: "Healthy", to: "Degraded" },
      },
    ],
    [
      "9th stays Degraded",
      { ...healthy({ consecutiveFailures: 8, totalAttempts: 8, totalFailures: 8 }), state: "Degraded" },
      "failure",
      { state: { state: "Degraded", consecutiveFailures: 9, totalAttempts: 9, totalFailures: 9, lastFailureAt: t0 } },
    ],
    [
      "10th consecutive failure disables (Failures)",
      { ...healthy({ consecutiveFailures: 9, totalAttempts: 9, totalFailures: 9 }), state: "Degraded" },
      "failure",
      {
        state: {
          state: "Disabled",
          consecutiveFailures: 10,
          totalAttempts: 10,
          totalFailures: 10,
          lastFailureAt: t0,
          disabledReason: "Failures",
          nextProbeAt: t0 + 60_000,
        },
        transition: { from: "Degraded", to: "Disabled" },
      },
    ],
    [
      "gone disables a Healthy endpoint at once (Gone)",
      healthy({ totalAttempts: 3 }),
      "gone",
      {
        state: {
          state: "Disabled",
          consecutiveFailures: 1,
          totalAttempts: 4,
          totalFailures: 1,
          lastFailureAt: t0,
          disabledReason: "Gone",
          nextProbeAt: t0 + 60_000,
        },
        transition: { from: "Healthy", to: "Disabled" },
      },
    ],
    [
      "a failed probe keeps it Disabled for another interval, with its first reason",
      { state: "Disabled", consecutiveFailures: 1, totalAttempts: 4, totalFailures: 1, disabledReason: "Gone", nextProbeAt: t0 + 60_000 },
      "failure",
      {
        state: {
          state: "Disabled",
          consecutiveFailures: 2,
          totalAttempts: 5,
          totalFailures: 2,
          lastFailureAt: t0,
          disabledReason: "Gone",
          nextProbeAt: t0 + 60_000,
        },
      },
    ],
    [
      "gone while Disabled for Failures keeps the first reason",
      { state: "Disabled", consecutiveFailures: 10, totalAttempts: 10, totalFailures: 10, disabledReason: "Failures", nextProbeAt: t0 },
      "gone",
      {
        state: {
          state: "Disabled",
          consecutiveFailures: 11,
          totalAttempts: 11,
          totalFailures: 11,
          lastFailureAt: t0,
          disabledReason: "Failures",
          nextProbeAt: t0 + 60_000,
        },
      },
    ],
  ];

  it.each(table)("%s", (_name, state, kind, expected) => {
    const before = structuredClone(state);
    expect(recordFailure(state, t0, kind, cfg)).toEqual(expected);
    expect(state).toEqual(before);
  });
});

describe("recordSuccess", () => {
  const table: Array<[string, HealthState, HealthUpdate]> = [
    ["Healthy stays Healthy", healthy({ totalAttempts: 1 }), { state: healthy({ totalAttempts: 2, lastSuccessAt: t0 }) }],
    [
      "resets a Healthy streak",
      healthy({ consecutiveFailures: 2, totalAttempts: 2, totalFailures: 2, lastFailureAt: t0 - 5 }),
      { state: healthy({ totalAttempts: 3, totalFailures: 2, lastFailureAt: t0 - 5, lastSuccessAt: t0 }) },
    ],
    [
      "Degraded recovers",
      { state: "Degraded", consecutiveFailures: 5, totalAttempts: 5, totalFailures: 5, lastFailureAt: t0 - 5 },
      { state: healthy({ totalAttempts: 6, totalFailures: 5, lastFailureAt: t0 - 5, lastSuccessAt: t0 }), transition: { from: "Degraded", to: "Healthy" } },
    ],
    [
      "a successful probe re-enables a Disabled endpoint and clears reason and nextProbeAt",
      { state: "Disabled", consecutiveFailures: 1, totalAttempts: 4, totalFailures: 1, disabledReason: "Gone", nextProbeAt: t0, lastFailureAt: t0 - 60_000 },
      { state: healthy({ totalAttempts: 5, totalFailures: 1, lastFailureAt: t0 - 60_000, lastSuccessAt: t0 }), transition: { from: "Disabled", to: "Healthy" } },
    ],
  ];

  it.each(table)("%s", (_name, state, expected) => {
    const result = recordSuccess(state, t0);
    expect(result).toEqual(expected);
    expect(result.state).not.toHaveProperty("disabledReason");
    expect(result.state).not.toHaveProperty("nextProbeAt");
  });
});

describe("admit", () => {
  const disabled: HealthState = { state: "Disabled", consecutiveFailures: 1, totalAttempts: 1, totalFailures: 1, disabledReason: "Gone", nextProbeAt: t0 + 60_000 };
  const table: Array<[string, HealthState, number, ReturnType<typeof admit>]> = [
    ["Healthy allows", healthy(), t0, { decision: "allow", state: healthy() }],
    ["Degraded allows", { ...healthy(), state: "Degraded" }, t0, { decision: "allow", state: { ...healthy(), state: "Degraded" } }],
    ["Disabled before nextProbeAt waits until it", disabled, t0 + 59_999, { decision: "wait", waitUntil: t0 + 60_000, state: disabled }],
    ["Disabled at nextProbeAt lets one probe through", disabled, t0 + 60_000, { decision: "probe", state: { ...disabled, nextProbeAt: t0 + 120_000 } }],
    ["Disabled without nextProbeAt probes at once", { ...disabled, nextProbeAt: undefined }, t0, { decision: "probe", state: { ...disabled, nextProbeAt: t0 + 60_000 } }],
  ];

  it.each(table)("%s", (_name, state, now, expected) => {
    expect(admit(state, now, cfg)).toEqual(expected);
  });

  it("a second caller right after the probe waits one interval; a failed probe waits another", () => {
    const first = admit(disabled, t0 + 60_000, cfg);
    expect(first.decision).toBe("probe");
    expect(admit(first.state, t0 + 60_001, cfg)).toMatchObject({ decision: "wait", waitUntil: t0 + 120_000 });
    const failed = recordFailure(first.state, t0 + 61_000, "failure", cfg).state;
    expect(admit(failed, t0 + 120_000, cfg)).toMatchObject({ decision: "wait", waitUntil: t0 + 121_000 });
    expect(admit(failed, t0 + 121_000, cfg).decision).toBe("probe");
  });
});

describe("status", () => {
  const table: Array<[string, HealthState, HealthStatus]> = [
    ["fresh", healthy(), { state: "Healthy", consecutiveFailures: 0, totalAttempts: 0, totalFailures: 0 }],
    [
      "Degraded with times",
      { state: "Degraded", consecutiveFailures: 3, totalAttempts: 9, totalFailures: 4, lastSuccessAt: t0, lastFailureAt: t0 + 1_500 },
      {
        state: "Degraded",
        consecutiveFailures: 3,
        totalAttempts: 9,
        totalFailures: 4,
        lastSuccessAt: "2025-06-15T12:00:00.000Z",
        lastFailureAt: "2025-06-15T12:00:01.500Z",
      },
    ],
    [
      "Disabled carries reason and nextProbeAt",
      { state: "Disabled", consecutiveFailures: 1, totalAttempts: 2, totalFailures: 1, lastFailureAt: t0, disabledReason: "Gone", nextProbeAt: t0 + 60_000 },
      {
        state: "Disabled",
        consecutiveFailures: 1,
        totalAttempts: 2,
        totalFailures: 1,
        lastFailureAt: "2025-06-15T12:00:00.000Z",
        reason: "Gone",
        nextProbeAt: "2025-06-15T12:01:00.000Z",
      },
    ],
  ];

  it.each(table)("%s: toStatus, and fromStatus restores it", (_name, state, status) => {
    expect(toStatus(state)).toEqual(status);
    expect(fromStatus(status, t0 + 5, cfg)).toEqual(state);
  });

  const restore: Array<[string, HealthStatus | undefined, HealthState]> = [
    ["no status", undefined, healthy()],
    [
      "Disabled without nextProbeAt waits an interval from now",
      { state: "Disabled", consecutiveFailures: 10, totalAttempts: 10, totalFailures: 10 },
      { state: "Disabled", consecutiveFailures: 10, totalAttempts: 10, totalFailures: 10, disabledReason: "Failures", nextProbeAt: t0 + 60_000 },
    ],
    [
      "bad counters and times are dropped",
      { state: "Degraded", consecutiveFailures: -1, totalAttempts: 2.5, totalFailures: Number.NaN, lastSuccessAt: "yesterday" },
      { state: "Degraded", consecutiveFailures: 0, totalAttempts: 0, totalFailures: 0 },
    ],
    ["unknown state is Healthy", { state: "Sick" as "Healthy", consecutiveFailures: 1, totalAttempts: 1, totalFailures: 1 }, healthy({ consecutiveFailures: 1, totalAttempts: 1, totalFailures: 1 })],
  ];

  it.each(restore)("fromStatus: %s", (_name, status, expected) => {
    expect(fromStatus(status, t0, cfg)).toEqual(expected);
  });
});
