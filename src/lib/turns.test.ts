import { describe, expect, it } from "vitest";
import { TurnQueue } from "./turns.js";

const until = (done: () => boolean) =>
  new Promise<void>((resolve) => {
    const check = () => (done() ? resolve() : setImmediate(check));
    setImmediate(check);
  });

describe("TurnQueue", () => {
  it("runs queued pieces in order, one per event-loop turn: a timer due meanwhile runs between two pieces", async () => {
    const turns = new TurnQueue(() => undefined);
    const seen: string[] = [];
    turns.run(() => {
      seen.push("piece 0");
      setTimeout(() => seen.push("timer"), 0);
      // Heavy work: the timer is due before the next piece could run.
      const end = performance.now() + 5;
      while (performance.now() < end);
    });
    for (let i = 1; i < 5; i++) turns.run(() => seen.push(`piece ${i}`));
    expect(turns.waiting).toBe(5);
    await until(() => turns.waiting === 0 && seen.length === 6);
    expect(seen).toEqual(["piece 0", "timer", "piece 1", "piece 2", "piece 3", "piece 4"]);
  });

  it("a piece that throws is reported and does not stop the next", async () => {
    const errors: unknown[] = [];
    const turns = new TurnQueue((err) => errors.push(err));
    const seen: number[] = [];
    turns.run(() => {
      throw new Error("boom");
    });
    turns.run(() => seen.push(2));
    await until(() => seen.length === 1);
    expect(seen).toEqual([2]);
    expect(errors).toEqual([new Error("boom")]);
  });

  it("takes the tenants in turns: B's one piece runs second, not behind A's queue; each tenant's pieces keep their order", async () => {
    const turns = new TurnQueue(() => undefined);
    const seen: string[] = [];
    for (let i = 0; i < 5; i++) turns.run(() => seen.push(`a${i}`), "tenant-a");
    turns.run(() => seen.push("b0"), "tenant-b");
    turns.run(() => seen.push("c0"), "tenant-c");
    turns.run(() => seen.push("b1"), "tenant-b");
    expect(turns.waiting).toBe(8);
    await until(() => turns.waiting === 0 && seen.length === 8);
    expect(seen).toEqual(["a0", "b0", "c0", "a1", "b1", "a2", "a3", "a4"]);
  });
});
