// What a scripted receiver endpoint does with a request, and the seeded choice of the next one.
import type { Rng } from "./rng.js";

export type Behaviour =
  | { kind: "ok"; status?: number }
  | { kind: "status"; status: number }
  | { kind: "retryAfter"; status: 408 | 429 | 503; retryAfterSeconds: number; retryAfterDate: boolean }
  | { kind: "slowHeaders"; delayMs: number }
  | { kind: "trickle"; delayMs: number }
  | { kind: "huge" }
  | { kind: "reset" }
  | { kind: "hang" }
  | { kind: "redirect"; status: 301 | 302 | 307 };

/** Mostly healthy, so deliveries progress; every kind of trouble now and then. */
export function nextBehaviour(rng: Rng): Behaviour {
  const kind = rng.weighted<Behaviour["kind"]>([
    ["ok", 10],
    ["status", 3],
    ["retryAfter", 2],
    ["slowHeaders", 1.5],
    ["trickle", 1],
    ["huge", 0.7],
    ["reset", 1],
    ["hang", 0.7],
    ["redirect", 0.5],
  ]);
  switch (kind) {
    case "ok":
      return { kind, status: rng.pick([200, 200, 200, 201, 202, 204]) };
    case "status":
      return { kind, status: rng.weighted([[500, 4], [502, 2], [400, 1], [404, 1], [410, 0.4]] as const) };
    case "retryAfter":
      return { kind, status: rng.pick([408, 429, 503] as const), retryAfterSeconds: rng.int(1, 3), retryAfterDate: rng.chance(0.4) };
    case "slowHeaders":
      return { kind, delayMs: rng.int(200, 3_000) };
    case "trickle":
      return { kind, delayMs: rng.int(200, 2_000) };
    case "huge":
    case "reset":
    case "hang":
      return { kind };
    case "redirect":
      return { kind, status: rng.pick([301, 302, 307] as const) };
  }
}

/** Whether the behaviour lets a request succeed (2xx reaches the operator in time). */
export const admits = (b: Behaviour): boolean => b.kind === "ok" || b.kind === "trickle" || b.kind === "huge" || b.kind === "slowHeaders";
