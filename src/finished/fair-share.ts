// Max-min fair shares of a cluster-wide cap between namespaces: the storage budget
// (WEBHOOK_MAX_FINISHED_DELIVERIES) and the dead-letter cap (WEBHOOK_DLQ_MAX_ENTRIES). Without
// them, one tenant's flood of finished deliveries deleted another tenant's oldest ones (dead
// letters, which someone may replay and which block an ordering lane). Pure. Why max-min
// fairness: docs/adr/0010-fair-shares-of-cluster-wide-limits.md.
//
// The cap is shared by the namespaces that hold something. A namespace holding no more than
// `cap / N` (N such namespaces) is always within its share; what a namespace below its share
// leaves unused goes to the others, equally, again and again (water-filling):
//
//   held  a: 2   b: 30   c: 100        cap 60
//   share a: 2   b: 29   c: 29         a keeps all; b and c lose 1 and 71
//
// Shares are whole objects and add up to the cap (when more than the cap is held); the remainder
// of the division goes to the smallest holders first, so who gets it is deterministic. A
// namespace at or under its share loses nothing while any other is over its own.

/** Each namespace's share of `cap`: what it holds when that fits, else the fair level. */
export function fairShares(held: ReadonlyMap<string, number>, cap: number): Map<string, number> {
  const out = new Map<string, number>();
  const entries = [...held].filter(([, n]) => n > 0).sort(([a, x], [b, y]) => x - y || (a < b ? -1 : a > b ? 1 : 0));
  let left = Math.max(0, Math.floor(cap));
  for (let i = 0; i < entries.length; i++) {
    const [ns, n] = entries[i]!;
    const rest = entries.length - i;
    if (n <= Math.floor(left / rest)) {
      out.set(ns, n);
      left -= n;
      continue;
    }
    // Every one from here holds more than the level: they share what is left equally.
    const base = Math.floor(left / rest);
    let extra = left - base * rest;
    for (let j = i; j < entries.length; j++) {
      out.set(entries[j]![0], base + (extra > 0 ? 1 : 0));
      if (extra > 0) extra--;
    }
    break;
  }
  return out;
}

/**
 * How many objects each namespace must lose to bring the total within `cap`: only namespaces
 * over their fair share appear, each with its excess. The sum is `total - cap` (0 when it fits).
 * Ordered from the namespace furthest over to the least (ties by name).
 */
export function evictionPlan(held: ReadonlyMap<string, number>, cap: number): Map<string, number> {
  const shares = fairShares(held, cap);
  const over: Array<[string, number]> = [];
  for (const [ns, n] of held) {
    const excess = n - (shares.get(ns) ?? 0);
    if (n > 0 && excess > 0) over.push([ns, excess]);
  }
  over.sort(([a, x], [b, y]) => y - x || (a < b ? -1 : a > b ? 1 : 0));
  return new Map(over);
}
