import { describe, expect, it } from "vitest";
import { sharedAbortController } from "./shared-abort.js";

describe("sharedAbortController", () => {
  it("takes 1,000 abort listeners without a MaxListenersExceededWarning (Node 20-24 warn past 10 on a plain signal), and aborts them all", async () => {
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
