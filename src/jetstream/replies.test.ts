import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ReplyBatch } from "./replies.js";

const turn = () => new Promise<void>((r) => setImmediate(r));

describe("ReplyBatch", () => {
  it("sends every reply queued in one turn together, in order, after the turn", async () => {
    const b = new ReplyBatch();
    const sent: number[] = [];
    for (let i = 0; i < 5; i++) b.add({ send: () => sent.push(i), failed: () => undefined });
    expect(sent).toEqual([]);
    expect(b.pending).toBe(5);
    await turn();
    expect(sent).toEqual([0, 1, 2, 3, 4]);
    expect(b.counts).toEqual({ replies: 5, batches: 1 });
  });

  it("flush() sends at once, and the scheduled turn then sends nothing twice", async () => {
    const b = new ReplyBatch();
    const sent: string[] = [];
    b.add({ send: () => sent.push("a"), failed: () => undefined });
    b.flush();
    expect(sent).toEqual(["a"]);
    await turn();
    expect(sent).toEqual(["a"]);
    expect(b.counts.batches).toBe(1);
  });

  it("a reply that throws is reported to its owner, and the others still go", async () => {
    const b = new ReplyBatch();
    const sent: number[] = [];
    const failed: string[] = [];
    b.add({ send: () => sent.push(1), failed: () => failed.push("1") });
    b.add({
      send: () => {
        throw new Error("connection closed");
      },
      failed: (e) => failed.push(e.message),
    });
    b.add({ send: () => sent.push(3), failed: () => failed.push("3") });
    await turn();
    expect(sent).toEqual([1, 3]);
    expect(failed).toEqual(["connection closed"]);
  });

  it("whatever the interleaving of adds, turns and flushes, each reply is sent exactly once, in order", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom("add", "turn", "flush"), { maxLength: 60 }), async (ops) => {
        const b = new ReplyBatch();
        const sent: number[] = [];
        let n = 0;
        for (const op of ops) {
          if (op === "add") {
            const i = n++;
            b.add({ send: () => sent.push(i), failed: () => undefined });
          } else if (op === "flush") b.flush();
          else await turn();
        }
        await turn();
        expect(sent).toEqual(Array.from({ length: n }, (_, i) => i));
        expect(b.pending).toBe(0);
      }),
      { numRuns: 200 },
    );
  });
});
