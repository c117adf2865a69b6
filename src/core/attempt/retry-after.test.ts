import { describe, it, expect } from "vitest";
import { parseHttpDate, parseRetryAfter } from "./retry-after.js";

const now = Date.UTC(2025, 5, 15, 12, 0, 0); // Sun, 15 Jun 2025 12:00:00 GMT

describe("parseRetryAfter", () => {
  const table: Array<[string, string | undefined, number | undefined]> = [
    ["absent", undefined, undefined],
    ["empty", "", undefined],
    ["blank", "   ", undefined],
    ["zero seconds", "0", 0],
    ["delta-seconds", "120", 120_000],
    ["delta-seconds with surrounding whitespace", " 5 ", 5_000],
    ["leading zeros", "007", 7_000],
    ["exactly one hour", "3600", 3_600_000],
    ["above one hour is capped", "3601", 3_600_000],
    ["absurdly large is capped", "99999999999999999999999999", 3_600_000],
    ["negative", "-5", undefined],
    ["plus sign", "+5", undefined],
    ["fractional", "1.5", undefined],
    ["exponent", "1e3", undefined],
    ["hex", "0x10", undefined],
    ["garbage", "soon", undefined],
    ["a duration is not a delta", "10s", undefined],
    ["IMF-fixdate 30 s ahead", "Sun, 15 Jun 2025 12:00:30 GMT", 30_000],
    ["IMF-fixdate at now", "Sun, 15 Jun 2025 12:00:00 GMT", 0],
    ["IMF-fixdate in the past", "Sun, 15 Jun 2025 11:00:00 GMT", 0],
    ["IMF-fixdate long past", "Sun, 06 Nov 1994 08:49:37 GMT", 0],
    ["IMF-fixdate 2 h ahead is capped", "Sun, 15 Jun 2025 14:00:00 GMT", 3_600_000],
    ["IMF-fixdate next day crosses midnight", "Mon, 16 Jun 2025 00:10:00 GMT", 3_600_000],
    ["weekday is not cross-checked", "Fri, 15 Jun 2025 12:01:00 GMT", 60_000],
    ["RFC 850 date", "Sunday, 15-Jun-25 12:00:45 GMT", 45_000],
    ["asctime date", "Sun Jun 15 12:01:00 2025", 60_000],
    ["asctime with a one-digit day", "Mon Jun  2 12:00:00 2025", 0],
    ["not GMT", "Sun, 15 Jun 2025 12:00:30 UTC", undefined],
    ["numeric offset", "Sun, 15 Jun 2025 12:00:30 +0000", undefined],
    ["ISO 8601 is not an HTTP-date", "2025-06-15T12:00:30Z", undefined],
    ["impossible date", "Mon, 31 Feb 2025 12:00:00 GMT", undefined],
    ["hour 24", "Sun, 15 Jun 2025 24:00:00 GMT", undefined],
    ["minute 60", "Sun, 15 Jun 2025 12:60:00 GMT", undefined],
    ["lowercase month", "Sun, 15 jun 2025 12:00:30 GMT", undefined],
    ["missing comma", "Sun 15 Jun 2025 12:00:30 GMT", undefined],
    ["one-digit day in IMF-fixdate", "Sun, 5 Jun 2025 12:00:30 GMT", undefined],
  ];

  it.each(table)("%s: %j", (_name, value, expected) => {
    expect(parseRetryAfter(value, now)).toBe(expected);
  });

  it("measures a date against the injected clock, not the wall clock", () => {
    const header = "Sun, 15 Jun 2025 12:00:30 GMT";
    expect(parseRetryAfter(header, now - 10_000)).toBe(40_000);
    expect(parseRetryAfter(header, now + 29_500)).toBe(500);
  });
});

describe("parseHttpDate", () => {
  const table: Array<[string, string, number, number | undefined]> = [
    ["IMF-fixdate", "Sun, 06 Nov 1994 08:49:37 GMT", now, Date.UTC(1994, 10, 6, 8, 49, 37)],
    ["RFC 850", "Sunday, 06-Nov-94 08:49:37 GMT", now, Date.UTC(1994, 10, 6, 8, 49, 37)],
    ["asctime", "Sun Nov  6 08:49:37 1994", now, Date.UTC(1994, 10, 6, 8, 49, 37)],
    ["RFC 850 year within 50 years ahead", "Monday, 01-Jan-74 00:00:00 GMT", now, Date.UTC(2074, 0, 1)],
    ["RFC 850 year more than 50 years ahead is last century", "Tuesday, 01-Jan-76 00:00:00 GMT", now, Date.UTC(1976, 0, 1)],
    ["leap day", "Thu, 29 Feb 2024 00:00:00 GMT", now, Date.UTC(2024, 1, 29)],
    ["no leap day in 2025", "Sat, 29 Feb 2025 00:00:00 GMT", now, undefined],
    ["leap second", "Wed, 31 Dec 2025 23:59:60 GMT", now, Date.UTC(2026, 0, 1)],
    ["two-digit year in IMF-fixdate", "Sun, 06 Nov 94 08:49:37 GMT", now, undefined],
  ];

  it.each(table)("%s: %j", (_name, text, at, expected) => {
    expect(parseHttpDate(text, at)).toBe(expected);
  });
});
