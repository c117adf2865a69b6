import { describe, expect, it } from "vitest";
import { nextPageLimit } from "./reflector.js";

describe("nextPageLimit", () => {
  it.each([
    // limit, items, bytes, target, max -> next
    [10, 10, 10 * 1024, 4 << 20, 500, 20], // small items: doubles towards max
    [320, 320, 320 * 1024, 4 << 20, 500, 500], // capped at max
    [10, 10, 10 * 256 * 1024, 4 << 20, 500, 16], // 256 KiB items: about 4 MiB a page
    [500, 500, 500 * 256 * 1024, 4 << 20, 500, 16], // shrinks at once after a heavy page
    [10, 3, 0, 4 << 20, 500, 20], // weightless items (no payload): grows
    [10, 10, 10 * 8 * (1 << 20), 4 << 20, 500, 1], // heavier than the target: one at a time
  ])("limit %i, %i items of %i bytes in all, target %i, max %i -> %i", (limit, items, bytes, target, max, next) => {
    expect(nextPageLimit(limit, items, bytes, target, max)).toBe(next);
  });
});
