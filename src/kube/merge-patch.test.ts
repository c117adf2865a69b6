import { describe, expect, it } from "vitest";
import { createMergePatch, deepEqual } from "./merge-patch.js";

function apply(doc: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== "object" || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> = doc && typeof doc === "object" && !Array.isArray(doc) ? { ...(doc) } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = apply(out[k], v);
  }
  return out;
}

describe("createMergePatch", () => {
  const cases: Array<[string, unknown, unknown, unknown]> = [
    ["equal documents", { a: 1, b: { c: [1, 2] } }, { a: 1, b: { c: [1, 2] } }, undefined],
    ["changed scalar", { a: 1 }, { a: 2 }, { a: 2 }],
    ["removed field becomes null", { a: 1, b: 2 }, { a: 1 }, { b: null }],
    ["nested removal", { x: { a: 1, err: "boom" } }, { x: { a: 2 } }, { x: { a: 2, err: null } }],
    ["arrays replaced whole", { h: [1, 2, 3] }, { h: [2, 3, 4] }, { h: [2, 3, 4] }],
    ["new object added whole", {}, { lastAttempt: { number: 1 } }, { lastAttempt: { number: 1 } }],
    ["undefined in next is a removal", { a: 1, b: 2 }, { a: 1, b: undefined }, { b: null }],
    ["object replaced by scalar", { a: { b: 1 } }, { a: 3 }, { a: 3 }],
  ];
  it.each(cases)("%s", (_name, prev, next, expected) => {
    const patch = createMergePatch(prev, next);
    expect(patch).toEqual(expected);
    // Applying the patch to prev must give next (without undefined fields).
    const applied = patch === undefined ? prev : apply(prev, patch);
    expect(deepEqual(applied, JSON.parse(JSON.stringify(next)))).toBe(true);
  });
});
