import { describe, expect, it } from "vitest";
import { createLogger } from "../../observability/logger.js";
import type { DeliveryObject } from "../../delivery/objects.js";
import { WAIT_REPORT_BUDGET, WaitReports } from "./waits.js";

const paused = { type: "Wait" as const, reason: "Paused" as const, message: "the subscription is paused" };
const del = (name: string): DeliveryObject => ({ metadata: { name, namespace: "shop", resourceVersion: "1", generation: 1 }, spec: { subscriptionRef: { name: "acme" }, eventType: "order.paid" } });

function setup() {
  let now = 1_000_000;
  const written: string[] = [];
  const events: string[] = [];
  const waits = new WaitReports({
    outcomes: { write: (key: string, obj: DeliveryObject) => (written.push(key), Promise.resolve({ obj })) },
    events: { record: (ref, _type, reason) => void events.push(`${ref.name}:${reason}`) },
    log: createLogger({ level: "silent" }),
    now: () => now,
  });
  return { waits, written, events, tick: (ms: number) => (now += ms) };
}

describe("WaitReports: a budget of wait-condition writes per subscription", () => {
  it("writes a burst at once, gives the others reserved slots, and each writes when it comes back at its slot", async () => {
    const { waits, written, events, tick } = setup();
    const names = Array.from({ length: 30 }, (_, i) => `d${i}`);
    const results = await Promise.all(names.map((n) => waits.userFix(paused, `shop/${n}`, del(n), "shop/acme")));
    expect(written).toHaveLength(WAIT_REPORT_BUDGET.burst);
    expect(events).toHaveLength(WAIT_REPORT_BUDGET.burst);
    const later = results.slice(WAIT_REPORT_BUDGET.burst).map((r) => (r as { requeueAfter: number }).requeueAfter);
    expect(later).toEqual(later.map((_, i) => (i + 1) * (1000 / WAIT_REPORT_BUDGET.perSecond)));
    // Coming back early: still its own slot, no new one.
    expect(await waits.userFix(paused, "shop/d20", del("d20"), "shop/acme")).toEqual({ requeueAfter: later[0] });
    tick(later[0]!);
    expect(await waits.userFix(paused, "shop/d20", del("d20"), "shop/acme")).toBeUndefined();
    expect(written.at(-1)).toBe("shop/d20");
    // Another subscription has its own budget.
    expect(await waits.userFix(paused, "shop/x", del("x"), "shop/globex")).toBeUndefined();
    expect(written.at(-1)).toBe("shop/x");
  });

  it("a delivery attempted (or gone) gives up its slot", async () => {
    const { waits, written, tick } = setup();
    for (let i = 0; i < WAIT_REPORT_BUDGET.burst + 1; i++) await waits.userFix(paused, `shop/d${i}`, del(`d${i}`), "shop/acme");
    waits.forget(`shop/d${WAIT_REPORT_BUDGET.burst}`);
    tick(10_000);
    const before = written.length;
    expect(await waits.userFix(paused, `shop/d${WAIT_REPORT_BUDGET.burst}`, del("d"), "shop/acme")).toBeUndefined();
    expect(written.length).toBe(before + 1);
  });
});
