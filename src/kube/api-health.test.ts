import { describe, expect, it } from "vitest";
import { ApiHealth } from "./api-health.js";

function setup() {
  let now = 1_000_000;
  let checks = 0;
  let finishCheck: ((code: number) => void) | undefined;
  const health: ApiHealth = new ApiHealth({
    graceMs: 2_000,
    now: () => now,
    // A real check is a request whose answer reaches observe() through the client's observer.
    check: () => {
      checks++;
      return new Promise<void>((resolve) => {
        finishCheck = (code) => {
          health.observe(code);
          resolve();
        };
      });
    },
  });
  return {
    health,
    advance: (ms: number) => (now += ms),
    checks: () => checks,
    answer: async (code: number) => {
      finishCheck!(code);
      await Promise.resolve();
      await Promise.resolve();
    },
  };
}

describe("ApiHealth", () => {
  it("is reachable until requests have failed for longer than the grace period", () => {
    const t = setup();
    expect(t.health.reachable()).toBe(true);
    t.health.observe(0);
    t.advance(2_000);
    expect(t.health.reachable()).toBe(true);
    t.advance(1);
    expect(t.health.reachable()).toBe(false);
  });

  it("counts transport errors and 5xx as failures, any other answer (4xx too) as the API server reachable", () => {
    const t = setup();
    for (const code of [0, 500, 503]) {
      t.health.observe(code);
      t.advance(3_000);
      expect(t.health.reachable(), String(code)).toBe(false);
      t.health.observe(404);
      expect(t.health.reachable()).toBe(true);
    }
    t.health.observe(200);
    expect(t.health.reachable()).toBe(true);
  });

  it("the failure streak starts at the first failure, not the latest", () => {
    const t = setup();
    t.health.observe(0);
    t.advance(1_500);
    t.health.observe(503);
    t.advance(600);
    expect(t.health.reachable()).toBe(false);
  });

  it("when nothing else asks the API server, checks it itself (one check at a time) and is reachable again once it answers", async () => {
    const t = setup();
    t.health.observe(0);
    t.advance(3_000);
    expect(t.health.reachable()).toBe(false);
    expect(t.checks()).toBe(1);
    // Probes while the check is out start no other.
    expect(t.health.reachable()).toBe(false);
    expect(t.checks()).toBe(1);
    await t.answer(0);
    expect(t.health.reachable()).toBe(false);
    expect(t.checks()).toBe(2);
    await t.answer(200);
    expect(t.health.reachable()).toBe(true);
    expect(t.checks()).toBe(2);
  });

  it("does not check while within the grace period or while reachable", () => {
    const t = setup();
    expect(t.health.reachable()).toBe(true);
    t.health.observe(0);
    expect(t.health.reachable()).toBe(true);
    expect(t.checks()).toBe(0);
  });

  it("a check that throws does not leave it stuck: the next probe checks again", async () => {
    let checks = 0;
    let now = 0;
    const health = new ApiHealth({ graceMs: 2_000, now: () => now, check: () => (checks++, Promise.reject(new Error("connection refused"))) });
    health.observe(0);
    now += 3_000;
    expect(health.reachable()).toBe(false);
    await new Promise((resolve) => setImmediate(resolve));
    expect(health.reachable()).toBe(false);
    expect(checks).toBe(2);
  });
});
