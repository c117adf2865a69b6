import { describe, expect, it } from "vitest";
import { parseConcurrency, validReason } from "./replay.js";

describe("validReason", () => {
  const table: Array<[string | undefined, boolean]> = [
    [undefined, false],
    ["", false],
    ["fix", false],
    ["abcd", false],
    ["abcde", true],
    ["endpoint fixed, INC-42", true],
    ["     ", false],
    ["  abcd  ", false],
    ["  abcde  ", true],
    ["\tab\ncd\t", true], // inner whitespace counts: 5 characters after trimming
    ["INC-4", true],
  ];
  it.each(table)("%j -> %s", (reason, valid) => {
    expect(validReason(reason)).toBe(valid);
  });
});

describe("parseConcurrency", () => {
  const table: Array<[string | undefined, number | undefined]> = [
    // absent or empty: the default
    [undefined, 5],
    ["", 5],
    ["   ", 5],
    // in range
    ["1", 1],
    ["10", 10],
    ["50", 50],
    [" 7 ", 7],
    ["007", 7],
    // clamped to 1..50
    ["0", 1],
    ["-3", 1],
    ["51", 50],
    ["1000", 50],
    ["99999999999999999999999", 50],
    // not a number
    ["ten", undefined],
    ["5.5", undefined],
    ["1e2", undefined],
    ["+5", undefined],
    ["0x10", undefined],
    ["5 workers", undefined],
    ["NaN", undefined],
    ["Infinity", undefined],
  ];
  it.each(table)("%j -> %s", (value, expected) => {
    expect(parseConcurrency(value)).toBe(expected);
  });
});
