import { describe, it, expect } from "vitest";
import {
  admit,
  breakerGaugeValue,
  closedBreaker,
  fromStatus,
  recordFailure,
  recordSuccess,
  releaseProbe,
  toStatus,
  type BreakerConfig,
  type BreakerState,
  type BreakerStatus,
} from "./breaker.js";

const cfg: BreakerConfig = { failureThreshold: 3, successThreshold: 2, cooldownMs: 60_000 };
const t0 = Date.UTC(2025, 5, 15, 12, 0, 0);

const closed = (consecutiveFailures = 0): BreakerState => ({ ...closedBreaker, consecutiveFailures });
const open = (openedAt: number, consecutiveFailures = 3): BreakerState => ({
  state: "Open",
  consecutiveFailures,
  halfOpenSuccesses: 0,
  openedAt,
  nextProbeAt: openedAt + cfg.cooldownMs,
  probeInFlight: false,
});
const halfOpen = (probeInFlight: boolean, halfOpenSuccesses = 0): BreakerState => ({
  state: "HalfOpen",
  consecutiveFailures: 3,
  halfOpenSuccesses,
  openedAt: t0,
  probeInFlight,
});

describe("admit", () => {
  const table: Array<[string, BreakerState, number, ReturnType<typeof admit>]> = [
    ["Closed allows", closed(2), t0, { decision: "allow", state: closed(2) }],
    ["Open before nextProbeAt waits until it", open(t0), t0 + 59_999, { decision: "wait", waitUntil: t0 + 60_000, state: open(t0) }],
    [
      "Open at nextProbeAt grants the probe and moves to HalfOpen",
      open(t0),
      t0 + 60_000,
      { decision: "probe", state: halfOpen(true), transition: { from: "Open", to: "HalfOpen" } },
    ],
    [
      "Open long after nextProbeAt grants the probe",
      open(t0),
      t0 + 10 * 60_000,
      { decision: "probe", state: halfOpen(true), transition: { from: "Open", to: "HalfOpen" } },
    ],
    [
      "Open without nextProbeAt falls back to openedAt + cooldown",
      { ...open(t0), nextProbeAt: undefined },
      t0 + 1_000,
      { decision: "wait", waitUntil: t0 + 60_000, state: { ...open(t0), nextProbeAt: undefined } },
    ],
    ["HalfOpen with a probe in flight waits with no deadline", halfOpen(true), t0 + 70_000, { decision: "wait", state: halfOpen(true) }],
    ["HalfOpen without a probe in flight grants one", halfOpen(false, 1), t0 + 70_000, { decision: "probe", state: halfOpen(true, 1) }],
  ];

  it.each(table)("%s", (_name, state, now, expected) => {
    const before = structuredClone(state);
    expect(admit(state, now, cfg)).toEqual(expected);
    expect(state).toEqual(before);
  });
});

describe("recordSuccess / recordFailure", () => {
  const table: Array<[string, BreakerState, "success" | "failure", number, ReturnType<typeof recordFailure>]> = [
    ["Closed failure counts", closed(0), "failure", t0, { state: closed(1) }],
    ["Closed failure below the threshold stays Closed", closed(1), "failure", t0, { state: closed(2) }],
    ["Closed failure at the threshold opens", closed(2), "failure", t0, { state: open(t0), transition: { from: "Closed", to: "Open" } }],
    ["Closed success resets the streak", closed(2), "success", t0, { state: closed(0) }],
    ["Closed success with no streak changes nothing", closed(0), "success", t0, { state: closed(0) }],
    ["Open late failure grows the streak, keeps the cooldown", open(t0), "failure", t0 + 5_000, { state: open(t0, 4) }],
    ["Open late success is ignored", open(t0), "success", t0 + 5_000, { state: open(t0) }],
    [
      "HalfOpen failure re-opens with a fresh cooldown",
      halfOpen(true),
      "failure",
      t0 + 61_000,
      { state: open(t0 + 61_000, 4), transition: { from: "HalfOpen", to: "Open" } },
    ],
    [
      "HalfOpen success below successThreshold stays HalfOpen and frees the probe",
      halfOpen(true),
      "success",
      t0 + 61_000,
      { state: { ...halfOpen(false, 1), consecutiveFailures: 0 } },
    ],
    [
      "HalfOpen success at successThreshold closes",
      halfOpen(true, 1),
      "success",
      t0 + 62_000,
      { state: closed(0), transition: { from: "HalfOpen", to: "Closed" } },
    ],
  ];

  it.each(table)("%s", (_name, state, outcome, now, expected) => {
    const before = structuredClone(state);
    const result = outcome === "success" ? recordSuccess(state, now, cfg) : recordFailure(state, now, cfg);
    expect(result).toEqual(expected);
    expect(state).toEqual(before);
  });

  it.each([1, 2, 5])("opens after exactly failureThreshold=%d consecutive failures", (failureThreshold) => {
    const c = { ...cfg, failureThreshold };
    let state: BreakerState = closed();
    for (let i = 1; i < failureThreshold; i++) {
      const r = recordFailure(state, t0 + i, c);
      expect(r.transition).toBeUndefined();
      state = r.state;
    }
    expect(recordFailure(state, t0, c).transition).toEqual({ from: "Closed", to: "Open" });
  });

  it("a success between failures keeps it Closed", () => {
    let state: BreakerState = closed();
    for (const outcome of ["f", "f", "s", "f", "f", "s", "f", "f"]) {
      state = (outcome === "f" ? recordFailure(state, t0, cfg) : recordSuccess(state, t0, cfg)).state;
    }
    expect(state.state).toBe("Closed");
    expect(state.consecutiveFailures).toBe(2);
  });
});

describe("a full cycle", () => {
  it("Closed -> Open -> HalfOpen -> Open -> HalfOpen -> Closed, one probe at a time", () => {
    const c: BreakerConfig = { failureThreshold: 2, successThreshold: 2, cooldownMs: 10_000 };
    const seen: string[] = [];
    let s: BreakerState = closed();
    const step = (r: { state: BreakerState; transition?: { from: string; to: string } }) => {
      if (r.transition) seen.push(`${r.transition.from}->${r.transition.to}`);
      s = r.state;
    };
    step(recordFailure(s, 0, c));
    step(recordFailure(s, 1_000, c));
    expect(admit(s, 5_000, c)).toMatchObject({ decision: "wait", waitUntil: 11_000 });
    const probe = admit(s, 11_000, c);
    expect(probe.decision).toBe("probe");
    step(probe);
    expect(admit(s, 11_001, c).decision).toBe("wait");
    step(recordFailure(s, 12_000, c));
    expect(admit(s, 21_999, c)).toMatchObject({ decision: "wait", waitUntil: 22_000 });
    step(admit(s, 22_000, c));
    step(recordSuccess(s, 22_500, c));
    expect(s.state).toBe("HalfOpen");
    const second = admit(s, 22_600, c);
    expect(second.decision).toBe("probe");
    step(second);
    step(recordSuccess(s, 23_000, c));
    expect(seen).toEqual(["Closed->Open", "Open->HalfOpen", "HalfOpen->Open", "Open->HalfOpen", "HalfOpen->Closed"]);
    expect(s).toEqual(closed());
    expect(admit(s, 23_001, c).decision).toBe("allow");
  });
});

describe("releaseProbe", () => {
  it.each([
    ["HalfOpen with a probe in flight frees it", halfOpen(true, 1), halfOpen(false, 1)],
    ["HalfOpen without a probe is unchanged", halfOpen(false), halfOpen(false)],
    ["Open is unchanged", open(t0), open(t0)],
    ["Closed is unchanged", closed(1), closed(1)],
  ])("%s", (_name, state, expected) => {
    expect(releaseProbe(state)).toEqual(expected);
  });

  it("lets the next admit probe again", () => {
    const released = releaseProbe(halfOpen(true));
    expect(admit(released, t0 + 61_000, cfg).decision).toBe("probe");
  });
});

describe("status round trip", () => {
  const table: Array<[string, BreakerState, BreakerStatus]> = [
    ["Closed", closed(2), { state: "Closed", consecutiveFailures: 2 }],
    [
      "Open",
      open(t0),
      { state: "Open", consecutiveFailures: 3, openedAt: "2025-06-15T12:00:00.000Z", nextProbeAt: "2025-06-15T12:01:00.000Z" },
    ],
    ["HalfOpen (probe and successes are not persisted)", halfOpen(true, 1), { state: "HalfOpen", consecutiveFailures: 3, openedAt: "2025-06-15T12:00:00.000Z" }],
  ];

  it.each(table)("%s", (_name, state, status) => {
    expect(toStatus(state)).toEqual(status);
    const resumed = fromStatus(toStatus(state), t0 + 1, cfg);
    expect(resumed.state).toBe(state.state);
    expect(resumed.consecutiveFailures).toBe(state.consecutiveFailures);
    expect(resumed.openedAt).toBe(state.openedAt);
    expect(resumed.nextProbeAt).toBe(state.nextProbeAt);
    expect(resumed.probeInFlight).toBe(false);
    expect(resumed.halfOpenSuccesses).toBe(0);
  });
});

describe("fromStatus", () => {
  const now = t0 + 30_000;
  const table: Array<[string, BreakerStatus | undefined, BreakerState]> = [
    ["no status: Closed", undefined, closed(0)],
    ["Closed keeps its streak", { state: "Closed", consecutiveFailures: 4 }, closed(4)],
    ["Open keeps its stored nextProbeAt", { state: "Open", consecutiveFailures: 5, openedAt: "2025-06-15T12:00:00Z", nextProbeAt: "2025-06-15T12:05:00Z" }, { ...open(t0, 5), nextProbeAt: t0 + 300_000 }],
    ["Open without nextProbeAt: openedAt + cooldown", { state: "Open", consecutiveFailures: 5, openedAt: "2025-06-15T12:00:00Z" }, open(t0, 5)],
    ["Open with nothing readable: a full cooldown from now", { state: "Open", consecutiveFailures: 5, openedAt: "garbage" }, { ...open(now, 5) }],
    ["HalfOpen resumes with no probe in flight", { state: "HalfOpen", consecutiveFailures: 3, openedAt: "2025-06-15T12:00:00Z" }, halfOpen(false)],
    ["HalfOpen without openedAt", { state: "HalfOpen", consecutiveFailures: 3 }, { ...halfOpen(false), openedAt: undefined }],
    ["negative streak is sanitised", { state: "Closed", consecutiveFailures: -2 }, closed(0)],
    ["non-integer streak is sanitised", { state: "Closed", consecutiveFailures: 1.5 }, closed(0)],
    ["unknown state starts Closed", { state: "Bogus" as "Closed", consecutiveFailures: 9 }, closed(0)],
  ];

  it.each(table)("%s", (_name, status, expected) => {
    const resumed = fromStatus(status, now, cfg);
    expect(resumed).toEqual(Object.fromEntries(Object.entries(expected).filter(([, v]) => v !== undefined)));
  });

  it("a resumed Open breaker waits until its nextProbeAt, then probes", () => {
    const resumed = fromStatus({ state: "Open", consecutiveFailures: 5, openedAt: "2025-06-15T12:00:00Z", nextProbeAt: "2025-06-15T12:01:00Z" }, now, cfg);
    expect(admit(resumed, now, cfg)).toMatchObject({ decision: "wait", waitUntil: t0 + 60_000 });
    expect(admit(resumed, t0 + 60_000, cfg)).toMatchObject({ decision: "probe", transition: { from: "Open", to: "HalfOpen" } });
  });

  it("a resumed HalfOpen breaker grants a probe at once", () => {
    const resumed = fromStatus({ state: "HalfOpen", consecutiveFailures: 5 }, now, cfg);
    expect(admit(resumed, now, cfg).decision).toBe("probe");
  });
});

describe("breakerGaugeValue", () => {
  it.each([
    ["Closed", 0],
    ["Open", 1],
    ["HalfOpen", 2],
  ] as const)("%s -> %d", (state, value) => {
    expect(breakerGaugeValue(state)).toBe(value);
  });
});
