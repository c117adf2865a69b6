// Properties of the circuit breaker, checked against a small reference model of the contract:
// Closed opens after exactly failureThreshold consecutive failures (a success resets the
// streak); Open -> HalfOpen only once the cooldown has passed; HalfOpen admits one probe at a
// time; successThreshold successes close it; a failure re-opens it with a fresh cooldown; and
// the status round trip (toStatus -> fromStatus) resumes the same breaker.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { admit, closedBreaker, fromStatus, recordFailure, recordSuccess, recordReport, releaseProbe, toStatus, type BreakerConfig, type BreakerState } from "./breaker.js";

const T0 = Date.UTC(2025, 5, 15, 12, 0, 0);

// The API's ranges: failureThreshold 1..100, successThreshold 1..20, cooldown 1s..300s.
const cfgArb: fc.Arbitrary<BreakerConfig> = fc.record({
  failureThreshold: fc.integer({ min: 1, max: 100 }),
  successThreshold: fc.integer({ min: 1, max: 20 }),
  cooldownMs: fc.integer({ min: 1_000, max: 300_000 }),
});
// Small configs reach every state in short traces.
const smallCfgArb: fc.Arbitrary<BreakerConfig> = fc.record({
  failureThreshold: fc.integer({ min: 1, max: 5 }),
  successThreshold: fc.integer({ min: 1, max: 4 }),
  cooldownMs: fc.integer({ min: 1_000, max: 300_000 }),
});
const dtArb = fc.oneof(fc.integer({ min: 0, max: 2_000 }), fc.integer({ min: 0, max: 400_000 }));
type Result = "success" | "failure" | "interrupted";
const resultArb = fc.constantFrom<Result>("success", "failure", "failure", "interrupted");

/** The contract as a reference model, written from the spec, not from breaker.ts. */
interface Model {
  name: BreakerState["state"];
  streak: number;
  halfOpenSuccesses: number;
  nextProbeAt: number;
}

describe("breaker (properties)", () => {
  it("Closed opens on exactly the failureThreshold-th consecutive failure; a success resets the streak", () => {
    fc.assert(
      fc.property(cfgArb, fc.array(fc.boolean(), { maxLength: 300, size: "max" }), (cfg, outcomes) => {
        let s: BreakerState = { ...closedBreaker };
        let streak = 0;
        for (const [i, ok] of outcomes.entries()) {
          const r = ok ? recordSuccess(s, T0 + i, cfg) : recordFailure(s, T0 + i, cfg);
          streak = ok ? 0 : streak + 1;
          if (streak === cfg.failureThreshold) {
            expect(r.transition).toEqual({ from: "Closed", to: "Open" });
            expect(r.state).toMatchObject({ state: "Open", consecutiveFailures: streak, openedAt: T0 + i, nextProbeAt: T0 + i + cfg.cooldownMs });
            return;
          }
          expect(r.transition).toBeUndefined();
          expect(r.state).toMatchObject({ state: "Closed", consecutiveFailures: streak });
          s = r.state;
        }
      }),
      { numRuns: 50 },
    );
  });

  it("a sequential caller sees exactly the reference model: cooldown, one probe at a time, successThreshold, re-open", () => {
    const stepArb = fc.record({ dt: dtArb, result: resultArb, extraAdmits: fc.array(fc.integer({ min: 0, max: 400_000 }), { maxLength: 2 }) });
    fc.assert(
      fc.property(smallCfgArb, fc.array(stepArb, { minLength: 1, maxLength: 60, size: "max" }), (cfg, steps) => {
        let s: BreakerState = { ...closedBreaker };
        const m: Model = { name: "Closed", streak: 0, halfOpenSuccesses: 0, nextProbeAt: 0 };
        let t = T0;
        for (const step of steps) {
          t += step.dt;
          const a = admit(s, t, cfg);
          // Reference admission.
          if (m.name === "Open" && t < m.nextProbeAt) {
            expect(a).toMatchObject({ decision: "wait", waitUntil: m.nextProbeAt });
            expect(a.state).toBe(s);
            continue;
          }
          const expectedDecision = m.name === "Closed" ? "allow" : "probe";
          expect(a.decision).toBe(expectedDecision);
          if (m.name === "Open") {
            expect(a.transition).toEqual({ from: "Open", to: "HalfOpen" });
            m.name = "HalfOpen";
            m.halfOpenSuccesses = 0;
          }
          s = a.state;
          // While the probe is out, nobody else gets one, however long it takes.
          if (a.decision === "probe") {
            for (const later of step.extraAdmits) expect(admit(s, t + later, cfg).decision).toBe("wait");
          }
          // The attempt reports back.
          if (step.result === "interrupted") {
            if (a.decision === "probe") s = releaseProbe(s);
          } else if (step.result === "success") {
            const r = recordSuccess(s, t, cfg);
            s = r.state;
            if (m.name === "Closed") m.streak = 0;
            else if (++m.halfOpenSuccesses >= cfg.successThreshold) {
              expect(r.transition).toEqual({ from: "HalfOpen", to: "Closed" });
              Object.assign(m, { name: "Closed", streak: 0 });
            }
          } else {
            const r = recordFailure(s, t, cfg);
            s = r.state;
            m.streak++;
            if (m.name === "HalfOpen" || m.streak >= cfg.failureThreshold) {
              expect(r.transition).toEqual({ from: m.name, to: "Open" });
              Object.assign(m, { name: "Open", nextProbeAt: t + cfg.cooldownMs });
            }
          }
          const expected: Model = { ...m }; // read afresh: Object.assign above changes m behind TS's narrowing
          expect(s.state).toBe(expected.name);
          if (expected.name === "Closed") expect(s.consecutiveFailures).toBe(expected.streak);
          if (expected.name === "Open") expect(s.nextProbeAt).toBe(expected.nextProbeAt);
        }
      }),
    );
  });

  it("with concurrent attempts reporting late, at most one probe is ever in flight", () => {
    // A faithful caller (delivery-reconciler.recordOnEndpoint): every admitted attempt reports
    // back some time later, in any order, whatever the breaker's state is by then; an
    // interrupted probe releases its slot.
    // Mostly simultaneous events, now and then a jump past any cooldown.
    const concurrentDtArb = fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.constant(300_000) }, { weight: 1, arbitrary: dtArb });
    const opArb = fc.oneof(
      fc.record({ kind: fc.constant("admit" as const), dt: concurrentDtArb }),
      fc.record({ kind: fc.constant("report" as const), dt: concurrentDtArb, pick: fc.nat(), result: resultArb }),
    );
    fc.assert(
      fc.property(smallCfgArb, fc.array(opArb, { minLength: 1, maxLength: 80, size: "max" }), (cfg, ops) => {
        let s: BreakerState = { ...closedBreaker };
        let t = T0;
        const inFlight: Array<{ probe: boolean }> = [];
        for (const op of ops) {
          t += op.dt;
          if (op.kind === "admit") {
            const a = admit(s, t, cfg);
            s = a.state;
            if (a.decision !== "wait") inFlight.push({ probe: a.decision === "probe" });
          } else if (inFlight.length > 0) {
            const [attempt] = inFlight.splice(op.pick % inFlight.length, 1);
            if (op.result === "interrupted") s = attempt!.probe ? releaseProbe(s) : s;
            else s = recordReport(s, t, cfg, { success: op.result === "success", probe: attempt!.probe }).state;
          }
          expect(inFlight.filter((a) => a.probe).length).toBeLessThanOrEqual(1);
        }
      }),
      { numRuns: 500 },
    );
  });

  it("survives the status round trip: fromStatus(toStatus(x)) resumes the same state, streak, openedAt and nextProbeAt", () => {
    const stateArb: fc.Arbitrary<BreakerState> = fc.oneof(
      fc.record({ consecutiveFailures: fc.nat(1_000) }).map((r) => ({ ...closedBreaker, ...r })),
      fc
        .record({ consecutiveFailures: fc.integer({ min: 1, max: 1_000 }), openedAt: fc.integer({ min: 0, max: T0 * 2 }), cooldown: fc.integer({ min: 1_000, max: 300_000 }) })
        .map(({ consecutiveFailures, openedAt, cooldown }) => ({ state: "Open" as const, consecutiveFailures, halfOpenSuccesses: 0, openedAt, nextProbeAt: openedAt + cooldown, probeInFlight: false })),
      fc
        .record({ consecutiveFailures: fc.nat(1_000), openedAt: fc.integer({ min: 0, max: T0 * 2 }), halfOpenSuccesses: fc.nat(19), probeInFlight: fc.boolean() })
        .map((r) => ({ state: "HalfOpen" as const, ...r })),
    );
    fc.assert(
      fc.property(stateArb, cfgArb, fc.integer({ min: 0, max: T0 * 2 }), (x, cfg, now) => {
        const resumed = fromStatus(toStatus(x), now, cfg);
        expect(resumed.state).toBe(x.state);
        expect(resumed.consecutiveFailures).toBe(x.consecutiveFailures);
        expect(resumed.openedAt).toBe(x.openedAt);
        expect(resumed.nextProbeAt).toBe(x.nextProbeAt);
        // Not in the status, by design: a resumed HalfOpen breaker starts its count again.
        expect(resumed.probeInFlight).toBe(false);
        expect(resumed.halfOpenSuccesses).toBe(0);
        // An Open breaker answers the same before and after a restart.
        if (x.state === "Open") expect(admit(resumed, now, cfg).decision).toBe(admit(x, now, cfg).decision);
        // And the status itself is a fixed point.
        expect(toStatus(resumed)).toEqual(toStatus(x));
      }),
    );
  });

  it("never mutates its input", () => {
    fc.assert(
      fc.property(smallCfgArb, fc.array(fc.tuple(dtArb, fc.constantFrom("admit", "success", "failure", "release")), { maxLength: 40 }), (cfg, ops) => {
        let s: BreakerState = { ...closedBreaker };
        let t = T0;
        for (const [dt, op] of ops) {
          t += dt;
          const before = structuredClone(s);
          const next =
            op === "admit" ? admit(s, t, cfg).state
            : op === "success" ? recordSuccess(s, t, cfg).state
            : op === "failure" ? recordFailure(s, t, cfg).state
            : releaseProbe(s);
          expect(s).toEqual(before);
          s = next;
        }
      }),
    );
  });
});
