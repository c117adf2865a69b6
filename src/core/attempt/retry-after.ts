// The Retry-After response header (RFC 9110 §10.2.3): delta-seconds or an HTTP-date, turned into
// a delay in ms relative to an injected clock. Whether to honour it is the caller's call
// (429/503 only, and respectRetryAfter).

import { RETRY_AFTER_CAP_MS } from "./backoff.js";

const DAY = "(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)";
const LONG_DAY = "(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)";
const MONTH = "(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)";
const TIME = "(\\d{2}):(\\d{2}):(\\d{2})";
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

// IMF-fixdate, the form senders must use: "Sun, 06 Nov 1994 08:49:37 GMT".
const imfFixdate = new RegExp(`^${DAY}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`);
// Obsolete forms recipients must still accept: RFC 850 and ANSI C asctime().
const rfc850 = new RegExp(`^${LONG_DAY}, (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`);
const asctime = new RegExp(`^${DAY} ${MONTH} ([ \\d]\\d) ${TIME} (\\d{4})$`);

/**
 * The delay a Retry-After value asks for, in whole ms, capped at one hour; undefined when the
 * header is absent or malformed (negative, fractional, garbage, an impossible date). A date in
 * the past means "now": 0. The day-of-week name is not cross-checked against the date.
 */
export function parseRetryAfter(value: string | undefined, now: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Math.min(Number(text) * 1_000, RETRY_AFTER_CAP_MS);
  const at = parseHttpDate(text, now);
  if (at === undefined) return undefined;
  return Math.min(Math.max(0, at - now), RETRY_AFTER_CAP_MS);
}

/** An HTTP-date as epoch ms, or undefined. `now` resolves RFC 850's two-digit years. */
export function parseHttpDate(text: string, now: number): number | undefined {
  let m = imfFixdate.exec(text);
  if (m) return utc(Number(m[3]), m[2], Number(m[1]), m[4], m[5], m[6]);
  m = rfc850.exec(text);
  if (m) {
    // RFC 9110: a two-digit year more than 50 years in the future is the most recent past year
    // with those digits; so the year is the one with those digits in [thisYear-49, thisYear+50],
    // which may be in the next century (in 2080, "05" is 2105, not 2005).
    const thisYear = new Date(now).getUTCFullYear();
    let year = Math.floor(thisYear / 100) * 100 + Number(m[3]);
    if (year > thisYear + 50) year -= 100;
    else if (year <= thisYear - 50) year += 100;
    return utc(year, m[2], Number(m[1]), m[4], m[5], m[6]);
  }
  m = asctime.exec(text);
  if (m) return utc(Number(m[6]), m[1], Number((m[2] ?? "").trim()), m[3], m[4], m[5]);
  return undefined;
}

function utc(
  year: number,
  monthName: string | undefined,
  day: number,
  hh: string | undefined,
  mm: string | undefined,
  ss: string | undefined,
): number | undefined {
  const month = MONTHS.indexOf(monthName ?? "");
  const [hour, minute, second] = [Number(hh), Number(mm), Number(ss)];
  // A leap second (":60") is accepted and folded into the next second, as Date cannot hold it.
  if (month < 0 || day < 1 || hour > 23 || minute > 59 || second > 60) return undefined;
  // Date.UTC rolls "31 Feb" over into March; refuse dates that do not exist.
  const check = new Date(Date.UTC(year, month, day));
  if (check.getUTCFullYear() !== year || check.getUTCMonth() !== month || check.getUTCDate() !== day) return undefined;
  return Date.UTC(year, month, day, hour, minute, second);
}
