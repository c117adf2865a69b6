import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseStreamKey, streamKey } from "./keys.js";

describe("stream work keys", () => {
  it("read back the consumer and sequence they were made of, and start with the namespace", () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$/), fc.stringMatching(/^[a-z0-9_-]{1,63}$/), fc.nat(), (ns, consumer, seq) => {
        const key = streamKey(ns, consumer, seq);
        expect(key.slice(0, key.indexOf("/"))).toBe(ns);
        expect(parseStreamKey(key)).toEqual({ consumer, seq });
      }),
    );
  });

  it("are never a delivery's key", () => {
    for (const key of ["shop/evt-1.acme", "shop/stream", "shop/stream-1", "shop/streamx:a:1", "nokey"]) expect(parseStreamKey(key)).toBeUndefined();
  });
});
