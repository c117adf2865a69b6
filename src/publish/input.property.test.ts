// Properties of the event id at the doors: it is sent as the webhook-id header on every attempt,
// so an id is taken iff it is a header value that arrives unchanged (visible ASCII, spaces only
// between other characters, 1..256 characters); every other string, however hostile (control
// characters, CR/LF, non-ASCII, lone surrogates, leading or trailing blanks), is refused with a
// PublishInputError naming the field `id`, before anything is created or sent.
import { validateHeaderValue } from "node:http";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { deliverySpecSchema } from "../api/delivery.js";
import { PublishInputError } from "./errors.js";
import { validateEvent } from "./input.js";

const event = (id: string) => ({ namespace: "shop", type: "order.paid", id, data: null });

/** What a header value must be to reach the receiver as it was signed. */
const headerSafe = (id: string) => id.length >= 1 && id.length <= 256 && /^[\x20-\x7e]+$/.test(id) && id.trim() === id;

function outcome(id: string): "taken" | PublishInputError {
  try {
    validateEvent(event(id));
    return "taken";
  } catch (err) {
    if (err instanceof PublishInputError) return err;
    throw err;
  }
}

const visible = fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), minLength: 1, maxLength: 256 });
/** Characters a header value cannot carry as they are, or that a parser would strip at the ends. */
const hostileChar = fc.oneof(
  fc.integer({ min: 0x00, max: 0x1f }).map((c) => String.fromCharCode(c)),
  fc.constant("\x7f"),
  fc.integer({ min: 0x80, max: 0xffff }).map((c) => String.fromCharCode(c)),
  fc.constantFrom("\r\n", "\n", "\r", "\t", "é", "😀", "\uD800", "\uFEFF", "\u2028", "\u00a0"),
);
/** A valid id with hostile characters put anywhere in it. */
const spoiled = fc.tuple(visible, fc.array(fc.tuple(hostileChar, fc.nat()), { minLength: 1, maxLength: 4 })).map(([base, inserts]) => {
  let s = base;
  for (const [c, at] of inserts) {
    const i = at % (s.length + 1);
    s = s.slice(0, i) + c + s.slice(i);
  }
  return s;
});
const anyString = fc.oneof(fc.string({ unit: "binary", maxLength: 300 }), fc.string({ unit: "grapheme", maxLength: 40 }), fc.string({ maxLength: 300 }));

describe("event ids at the doors (properties)", () => {
  it("an id is taken iff it is a header value that arrives unchanged; a taken id passes Node's header check", () => {
    fc.assert(
      fc.property(fc.oneof(visible, spoiled, anyString, visible.map((v) => ` ${v}`), visible.map((v) => `${v} `), fc.tuple(visible, visible).map(([a, b]) => `${a} ${b}`)), (id) => {
        const r = outcome(id);
        expect(r === "taken", JSON.stringify(id)).toBe(headerSafe(id));
        if (r === "taken") {
          expect(() => validateHeaderValue("webhook-id", id)).not.toThrow();
        } else {
          expect(r.field).toBe("id");
          expect(r.message).toMatch(/^id /);
        }
      }),
      { numRuns: 2_000 },
    );
  });

  it("every id with a character that cannot be a header value is refused, naming the field and why", () => {
    fc.assert(
      fc.property(spoiled, (id) => {
        const r = outcome(id);
        expect(r).toBeInstanceOf(PublishInputError);
        if (r === "taken") return;
        expect(r.field).toBe("id");
        // The 256-character limit speaks first for a spoiled id that grew past it.
        if (id.length <= 256) expect(r.message).toBe("id must be printable ASCII with no leading or trailing space: it is sent as the webhook-id header");
      }),
      { numRuns: 1_000 },
    );
  });

  it("examples: ids that are refused and ids that are taken", () => {
    for (const id of ["evt 1\r\nX-Injected: 1", "évènement", "evt-1\n", " evt-1", "evt-1 ", "\t", "evt\u0000", "😀", "\uD800"]) expect(outcome(id), JSON.stringify(id)).toBeInstanceOf(PublishInputError);
    for (const id of ["evt-1", "Order#1001/paid:ok", "a b", "~!@#$%^&*()_+{}|:\"<>?`-=[]\\;',./", "x".repeat(256)]) expect(outcome(id), JSON.stringify(id)).toBe("taken");
  });

  it("the operator's schema refuses what an older CRD let through, naming spec.eventId (such a delivery is Discarded InvalidSpec, not sent)", () => {
    const r = deliverySpecSchema.safeParse({ subscriptionRef: { name: "acme" }, eventType: "order.paid", eventId: "evt-1\r\nX-Injected: 1" });
    expect(r.success).toBe(false);
    expect(r.error?.issues.map((i) => [i.path.join("."), i.message])).toEqual([["eventId", "must be printable ASCII with no leading or trailing space: it is sent as the webhook-id header"]]);
  });
});
