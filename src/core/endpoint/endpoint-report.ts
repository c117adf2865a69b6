// What one attempt's result does to its endpoint's breaker and health, in one pure function:
// the executor reports every real attempt here (an interrupted one only gives back its probe).
import { endpointSignal, type Classification } from "../attempt/classify.js";
import * as breaker from "./breaker.js";
import * as health from "./health.js";

export interface EndpointState {
  breaker: breaker.BreakerState;
  health: health.HealthState;
}

export interface EndpointReport extends EndpointState {
  breakerTransition?: breaker.BreakerTransition;
  healthTransition?: health.HealthTransition;
  /** Whether the result says anything about the endpoint (an interrupted attempt does not). */
  counted: boolean;
}

/**
 * `probe`: the attempt was the breaker's (or a Disabled endpoint's) single trial. `explicit`: an
 * operator's replay, which speaks for the endpoint whatever state the breaker is in.
 */
export function reportAttempt(
  s: EndpointState,
  result: Classification | "interrupted",
  opts: { now: number; probe: boolean; explicit: boolean; breaker: breaker.BreakerConfig; health: health.HealthConfig },
): EndpointReport {
  const signal = result === "interrupted" ? "none" : endpointSignal(result);
  if (signal === "none") return { breaker: opts.probe ? breaker.releaseProbe(s.breaker) : s.breaker, health: s.health, counted: false };
  const success = signal === "success";
  const b = breaker.recordReport(s.breaker, opts.now, opts.breaker, { success, probe: opts.probe, explicit: opts.explicit });
  const h = success ? health.recordSuccess(s.health, opts.now) : health.recordFailure(s.health, opts.now, signal === "gone" ? "gone" : "failure", opts.health);
  return {
    breaker: b.state,
    health: h.state,
    ...(b.transition ? { breakerTransition: b.transition } : {}),
    ...(h.transition ? { healthTransition: h.transition } : {}),
    counted: true,
  };
}
