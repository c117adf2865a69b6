// The delivery of a pulled message, read from its reply subject in both of JetStream's forms.
import { describe, expect, it } from "vitest";
import { deliveryOf, PullError, statusEnd } from "./pull.js";

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

describe("statusEnd", () => {
  it("ends a pull on what nats-server 2.15 answers to one, and errs only on a consumer or JetStream gone", () => {
    expect(statusEnd({ code: 100, description: "idle heartbeat" })).toBe("ignore");
    expect(statusEnd({ code: 408, description: "request timeout" })).toBe("expired");
    expect(statusEnd({ code: 404, description: "no messages" })).toBe("expired");
    expect(statusEnd({ code: 409, description: "message size exceeds maxbytes" })).toBe("too-big");
    // Sent after the last message of a batch with bytes to spare; seen on a three-node cluster
    // when messages of the batch were lost on the way (the soak's partition and restarts).
    expect(statusEnd({ code: 409, description: "batch completed" })).toBe("batch");
    expect(statusEnd({ code: 409, description: "leadership change" })).toBe("expired");
    expect(statusEnd({ code: 409, description: "server shutdown" })).toBe("expired");
    expect(statusEnd({ code: 409, description: "consumer deleted" })).toBeUndefined();
    expect(statusEnd({ code: 503, description: "" })).toBeUndefined();
  });
});
