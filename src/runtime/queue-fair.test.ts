// The work queue served fairly between tenants (QueueOptions.tenantOf): examples and a
// fast-check model of the queue's promises, with and without tenants.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { WorkQueue } from "./queue.js";

const namespaceOf = (key: string): string => key.slice(0, key.indexOf("/"));

/** Takes every ready key without waiting (the queue answers ready keys synchronously). */
async function drain(q: WorkQueue<string>): Promise<string[]> {
  const out: string[] = [];
  while (q.length > 0) {
    const key = (await q.get())!;
    out.push(key);
    q.done(key);
  }
  return out;
}

describe("WorkQueue with tenants", () => {
  it("a tenant that queued 1,000 keys first delays another tenant's key by one key, not 1,000", async () => {
    const q = new WorkQueue<string>({ tenantOf: namespaceOf });
    for (let i = 0; i < 1_000; i++) q.add(`a/${i}`);
    q.add("b/0");
    const order = await drain(q);
    expect(order.indexOf("b/0")).toBe(1);
    expect(order.filter((k) => k.startsWith("a/"))).toEqual(Array.from({ length: 1_000 }, (_, i) => `a/${i}`));
    q.shutdown();
  });

  it("tenants take turns, one key each, each tenant's keys in the order they were queued", async () => {
    const q = new WorkQueue<string>({ tenantOf: namespaceOf });
    for (const k of ["a/1", "a/2", "a/3", "b/1", "c/1", "c/2", "b/2"]) q.add(k);
    expect(await drain(q)).toEqual(["a/1", "b/1", "c/1", "a/2", "b/2", "c/2", "a/3"]);
    q.shutdown();
  });

  it("without tenants it stays one FIFO", async () => {
    const q = new WorkQueue<string>();
    for (let i = 0; i < 5; i++) q.add(`a/${i}`);
    q.add("b/0");
    expect(await drain(q)).toEqual(["a/0", "a/1", "a/2", "a/3", "a/4", "b/0"]);
    q.shutdown();
  });

  it("keeps the queue's promises under any sequence of adds, gets and dones (model check)", async () => {
    const key = fc.tuple(fc.constantFrom("a", "b", "c"), fc.integer({ min: 0, max: 5 })).map(([t, n]) => `${t}/${n}`);
    const op = fc.oneof(fc.record({ add: key }), fc.constant({ get: true as const }), fc.record({ done: fc.nat() }));
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 200 }), fc.boolean(), async (ops, fair) => {
        const q = new WorkQueue<string>(fair ? { tenantOf: namespaceOf } : {});
        const processing: string[] = [];
        const ready = new Set<string>(); // the model: keys queued and not handed out
        const dirtyWhileProcessing = new Set<string>();
        for (const o of ops) {
          if ("add" in o) {
            if (processing.includes(o.add)) dirtyWhileProcessing.add(o.add);
            else ready.add(o.add);
            q.add(o.add);
          } else if ("get" in o) {
            if (q.length === 0) continue;
            const before = [...ready];
            const got = (await q.get())!;
            // Handed out once, only when ready, never while being processed.
            expect(before).toContain(got);
            expect(processing).not.toContain(got);
            ready.delete(got);
            processing.push(got);
          } else if (processing.length > 0) {
            const k = processing.splice(o.done % processing.length, 1)[0]!;
            q.done(k);
            if (dirtyWhileProcessing.delete(k)) ready.add(k);
          }
          expect(q.length).toBe(ready.size);
          expect(q.inProgress).toBe(processing.length);
        }
        q.shutdown();
      }),
      { numRuns: 300 },
    );
  });

  it("no tenant waits more than one turn per other tenant with ready keys (property)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom("a", "b", "c", "d"), { minLength: 1, maxLength: 300 }), async (tenants) => {
        const q = new WorkQueue<string>({ tenantOf: namespaceOf });
        tenants.forEach((t, i) => q.add(`${t}/${i}`));
        const order = (await drain(q)).map(namespaceOf);
        // Between two keys of one tenant, no other tenant is served twice.
        const lastServed = new Map<string, number>();
        order.forEach((t, i) => {
          const since = lastServed.get(t);
          if (since !== undefined) {
            const between = order.slice(since + 1, i);
            expect(new Set(between).size).toBe(between.length);
          }
          lastServed.set(t, i);
        });
        q.shutdown();
      }),
      { numRuns: 300 },
    );
  });
});

describe("WorkQueue sharing its workers between tenants", () => {
  it("a free worker goes to a tenant below its share before one that holds more; no worker idles beside ready work", async () => {
    const q = new WorkQueue<string>({ tenantOf: namespaceOf, workers: 4 });
    for (let i = 0; i < 10; i++) q.add(`a/${i}`);
    // A alone takes every worker.
    const held = [await q.get(), await q.get(), await q.get(), await q.get()];
    expect(held).toEqual(["a/0", "a/1", "a/2", "a/3"]);
    // B's key arrives while A holds all four; the next worker that frees takes B's, though A's
    // keys were ready first.
    q.add("b/0");
    q.done("a/0");
    expect(await q.get()).toBe("b/0");
    // B has nothing more ready: the next free worker takes A's (work conserving), though A holds more than its share.
    q.done("a/1");
    expect(await q.get()).toBe("a/4");
    q.shutdown();
  });

  it("a waiting worker is handed a key as soon as one is added or a worker frees", async () => {
    const q = new WorkQueue<string>({ tenantOf: namespaceOf, workers: 2 });
    const first = q.get();
    q.add("a/0");
    expect(await first).toBe("a/0");
    q.add("a/0"); // added again while processing: re-queued at done
    const second = q.get();
    q.done("a/0");
    expect(await second).toBe("a/0");
    q.shutdown();
  });

  it("keeps the queue's promises with shared workers under any sequence (model check), and never idles a worker beside ready work", async () => {
    const key = fc.tuple(fc.constantFrom("a", "b", "c"), fc.integer({ min: 0, max: 4 })).map(([t, n]) => `${t}/${n}`);
    const op = fc.oneof(fc.record({ add: key }), fc.constant({ get: true as const }), fc.record({ done: fc.nat() }));
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 200 }), fc.integer({ min: 1, max: 5 }), async (ops, workers) => {
        const q = new WorkQueue<string>({ tenantOf: namespaceOf, workers });
        const processing: string[] = [];
        const ready = new Set<string>();
        const dirtyWhileProcessing = new Set<string>();
        for (const o of ops) {
          if ("add" in o) {
            if (processing.includes(o.add)) dirtyWhileProcessing.add(o.add);
            else ready.add(o.add);
            q.add(o.add);
          } else if ("get" in o) {
            if (processing.length >= workers) continue; // only a free worker asks
            if (ready.size === 0) continue;
            // A free worker with keys ready is never kept waiting.
            const got = (await q.get())!;
            expect([...ready]).toContain(got);
            ready.delete(got);
            processing.push(got);
          } else if (processing.length > 0) {
            const k = processing.splice(o.done % processing.length, 1)[0]!;
            q.done(k);
            if (dirtyWhileProcessing.delete(k)) ready.add(k);
          }
          expect(q.length).toBe(ready.size);
          expect(q.inProgress).toBe(processing.length);
        }
        q.shutdown();
      }),
      { numRuns: 300 },
    );
  });
});
