import type { ConsumerInfo } from "@nats-io/jetstream";
import { describe, expect, it } from "vitest";
import { REMOVED_SUBJECTS_METADATA } from "../../jetstream/type-removal.js";
import { RemovedTypes } from "./removed-types.js";

const PAID = "hookline.ns.order.paid";
const REFUNDED = "hookline.ns.order.refunded";

const info = (filters: string[], draining?: Record<string, number>): ConsumerInfo =>
  ({ config: { filter_subjects: filters, metadata: draining ? { [REMOVED_SUBJECTS_METADATA]: JSON.stringify(draining) } : {} } }) as unknown as ConsumerInfo;

/** A consumer whose cached info is `cached` and whose server-side info is whatever `server()` says when a read is answered. */
function fakeConsumer(cached: ConsumerInfo, server: () => ConsumerInfo) {
  let cache = cached;
  const reads: Array<() => void> = [];
  return {
    reads,
    consumer: {
      info: (fromCache?: boolean): Promise<ConsumerInfo> => {
        if (fromCache) return Promise.resolve(cache);
        return new Promise((resolve) => reads.push(() => resolve((cache = server()))));
      },
    },
    answer: () => reads.splice(0).forEach((r) => r()),
  };
}

const flush = () => new Promise((r) => setImmediate(r));

/** Answers the fake's reads as they come until every promise has settled. */
async function answerUntilSettled(f: { answer: () => void }, promises: Promise<unknown>[]): Promise<void> {
  let settled = false;
  void Promise.allSettled(promises).then(() => (settled = true));
  for (let i = 0; i < 100 && !settled; i++) {
    await flush();
    f.answer();
  }
  expect(settled).toBe(true);
}

describe("RemovedTypes.when", () => {
  it("decides from the cached info when it records the removal", async () => {
    const f = fakeConsumer(info([PAID, REFUNDED], { [REFUNDED]: 5 }), () => info([PAID, REFUNDED], { [REFUNDED]: 5 }));
    const r = new RemovedTypes();
    expect(await r.when(f.consumer, { subject: REFUNDED, seq: 3 })).toBe("before");
    expect(await r.when(f.consumer, { subject: REFUNDED, seq: 6 })).toBe("after");
    expect(f.reads).toHaveLength(0);
  });

  it("messages of one batch asked together while the cache is stale: each is decided from a read made after it was asked (none defaults to before)", async () => {
    // The cache predates the removal; the server has recorded it (bound 5).
    let server = info([PAID, REFUNDED]);
    const f = fakeConsumer(info([PAID, REFUNDED]), () => server);
    const r = new RemovedTypes();
    server = info([PAID, REFUNDED], { [REFUNDED]: 5 });
    const early = r.when(f.consumer, { subject: REFUNDED, seq: 1 });
    const late = r.when(f.consumer, { subject: REFUNDED, seq: 6 });
    await answerUntilSettled(f, [early, late]);
    expect(await early).toBe("before");
    expect(await late).toBe("after");
  });

  it("a message asked while a read is in flight waits for a read that started after it was asked", async () => {
    let server = info([PAID, REFUNDED]);
    const f = fakeConsumer(info([PAID, REFUNDED]), () => server);
    const r = new RemovedTypes();
    const first = r.when(f.consumer, { subject: REFUNDED, seq: 1 });
    await flush();
    expect(f.reads).toHaveLength(1);
    // The removal is recorded while the first read is out; r-4 arrives after it.
    const second = r.when(f.consumer, { subject: REFUNDED, seq: 6 });
    await flush();
    f.answer(); // answers the first read with the old info (it was read before the removal)
    server = info([PAID, REFUNDED], { [REFUNDED]: 5 });
    await flush();
    f.answer();
    expect(await first).toBe("before");
    expect(await second).toBe("after");
  });

  it("reads at most one at a time, shared by every message waiting for it", async () => {
    const f = fakeConsumer(info([PAID, REFUNDED]), () => info([PAID, REFUNDED], { [REFUNDED]: 5 }));
    const r = new RemovedTypes();
    const asked = Array.from({ length: 50 }, (_, i) => r.when(f.consumer, { subject: REFUNDED, seq: i + 1 }));
    await flush();
    expect(f.reads).toHaveLength(1);
    f.answer();
    await flush();
    f.answer();
    const got = await Promise.all(asked);
    expect(got.slice(0, 5).every((x) => x === "before")).toBe(true);
    expect(got.slice(5).every((x) => x === "after")).toBe(true);
  });

  it("the leader has not recorded the removal: before, from a read made after the message was asked", async () => {
    const f = fakeConsumer(info([PAID, REFUNDED]), () => info([PAID, REFUNDED]));
    const r = new RemovedTypes();
    const p = r.when(f.consumer, { subject: REFUNDED, seq: 9 });
    await flush();
    expect(f.reads).toHaveLength(1);
    f.answer();
    expect(await p).toBe("before");
  });

  it("the filter is narrowed already (drain through): after", async () => {
    const f = fakeConsumer(info([PAID]), () => info([PAID]));
    expect(await new RemovedTypes().when(f.consumer, { subject: REFUNDED, seq: 9 })).toBe("after");
  });

  it("the info cannot be read: unknown", async () => {
    const consumer = { info: (c?: boolean) => (c ? Promise.resolve(info([PAID, REFUNDED])) : Promise.reject(new Error("timeout"))) };
    expect(await new RemovedTypes().when(consumer, { subject: REFUNDED, seq: 9 })).toBe("unknown");
  });
});
