import { describe, it, expect } from "vitest";
import { fromRfc3339, toRfc3339 } from "./rfc3339.js";

describe("fromRfc3339", () => {
  const base = Date.UTC(2025, 5, 15, 12, 0, 0);
  const table: Array<[string | undefined, number | undefined]> = [
    [undefined, undefined],
    ["", undefined],
    ["2025-06-15T12:00:00Z", base],
    ["2025-06-15t12:00:00z", base],
    ["2025-06-15T12:00:00.250Z", base + 250],
    ["2025-06-15T12:00:00.25Z", base + 250],
    ["2025-06-15T12:00:00.5Z", base + 500],
    ["2025-06-15T12:00:00.570Z", base + 570],
    ["2025-06-15T12:00:00.123456Z", base + 123],
    ["2025-06-15T12:00:00.999999999Z", base + 999],
    ["2025-06-15T14:00:00+02:00", base],
    ["2025-06-15T07:30:00-04:30", base],
    ["2025-06-15 12:00:00Z", undefined],
    ["2025-06-15T12:00:00", undefined],
    ["2025-06-15", undefined],
    ["2025-02-30T12:00:00Z", undefined],
    ["2025-13-01T12:00:00Z", undefined],
    ["2025-06-15T24:00:00Z", undefined],
    ["2025-06-15T12:00:00+24:00", undefined],
    ["not a time", undefined],
    ["1750000000000", undefined],
  ];

  it.each(table)("%j -> %s", (text, expected) => {
    expect(fromRfc3339(text)).toBe(expected);
  });
});

describe("toRfc3339", () => {
  it.each([
    [0, "1970-01-01T00:00:00.000Z"],
    [Date.UTC(2025, 5, 15, 12, 0, 0, 250), "2025-06-15T12:00:00.250Z"],
  ])("%d -> %s and back", (ms, text) => {
    expect(toRfc3339(ms)).toBe(text);
    expect(fromRfc3339(text)).toBe(ms);
  });
});
