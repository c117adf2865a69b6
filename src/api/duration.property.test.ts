// Properties of Kubernetes-style durations: formatDuration and parseDuration round trip every
// representable number of ms; a string parses iff DURATION_PATTERN accepts it (and it fits in a
// safe integer of ms), to the exact sum of its terms rounded to the nearest ms; everything else
// is refused naming the input; the API's duration fields enforce their bounds.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DURATION_PATTERN, formatDuration, parseDuration } from "./duration.js";
import { DURATION_MAX_LENGTH, duration } from "./fields.js";

const re = new RegExp(DURATION_PATTERN);
const UNIT_MS = { ms: 1n, s: 1_000n, m: 60_000n, h: 3_600_000n } as const;
type Unit = keyof typeof UNIT_MS;

const digits = (max: number) => fc.stringMatching(new RegExp(`^[0-9]{1,${max}}$`));
/** One `<number><unit>` term of the grammar, in every spelling it allows: 1, 1.5, .5, 1. */
const termArb = fc.record({
  whole: fc.oneof(digits(4), fc.constant("")),
  frac: fc.option(fc.oneof(digits(6), digits(16), fc.constant("")), { nil: undefined }),
  unit: fc.constantFrom<Unit>("ms", "s", "m", "h"),
}).filter((t) => t.whole !== "" || (t.frac !== undefined && t.frac !== ""));
const termText = (t: { whole: string; frac: string | undefined; unit: Unit }) => `${t.whole}${t.frac === undefined ? "" : `.${t.frac}`}${t.unit}`;

/** The exact value of the terms in ms, rounded half up like Math.round, computed with BigInt. */
function exactMs(terms: Array<{ whole: string; frac: string | undefined; unit: Unit }>): number {
  // Sum as a fraction over 10^16 (the longest fraction generated).
  const scale = 10n ** 16n;
  let numerator = 0n;
  for (const t of terms) {
    const frac = (t.frac ?? "").padEnd(16, "0");
    numerator += (BigInt(t.whole || "0") * scale + BigInt(frac)) * UNIT_MS[t.unit];
  }
  return Number((numerator * 2n + scale) / (2n * scale));
}

describe("durations (properties)", () => {
  it("parseDuration(formatDuration(ms)) === ms for every safe integer of ms, and the text matches the pattern", () => {
    const msArb = fc.oneof(fc.nat(10_000), fc.nat(100_000_000), fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }));
    fc.assert(
      fc.property(msArb, (ms) => {
        const text = formatDuration(ms);
        expect(text).toMatch(re);
        expect(parseDuration(text)).toBe(ms);
        // The shortest spelling leaves zero components out.
        expect(text === "0s" || !/(^|[^0-9.])0+(h|m|s|ms)/.test(text)).toBe(true);
      }),
    );
  });

  it("any string the grammar generates parses to the exact sum of its terms, rounded to the nearest ms", () => {
    fc.assert(
      fc.property(fc.array(termArb, { minLength: 1, maxLength: 4 }), (terms) => {
        const text = terms.map(termText).join("");
        expect(text).toMatch(re);
        expect(parseDuration(text)).toBe(exactMs(terms));
      }),
    );
  });

  it("a fraction a hair above or below a half millisecond rounds the right way (long fractions count)", () => {
    // (k + 1/2) ms written in s, m or h with 16 fraction digits, rounded up or down in the last
    // digit: exactly the value the term names decides, not a float or a truncated fraction.
    fc.assert(
      fc.property(fc.nat(10_000_000), fc.constantFrom<Unit>("s", "m", "h"), fc.boolean(), (k, unit, above) => {
        const scale = 10n ** 16n;
        const twice = BigInt(2 * k + 1) * scale; // 2 * (k + 1/2) ms, over 10^16
        const per = 2n * UNIT_MS[unit];
        const n = twice / per + (above ? 1n : 0n); // value in `unit`, times 10^16, nudged across the half
        const text = `${n / scale}.${(n % scale).toString().padStart(16, "0")}${unit}`;
        expect(parseDuration(text)).toBe(exactMs([{ whole: (n / scale).toString(), frac: (n % scale).toString().padStart(16, "0"), unit }]));
      }),
    );
  });

  it("format(parse(s)) is a canonical spelling of the same duration", () => {
    fc.assert(
      fc.property(fc.array(termArb, { minLength: 1, maxLength: 4 }), (terms) => {
        const ms = parseDuration(terms.map(termText).join(""));
        expect(parseDuration(formatDuration(ms))).toBe(ms);
        expect(formatDuration(parseDuration(formatDuration(ms)))).toBe(formatDuration(ms));
      }),
    );
  });

  it("a string parses iff the CRD pattern accepts it; every refusal names the input", () => {
    const junk = fc.oneof(
      fc.string(),
      fc.stringMatching(/^[0-9.a-z µ+-]{0,12}$/),
      fc.tuple(fc.array(termArb, { minLength: 1, maxLength: 3 }), fc.string({ maxLength: 2 }), fc.nat(20)).map(([terms, s, i]) => {
        const text = terms.map(termText).join("");
        const at = i % (text.length + 1);
        return text.slice(0, at) + s + text.slice(at);
      }),
    );
    fc.assert(
      fc.property(junk, (s) => {
        let parsed: number | undefined;
        let error: Error | undefined;
        try {
          parsed = parseDuration(s);
        } catch (e) {
          error = e as Error;
        }
        if (!re.test(s)) {
          expect(error?.message).toContain(`invalid duration ${JSON.stringify(s)}`);
        } else if (error) {
          expect(error.message).toMatch(/too large/);
        } else {
          expect(Number.isSafeInteger(parsed)).toBe(true);
          expect(parsed).toBeGreaterThanOrEqual(0);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("an API duration field accepts a well-formed value iff it lies within its bounds", () => {
    const bounds: Array<[string, string]> = [
      ["10ms", "1h"],
      ["1s", "300s"],
      ["100ms", "120s"],
      ["0s", "8760h"],
    ];
    const schemas = bounds.map(([lo, hi]) => ({ schema: duration(lo, hi, "x"), lo: parseDuration(lo), hi: parseDuration(hi) }));
    const valueArb = fc.oneof(
      fc.array(termArb, { minLength: 1, maxLength: 3 }).map((ts) => ts.map(termText).join("")),
      fc.integer({ min: 0, max: 40_000_000_000 }).map(formatDuration),
      fc.constantFrom(...bounds.flat()),
    );
    fc.assert(
      fc.property(valueArb, fc.constantFrom(...schemas), (value, { schema, lo, hi }) => {
        const ms = parseDuration(value);
        expect(schema.safeParse(value).success).toBe(value.length <= DURATION_MAX_LENGTH && ms >= lo && ms <= hi);
      }),
    );
  });
});
