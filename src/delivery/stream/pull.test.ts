// The delivery of a pulled message, read from its reply subject in both of JetStream's forms.
import { describe, expect, it } from "vitest";
import { deliveryOf, PullError } from "./pull.js";

describe("deliveryOf", () => {
  it("reads the delivery count, the stream sequence and the stored time from the old and the new reply subject", () => {
    const ts = 1_764_000_000_123_456_789n;
    expect(deliveryOf(`$JS.ACK.HOOKLINE_shop.shop_acme_0123456789abcdef.3.42.17.${ts}.5`)).toEqual({ deliveryCount: 3, seq: 42, storedAt: 1_764_000_000_123 });
    expect(deliveryOf(`$JS.ACK._.ACCHASH.HOOKLINE_shop.shop_acme_0123456789abcdef.1.7.7.${ts}.0.xyz`)).toEqual({ deliveryCount: 1, seq: 7, storedAt: 1_764_000_000_123 });
  });

  it("refuses anything else", () => {
    expect(() => deliveryOf("_INBOX.abc")).toThrow(PullError);
    expect(() => deliveryOf("$JS.ACK.too.short")).toThrow(/not a JetStream message/);
  });
});
