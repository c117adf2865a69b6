import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { streamKey } from "./keys.js";

/** A WebhookDelivery's name: a DNS subdomain (RFC 1123), what the API server accepts. */
const DELIVERY_NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

describe("stream work keys", () => {
  it("start with the namespace, differ per consumer and sequence, and are never a delivery's key", () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$/), fc.stringMatching(/^[a-z0-9_-]{1,63}$/), fc.nat(), (ns, consumer, seq) => {
        const key = streamKey(ns, consumer, seq);
        expect(key.slice(0, key.indexOf("/"))).toBe(ns);
        expect(key.slice(key.indexOf("/") + 1)).not.toMatch(DELIVERY_NAME);
        expect(streamKey(ns, consumer, seq + 1)).not.toBe(key);
        expect(streamKey(ns, `${consumer}x`, seq)).not.toBe(key);
      }),
    );
  });
});
