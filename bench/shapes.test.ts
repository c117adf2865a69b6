import { describe, expect, it } from "vitest";
import { costCurve } from "./shapes.js";

describe("costCurve: how a cost grows with N", () => {
  it("reads a linear, a constant and a quadratic cost", () => {
    expect(costCurve([{ n: 1_000, cost: 2 }, { n: 10_000, cost: 20 }, { n: 100_000, cost: 200 }])).toEqual({ exponent: 1, per10x: 10 });
    expect(costCurve([{ n: 10, cost: 3 }, { n: 100, cost: 3 }, { n: 1_000, cost: 3 }])).toEqual({ exponent: 0, per10x: 1 });
    expect(costCurve([{ n: 10, cost: 1 }, { n: 100, cost: 100 }])).toEqual({ exponent: 2, per10x: 100 });
  });

  it("needs two usable points", () => {
    expect(costCurve([{ n: 10, cost: 1 }])).toBeUndefined();
    expect(costCurve([{ n: 10, cost: 0 }, { n: 100, cost: 5 }])).toBeUndefined();
  });
});
