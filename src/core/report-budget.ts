// A budget for informational writes that must still happen eventually: each request gets a time
// slot (the generic cell rate algorithm): `burst` at once, then one per 1/perSecond; a request
// over the budget is not refused but told how long to wait for its reserved slot. Pure: the
// caller keeps the returned `tat` (theoretical arrival time) per budget.
import type { RateLimit } from "./endpoint/token-bucket.js";

export interface Reservation {
  /** The budget's state to keep for the next request. */
  tat: number;
  /** 0: go now; otherwise come back after this long (the slot is reserved). */
  delayMs: number;
}

export function reserve(tat: number | undefined, now: number, cfg: RateLimit): Reservation {
  const interval = 1000 / cfg.perSecond;
  const tolerance = (cfg.burst - 1) * interval;
  const start = Math.max(tat ?? now, now);
  const allowedAt = start - tolerance;
  return { tat: start + interval, delayMs: Math.max(0, Math.ceil(allowedAt - now)) };
}
