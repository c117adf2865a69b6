// The age limit's rule: what is expired, how often a held subscription's namespace is looked
// at, and the dead letter's message; OldestMessages reads a stream once per period.
import { describe, expect, it } from "vitest";
import type { JetStreamManager } from "@nats-io/jetstream";
import { checkEveryMs, expiredMessage, isExpired, OldestMessages } from "./expiry.js";

const DAY = 86_400_000;

describe("the age limit", () => {
  it("a message is expired from the moment it is as old as the limit", () => {
    expect(isExpired(1_000, 1_000 + DAY - 1, DAY)).toBe(false);
    expect(isExpired(1_000, 1_000 + DAY, DAY)).toBe(true);
  });

  it("held subscriptions are looked at every quarter of the age, between 1 s and a minute", () => {
    expect(checkEveryMs(7 * DAY)).toBe(60_000);
    expect(checkEveryMs(2_000)).toBe(1_000);
    expect(checkEveryMs(100_000)).toBe(25_000);
  });

  it("the dead letter says how long the event waited, when it was stored, and the limit with its variable", () => {
    const stored = Date.parse("2026-03-01T10:00:00.000Z");
    expect(expiredMessage(stored, stored + 7 * DAY + 3 * 3_600_000, 7 * DAY)).toBe(
      "the event waited 7d3h in the stream without being delivered (stored 2026-03-01T10:00:00.000Z); the limit is 7d (HOOKLINE_STREAM_MAX_AGE_MS)",
    );
    expect(expiredMessage(stored, stored + 5_500, 5_000)).toContain("waited 5s");
  });
});

describe("OldestMessages", () => {
  it("reads a stream's oldest message once per period, and none for an empty or missing stream", async () => {
    let now = 0;
    const reads: string[] = [];
    const state: Record<string, { messages: number; first_ts: string }> = { HOOKLINE_a: { messages: 2, first_ts: "2026-03-01T10:00:00Z" }, HOOKLINE_b: { messages: 0, first_ts: "0001-01-01T00:00:00Z" } };
    const jsm = {
      streams: {
        info: (name: string) => {
          reads.push(name);
          const s = state[name];
          if (!s) return Promise.reject(Object.assign(new Error("stream not found"), { code: 10059 }));
          return Promise.resolve({ state: s });
        },
      },
    } as unknown as JetStreamManager;
    const oldest = new OldestMessages(() => Promise.resolve(jsm), 1_000, () => now);
    expect(await oldest.oldest("HOOKLINE_a")).toBe(Date.parse("2026-03-01T10:00:00Z"));
    expect(await oldest.oldest("HOOKLINE_a")).toBe(Date.parse("2026-03-01T10:00:00Z"));
    expect(await oldest.oldest("HOOKLINE_b")).toBeUndefined();
    expect(await oldest.oldest("HOOKLINE_gone")).toBeUndefined();
    expect(reads).toEqual(["HOOKLINE_a", "HOOKLINE_b", "HOOKLINE_gone"]);
    now = 1_000;
    await oldest.oldest("HOOKLINE_a");
    expect(reads).toHaveLength(4);
  });
});
