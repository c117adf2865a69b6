// Properties of Retry-After parsing (RFC 9110 §10.2.3): delta-seconds and the three HTTP-date
// forms give the delay they name, capped at one hour; a date in the past gives 0 (no extra
// delay); garbage gives undefined (ignored). How outcome.ts combines it with the backoff is in
// outcome.property.test.ts.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { RETRY_AFTER_CAP_MS } from "./backoff.js";
import { parseHttpDate, parseRetryAfter } from "./retry-after.js";

const DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const LONG_DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const pad2 = (n: number) => String(n).padStart(2, "0");

// Whole seconds from 1970 to 9999 (the four-digit years an IMF-fixdate can carry).
const secondsArb = fc.integer({ min: 0, max: Math.floor(Date.UTC(9999, 11, 31, 23, 59, 59) / 1000) }).map((s) => s * 1000);
const nowArb = fc.integer({ min: 0, max: Date.UTC(9999, 0, 1) });

function imfFixdate(ms: number): string {
  return new Date(ms).toUTCString(); // "Sun, 06 Nov 1994 08:49:37 GMT"
}
function asctime(ms: number): string {
  const d = new Date(ms);
  const day = String(d.getUTCDate()).padStart(2, " ");
  return `${DAYS[d.getUTCDay()]} ${MONTHS[d.getUTCMonth()]} ${day} ${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())}:${pad2(d.getUTCSeconds())} ${d.getUTCFullYear()}`;
}
function rfc850(ms: number): string {
  const d = new Date(ms);
  return `${LONG_DAYS[d.getUTCDay()]}, ${pad2(d.getUTCDate())}-${MONTHS[d.getUTCMonth()]}-${pad2(d.getUTCFullYear() % 100)} ${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())}:${pad2(d.getUTCSeconds())} GMT`;
}

describe("parseRetryAfter (properties)", () => {
  it("delta-seconds n (any length, optional surrounding spaces) is min(n s, 1 h)", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 30n }), fc.constantFrom("", " ", "\t"), nowArb, (n, ws, now) => {
        const expected = n * 1000n > BigInt(RETRY_AFTER_CAP_MS) ? RETRY_AFTER_CAP_MS : Number(n * 1000n);
        expect(parseRetryAfter(`${ws}${n}${ws}`, now)).toBe(expected);
      }),
    );
  });

  it("an HTTP-date in any of the three forms is clamp(date - now, 0, 1 h): never negative, past dates give 0", () => {
    fc.assert(
      fc.property(secondsArb, nowArb, (at, now) => {
        const expected = Math.min(Math.max(0, at - now), RETRY_AFTER_CAP_MS);
        expect(parseRetryAfter(imfFixdate(at), now)).toBe(expected);
        if (new Date(at).getUTCFullYear() >= 1000) expect(parseRetryAfter(asctime(at), now)).toBe(expected);
      }),
    );
  });

  it("a date near now gives exactly the distance to it (the cap aside)", () => {
    fc.assert(
      fc.property(nowArb, fc.integer({ min: -7_200, max: 7_200 }), (now, deltaSeconds) => {
        const at = (Math.floor(now / 1000) + deltaSeconds) * 1000;
        fc.pre(at >= 0);
        const got = parseRetryAfter(imfFixdate(at), now);
        expect(got).toBe(Math.min(Math.max(0, at - now), RETRY_AFTER_CAP_MS));
      }),
    );
  });

  it("never returns anything but undefined or a whole number of ms in [0, 1 h] for any string", () => {
    const anyText = fc.oneof(
      fc.string(),
      fc.string({ unit: "binary" }),
      fc.stringMatching(/^[ -~]{0,40}$/),
      // Near misses of the valid forms.
      fc.tuple(secondsArb, fc.nat(40), fc.string({ maxLength: 2 })).map(([at, i, s]) => {
        const t = imfFixdate(at);
        return t.slice(0, i % t.length) + s + t.slice((i % t.length) + 1);
      }),
    );
    fc.assert(
      fc.property(anyText, nowArb, (text, now) => {
        const got = parseRetryAfter(text, now);
        if (got !== undefined) {
          expect(Number.isInteger(got)).toBe(true);
          expect(got).toBeGreaterThanOrEqual(0);
          expect(got).toBeLessThanOrEqual(RETRY_AFTER_CAP_MS);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("signed, fractional, exponent, hex and unit-suffixed numbers are refused", () => {
    const bad = fc.oneof(
      fc.integer({ min: 0, max: 1_000_000 }).map((n) => `-${n}`),
      fc.integer({ min: 0, max: 1_000_000 }).map((n) => `+${n}`),
      fc.tuple(fc.nat(10_000), fc.nat(999)).map(([a, b]) => `${a}.${b}`),
      fc.nat(100).map((n) => `${n}e3`),
      fc.nat(100_000).map((n) => `0x${n.toString(16)}`),
      fc.tuple(fc.nat(1000), fc.constantFrom("s", "ms", "m", "h", " seconds")).map(([n, u]) => `${n}${u}`),
    );
    fc.assert(
      fc.property(bad, nowArb, (text, now) => {
        expect(parseRetryAfter(text, now)).toBeUndefined();
      }),
    );
  });
});

describe("parseHttpDate (properties)", () => {
  it("IMF-fixdate and asctime round trip any whole second of years 1000..9999", () => {
    fc.assert(
      fc.property(secondsArb, nowArb, (at, now) => {
        fc.pre(new Date(at).getUTCFullYear() >= 1000);
        expect(parseHttpDate(imfFixdate(at), now)).toBe(at);
        expect(parseHttpDate(asctime(at), now)).toBe(at);
      }),
    );
  });

  it("RFC 850's two-digit year is the year with those digits no more than 50 years ahead of now, nor 50 or more behind", () => {
    // RFC 9110 §5.6.7: a two-digit year "more than 50 years in the future" is the most recent past
    // year with the same last two digits; so the year lies in [thisYear - 49, thisYear + 50].
    fc.assert(
      fc.property(fc.integer({ min: Date.UTC(1970, 0, 1), max: Date.UTC(9899, 0, 1) }), fc.integer({ min: -49, max: 50 }), secondsArb, (now, yearsAhead, timeOfYear) => {
        const thisYear = new Date(now).getUTCFullYear();
        const t = new Date(timeOfYear);
        const year = thisYear + yearsAhead;
        const at = Date.UTC(year, t.getUTCMonth(), Math.min(t.getUTCDate(), 28), t.getUTCHours(), t.getUTCMinutes(), t.getUTCSeconds());
        expect(new Date(parseHttpDate(rfc850(at), now) ?? Number.NaN).getUTCFullYear()).toBe(year);
      }),
    );
  });

  it("refuses calendar dates that do not exist (day 29..31 of short months)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1970, max: 9999 }), fc.integer({ min: 0, max: 11 }), fc.integer({ min: 29, max: 31 }), nowArb, (year, month, day, now) => {
        const exists = new Date(Date.UTC(year, month, day)).getUTCDate() === day;
        const text = `Mon, ${day} ${MONTHS[month]} ${year} 00:00:00 GMT`;
        expect(parseHttpDate(text, now) !== undefined).toBe(exists);
      }),
    );
  });
});
