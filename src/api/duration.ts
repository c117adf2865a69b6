// Kubernetes/Go-style duration strings ("250ms", "10s", "1h30m") for the API: the parser, the
// formatter and the CRD OpenAPI pattern, kept in one file so the three cannot drift apart.
// Imports nothing from src/ (the CRD builder and the schemas both depend on it).

/**
 * Go's `time.ParseDuration` grammar restricted to the units `ms`, `s`, `m` and `h`, with no sign:
 * one or more `<number><unit>` terms (`1h30m`, `1.5s`, `.5s`, `1.s`), or a bare `0`.
 * Anchored, and written for both ECMAScript and RE2 (the API server validates patterns with
 * Go's regexp), so it has no lookarounds or backreferences.
 */
export const DURATION_PATTERN = "^(?:0|(?:(?:[0-9]+(?:\\.[0-9]*)?|\\.[0-9]+)(?:ms|s|m|h))+)$";

const durationRe = new RegExp(DURATION_PATTERN);
const termRe = /([0-9]*)(?:\.([0-9]*))?(ms|s|m|h)/g;

export type DurationUnit = "ms" | "s" | "m" | "h";

const unitMs: Readonly<Record<DurationUnit, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/**
 * Parses a duration into whole milliseconds (sub-millisecond parts are rounded to the nearest
 * millisecond: "1.4ms" is 1). Throws an Error naming the input when it does not match
 * DURATION_PATTERN, and when it is beyond Number.MAX_SAFE_INTEGER ms (~285,000 years), the one
 * input the pattern accepts and the parser refuses.
 */
export function parseDuration(s: string): number {
  if (typeof s !== "string" || !durationRe.test(s)) {
    throw new Error(
      `invalid duration ${JSON.stringify(s)}: expected a non-negative duration such as "250ms", "10s", "1.5m" or "1h30m" (units ms, s, m, h)`,
    );
  }
  if (s === "0") return 0;
  // Exact arithmetic: every term over one power of ten (the longest fraction), so neither a float
  // nor a cut-off fraction can move a value that lies a hair off a half millisecond.
  const terms = [...s.matchAll(termRe)].map((m) => ({ whole: m[1] ?? "", frac: m[2] ?? "", unit: BigInt(unitMs[m[3] as DurationUnit]) }));
  const fracDigits = Math.max(0, ...terms.map((t) => t.frac.length));
  const denominator = 10n ** BigInt(fracDigits);
  let numerator = 0n;
  for (const t of terms) {
    numerator += (BigInt(t.whole || "0") * denominator + BigInt(t.frac.padEnd(fracDigits, "0") || "0")) * t.unit;
  }
  const ms = (2n * numerator + denominator) / (2n * denominator); // nearest ms, halves up
  if (ms > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new Error(`invalid duration ${JSON.stringify(s)}: too large`);
  }
  return Number(ms);
}

/**
 * The shortest Go-like spelling of a non-negative number of milliseconds (rounded to whole
 * milliseconds): 0 -> "0s", 250 -> "250ms", 1500 -> "1.5s", 90000 -> "1m30s", 3600000 -> "1h",
 * 5400000 -> "1h30m". Zero components are left out, unlike Go's "1h0m0s". Always parseable by
 * parseDuration, which returns the same number.
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) {
    throw new Error(`cannot format duration ${ms}: expected a finite number of milliseconds >= 0`);
  }
  const total = Math.round(ms);
  if (total === 0) return "0s";
  if (total < 1_000) return `${total}ms`;
  const hours = Math.floor(total / unitMs.h);
  const minutes = Math.floor((total % unitMs.h) / unitMs.m);
  const secondsMs = total % unitMs.m;
  let out = "";
  if (hours > 0) out += `${hours}h`;
  if (minutes > 0) out += `${minutes}m`;
  if (secondsMs > 0) {
    const seconds = Math.floor(secondsMs / 1_000);
    const millis = secondsMs % 1_000;
    out += millis === 0 ? `${seconds}s` : `${seconds}.${String(millis).padStart(3, "0").replace(/0+$/, "")}s`;
  }
  return out;
}
