// How deeply a JSON value nests, counted without recursion: a value nested deeper than
// JSON.stringify can handle must be measurable without overflowing the stack either.

/**
 * Arrays and objects on the deepest path of `value` (a scalar is 0, `{}` and `[1]` are 1), or
 * `limit + 1` as soon as the depth exceeds `limit` (the rest is not walked).
 */
export function jsonDepth(value: unknown, limit: number): number {
  let max = 0;
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== "object" || v === null) continue;
    const d = depth + 1;
    if (d > limit) return limit + 1;
    if (d > max) max = d;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (typeof child === "object" && child !== null) stack.push([child, d]);
    }
  }
  return max;
}
