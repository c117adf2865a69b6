import { describe, expect, it } from "vitest";
import { jsonDepth } from "./json-depth.js";

const nested = (depth: number) => JSON.parse(`${"[".repeat(depth)}${"]".repeat(depth)}`) as unknown;

describe("jsonDepth", () => {
  it.each([
    [null, 0],
    ["text", 0],
    [42, 0],
    [{}, 1],
    [[], 1],
    [{ a: 1, b: "x" }, 1],
    [{ a: [1, { b: null }] }, 3],
    [[[], [[[]]], {}], 4],
  ])("%j is %i deep", (value, depth) => {
    expect(jsonDepth(value, 1000)).toBe(depth);
  });

  it("counts the deepest branch, not the first one", () => {
    expect(jsonDepth({ shallow: {}, deep: { a: { b: { c: {} } } } }, 1000)).toBe(5);
  });

  it("measures nesting far deeper than a recursive walk survives (Node 20's JSON.stringify overflows at ~4,000), without recursion", () => {
    const deep = nested(1_000_000);
    expect(jsonDepth(deep, 2_000_000)).toBe(1_000_000);
  });

  it("stops at limit + 1", () => {
    expect(jsonDepth(nested(1000), 1000)).toBe(1000);
    expect(jsonDepth(nested(1001), 1000)).toBe(1001);
    expect(jsonDepth(nested(50_000), 1000)).toBe(1001);
  });
});
