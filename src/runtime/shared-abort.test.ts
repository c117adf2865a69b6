import { getMaxListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { sharedAbortController } from "./shared-abort.js";

describe("sharedAbortController", () => {
  it("lifts the listener limit of its signal (Node 20-24 set 10 on every AbortSignal; Node 26 none)", () => {
    expect(getMaxListeners(sharedAbortController().signal)).toBe(0);
  });

  it("takes 1,000 abort listeners without a MaxListenersExceededWarning, and aborts them all", async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on("warning", onWarning);
    try {
      const c = sharedAbortController();
      let aborted = 0;
      for (let i = 0; i < 1_000; i++) c.signal.addEventListener("abort", () => aborted++, { once: true });
      c.abort();
      await new Promise((r) => setImmediate(r));
      expect(aborted).toBe(1_000);
      expect(warnings.filter((w) => w.name === "MaxListenersExceededWarning")).toHaveLength(0);
    } finally {
      process.off("warning", onWarning);
    }
  });
});
