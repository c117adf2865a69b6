import { describe, expect, it } from "vitest";
import { sharedAbortController } from "./shared-abort.js";

describe("sharedAbortController", () => {
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

  it("a plain AbortController does warn past 10 listeners (the check above can fail)", async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on("warning", onWarning);
    try {
      const c = new AbortController();
      for (let i = 0; i < 11; i++) c.signal.addEventListener("abort", () => undefined);
      await new Promise((r) => setImmediate(r));
      expect(warnings.filter((w) => w.name === "MaxListenersExceededWarning").length).toBeGreaterThan(0);
    } finally {
      process.off("warning", onWarning);
    }
  });
});
