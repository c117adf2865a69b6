// Properties of endpoint health against a reference model of the contract: Degraded at 3
// consecutive failures, Disabled at 10 or at once on a 410, Disabled until a success (whatever
// else fails meanwhile), a success makes it Healthy from any state; a Disabled endpoint admits
// only probes, at most one per probe interval; the status round trip restores the state.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { admit, fromStatus, healthConfig, healthyEndpoint, recordFailure, recordSuccess, toStatus, type HealthState, type HealthUpdate } from "./health.js";

const T0 = Date.UTC(2025, 5, 15, 12, 0, 0);
type Outcome = "success" | "failure" | "gone";
const outcomeArb = fc.oneof(
  { weight: 2, arbitrary: fc.constant<Outcome>("success") },
  { weight: 6, arbitrary: fc.constant<Outcome>("failure") },
  { weight: 1, arbitrary: fc.constant<Outcome>("gone") },
);
const intervalArb = fc.integer({ min: 1_000, max: 3_600_000 });
const dtArb = fc.integer({ min: 0, max: 600_000 });

function apply(s: HealthState, o: Outcome, now: number, interval: number): HealthUpdate {
  return o === "success" ? recordSuccess(s, now) : recordFailure(s, now, o, healthConfig(interval));
}

/** Runs outcomes from a fresh endpoint; returns every state along the way. */
function run(outcomes: Array<[Outcome, number]>, interval: number): HealthState[] {
  const states: HealthState[] = [{ ...healthyEndpoint }];
  let t = T0;
  for (const [o, dt] of outcomes) {
    t += dt;
    states.push(apply(states.at(-1)!, o, t, interval).state);
  }
  return states;
}

describe("health (properties)", () => {
  it("follows the reference model: thresholds 3 and 10, 410 disables at once, Disabled until a success, counters exact", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(outcomeArb, dtArb), { maxLength: 60, size: "max" }), intervalArb, (outcomes, interval) => {
        let streak = 0;
        let disabled: "Gone" | "Failures" | undefined;
        let attempts = 0;
        let failures = 0;
        let t = T0;
        let s: HealthState = { ...healthyEndpoint };
        for (const [o, dt] of outcomes) {
          t += dt;
          const prev = s.state;
          const r = apply(s, o, t, interval);
          s = r.state;
          attempts++;
          if (o === "success") {
            streak = 0;
            disabled = undefined;
          } else {
            streak++;
            failures++;
            if (disabled === undefined && (o === "gone" || streak >= 10)) disabled = o === "gone" ? "Gone" : "Failures";
          }
          const expected = disabled ? "Disabled" : streak >= 3 ? "Degraded" : "Healthy";
          expect(s.state).toBe(expected);
          expect(s).toMatchObject({ consecutiveFailures: streak, totalAttempts: attempts, totalFailures: failures });
          expect(s.disabledReason).toBe(disabled);
          if (disabled) expect(s.nextProbeAt).toBe(t + interval);
          else expect(s).not.toHaveProperty("nextProbeAt");
          expect(r.transition).toEqual(prev === expected ? undefined : { from: prev, to: expected });
        }
      }),
      { numRuns: 60 },
    );
  });

  it("a 410 disables at once and a success makes it Healthy, from any state", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(outcomeArb, dtArb), { maxLength: 30 }), intervalArb, dtArb, (outcomes, interval, dt) => {
        const s = run(outcomes, interval).at(-1)!;
        const now = T0 + 100_000_000 + dt;
        expect(recordFailure(s, now, "gone", healthConfig(interval)).state).toMatchObject({ state: "Disabled", nextProbeAt: now + interval });
        const ok = recordSuccess(s, now).state;
        expect(ok).toMatchObject({ state: "Healthy", consecutiveFailures: 0, lastSuccessAt: now });
        expect(ok).not.toHaveProperty("disabledReason");
        expect(ok).not.toHaveProperty("nextProbeAt");
      }),
    );
  });

  it("Healthy and Degraded always admit; Disabled admits only probes, the first at nextProbeAt, then at most one per interval", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(outcomeArb, dtArb), { maxLength: 30 }),
        intervalArb,
        fc.array(fc.integer({ min: 0, max: 200_000 }), { minLength: 1, maxLength: 60, size: "max" }),
        (outcomes, interval, gaps) => {
          let s = run(outcomes, interval).at(-1)!;
          const cfg = healthConfig(interval);
          let t = T0 + 100_000_000;
          let lastProbe: number | undefined;
          const firstProbeAt = s.nextProbeAt ?? t;
          for (const gap of gaps) {
            t += gap;
            const a = admit(s, t, cfg);
            if (s.state !== "Disabled") {
              expect(a.decision).toBe("allow");
              continue;
            }
            expect(a.decision).not.toBe("allow");
            const due = lastProbe === undefined ? t >= firstProbeAt : t >= lastProbe + interval;
            // A probe exactly when one is due (never early, never withheld), then the next one interval on.
            expect(a.decision).toBe(due ? "probe" : "wait");
            if (a.decision === "probe") {
              expect(a.state.nextProbeAt).toBe(t + interval);
              lastProbe = t;
            } else {
              expect(a.waitUntil).toBeGreaterThan(t);
            }
            s = a.state;
          }
        },
      ),
    );
  });

  it("survives the status round trip: fromStatus(toStatus(x)) === x for every reachable state", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(outcomeArb, dtArb), { maxLength: 40 }), intervalArb, fc.integer({ min: 0, max: 2 * T0 }), (outcomes, interval, now) => {
        for (const x of run(outcomes, interval)) {
          expect(fromStatus(toStatus(x), now, healthConfig(interval))).toEqual(x);
        }
      }),
    );
  });
});
