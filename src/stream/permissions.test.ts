import { describe, expect, it } from "vitest";
import { operatorPermissions, publisherPermissions, OPERATOR_INBOX_PREFIX } from "./permissions.js";
import { subjectMatches } from "./subjects.js";

describe("publisherPermissions", () => {
  it("publishes the events of its namespaces only, and hears JetStream's acknowledgements", () => {
    const p = publisherPermissions(["shop", "billing", "shop"]);
    expect(p).toEqual({ publish: ["hookline.billing.>", "hookline.shop.>"], subscribe: ["_INBOX.>"] });
    const mayPublish = (s: string) => p.publish.some((f) => subjectMatches(f, s));
    expect(mayPublish("hookline.shop.order.paid")).toBe(true);
    for (const s of ["hookline.other.order.paid", "hookline.shopx.a", "$JS.API.STREAM.INFO.HOOKLINE", "$JS.ACK.HOOKLINE.x.1.1.1.1.1.0", "$KV.hookline-endpoints.endpoint.u"]) expect(mayPublish(s)).toBe(false);
    // It cannot hear what the operator pulls or asks.
    expect(p.subscribe.some((f) => subjectMatches(f, `${OPERATOR_INBOX_PREFIX}.abc.1`))).toBe(false);
  });

  it.each([[[]], [["*"]], [[">"]], [["a.b"]], [["Shop"]], [["a".repeat(64)]]])("refuses %j (not namespaces)", (namespaces) => {
    expect(() => publisherPermissions(namespaces)).toThrow();
  });
});

describe("operatorPermissions", () => {
  it("names the stream it is given, and replies only on its own inbox prefix", () => {
    const p = operatorPermissions("OTHER");
    expect(p.publish).toContain("$JS.API.CONSUMER.MSG.NEXT.OTHER.*");
    expect(p.publish).toContain("$JS.ACK.OTHER.>");
    expect(p.publish.some((s) => s.includes("HOOKLINE"))).toBe(false);
    expect(p.subscribe).toEqual(["_INBOX_hookline.>"]);
  });
});
