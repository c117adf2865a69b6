import { describe, expect, it } from "vitest";
import { FAULT_KINDS, FAULT_MEANING, schedule } from "./faults.js";
import { Rng } from "./rng.js";

describe("the CR-mode fault schedule", () => {
  it("--quick injects each kind once, the leader's freeze included, inside the run", () => {
    expect(FAULT_KINDS).toContain("leader-sigstop");
    for (const seed of [1, 773722, 4242]) {
      const faults = schedule(new Rng(seed), 115_000, true);
      expect(faults.map((f) => f.kind).sort()).toEqual([...FAULT_KINDS].sort());
      for (const f of faults) expect(f.at).toBeLessThan(115_000);
    }
  });

  it("says what every kind simulates", () => {
    for (const k of FAULT_KINDS) expect(FAULT_MEANING[k]).toMatch(/\w/);
  });
});
