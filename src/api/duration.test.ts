import { describe, it, expect } from "vitest";
import { DURATION_PATTERN, formatDuration, parseDuration } from "./duration.js";

const valid: Array<[string, number]> = [
  ["0", 0],
  ["0s", 0],
  ["0ms", 0],
  ["0h0m0s", 0],
  ["250ms", 250],
  ["1ms", 1],
  ["10s", 10_000],
  ["1m", 60_000],
  ["1h", 3_600_000],
  ["1h30m", 5_400_000],
  ["1m30s", 90_000],
  ["2h45m30s250ms", 9_930_250],
  ["1.5s", 1_500],
  ["1.1s", 1_100],
  ["0.1s", 100],
  [".5s", 500],
  ["1.s", 1_000],
  ["1.5h", 5_400_000],
  ["0.001s", 1],
  ["1.4ms", 1],
  ["1.5ms", 2],
  ["0.0001s", 0],
  ["100ms", 100],
  ["120s", 120_000],
  ["720h", 2_592_000_000],
  ["90m", 5_400_000],
  ["1s1s", 2_000], // Go accepts repeated and unordered units
  ["30s1h", 3_630_000],
  ["007s", 7_000],
  ["1.123456789012345678s", 1_123],
];

const invalid: string[] = [
  "",
  " ",
  "1",
  "10",
  "-1s",
  "+1s",
  "-0",
  "s",
  ".s",
  ".",
  "1.5",
  "1 s",
  " 1s",
  "1s ",
  "1S",
  "1H",
  "1d",
  "1w",
  "1us",
  "1µs",
  "1ns",
  "1sec",
  "1min",
  "1h30",
  "h1",
  "1..5s",
  "1.5.5s",
  "1e3ms",
  "0x10s",
  "1,5s",
  "1s\n",
  "\n1s",
  "PT1S",
];

describe("parseDuration", () => {
  it.each(valid)("parses %j as %d ms", (input, ms) => {
    expect(parseDuration(input)).toBe(ms);
  });

  it.each(invalid)("rejects %j with a message naming the input", (input) => {
    expect(() => parseDuration(input)).toThrow(new RegExp(`invalid duration ${escape(JSON.stringify(input))}`));
  });

  it("rejects a value too large to hold in a safe integer of ms", () => {
    expect(() => parseDuration("9999999999999999h")).toThrow(/too large/);
    expect(() => parseDuration(`${"9".repeat(400)}s`)).toThrow(/too large/);
  });

  it("rejects non-strings even when untyped callers pass them", () => {
    expect(() => parseDuration(10 as unknown as string)).toThrow(/invalid duration/);
  });
});

describe("DURATION_PATTERN", () => {
  const re = new RegExp(DURATION_PATTERN);

  it("is anchored", () => {
    expect(DURATION_PATTERN.startsWith("^")).toBe(true);
    expect(DURATION_PATTERN.endsWith("$")).toBe(true);
  });

  it("uses no constructs RE2 (the API server's regexp engine) lacks", () => {
    expect(DURATION_PATTERN).not.toMatch(/\(\?[=!<]|\\[1-9]/);
  });

  it.each(valid.map(([s]) => s))("accepts %j, as the parser does", (input) => {
    expect(re.test(input)).toBe(true);
    expect(() => parseDuration(input)).not.toThrow();
  });

  it.each(invalid)("refuses %j, as the parser does", (input) => {
    expect(re.test(input)).toBe(false);
    expect(() => parseDuration(input)).toThrow();
  });
});

describe("formatDuration", () => {
  const table: Array<[number, string]> = [
    [0, "0s"],
    [1, "1ms"],
    [250, "250ms"],
    [999, "999ms"],
    [1_000, "1s"],
    [1_500, "1.5s"],
    [1_050, "1.05s"],
    [1_001, "1.001s"],
    [10_000, "10s"],
    [59_999, "59.999s"],
    [60_000, "1m"],
    [90_000, "1m30s"],
    [61_500, "1m1.5s"],
    [3_600_000, "1h"],
    [5_400_000, "1h30m"],
    [3_600_250, "1h0.25s"],
    [3_661_000, "1h1m1s"],
    [2_592_000_000, "720h"],
    [249.6, "250ms"],
    [0.4, "0s"],
  ];

  it.each(table)("formats %d ms as %j", (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it.each([-1, Number.NaN, Number.POSITIVE_INFINITY])("rejects %d", (ms) => {
    expect(() => formatDuration(ms)).toThrow(/cannot format duration/);
  });

  it.each([0, 1, 7, 999, 1_000, 1_001, 59_999, 60_001, 3_599_999, 3_600_001, 86_400_000, 123_456_789, 2 ** 40 + 3])(
    "round-trips %d through parseDuration",
    (ms) => {
      expect(parseDuration(formatDuration(ms))).toBe(ms);
    },
  );
});

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
