import { describe, expect, it } from "vitest";
import { MAX_PAYLOAD_DEPTH } from "../api/names.js";
import { parseOrderingKey } from "../core/ordering-key.js";
import { DEFERRED, type RawItem } from "../kube/reflector.js";
import { KeptPayloads } from "./kept-payloads.js";
import { dedupeKey, orderingValueOf, payloadView, stripPayload, webhookBody } from "./payload.js";

describe("webhookBody", () => {
  it("is {id, type, timestamp, created_at, data}: created_at is the event's creation time again, under the specification's name", () => {
    const text = webhookBody("evt-1", "order.paid", "2026-12-05T05:00:00Z", '{"a":"é€😀"}');
    expect(text).toBe('{"id":"evt-1","type":"order.paid","timestamp":"2026-12-05T05:00:00Z","created_at":"2026-12-05T05:00:00Z","data":{"a":"é€😀"}}');
    expect(Object.keys(JSON.parse(text) as object)).toEqual(["id", "type", "timestamp", "created_at", "data"]);
  });

  it("keeps data's bytes as given and writes null for an unknown type or time (valid JSON either way)", () => {
    const data = '{ "n" : 1.50 ,"s":"\\u00e9"}';
    const text = webhookBody("i", undefined, undefined, data);
    expect(text).toContain(`"data":${data}}`);
    expect(JSON.parse(text)).toMatchObject({ type: null, timestamp: null, created_at: null });
  });
});

describe("stripPayload across versions of one delivery", () => {
  /** A payload that counts how often it is serialized (JSON.stringify calls toJSON). */
  function counted(value: object): { payload: object; serialized: () => number } {
    let n = 0;
    return {
      payload: {
        toJSON() {
          n++;
          return value;
        },
      },
      serialized: () => n,
    };
  }
  const version = (uid: string, rv: string, payload: unknown): RawItem => ({
    metadata: { name: "d", namespace: "ns", uid, resourceVersion: rv, creationTimestamp: "2026-12-06T10:00:00Z" },
    spec: { subscriptionRef: { name: "s" }, eventType: "order.paid", eventId: "evt-1", payload },
  });
  const big = { pad: "é".repeat(40 * 1024), nested: { list: [1, 2, 3] } }; // 80 KiB: never kept

  it("serializes and hashes a payload once: a later version of the same object (a status write, its deletion) takes the earlier summary", () => {
    const c = counted(big);
    const v1 = version("uid-1", "1", c.payload);
    stripPayload(v1);
    expect(c.serialized()).toBe(1);
    const v2 = version("uid-1", "2", c.payload);
    stripPayload(v2, [], undefined, v1);
    const v3 = version("uid-1", "3", c.payload);
    stripPayload(v3, [], undefined, v2);
    expect(c.serialized()).toBe(1);
    expect((v3.spec as Record<string, unknown>).payload).toBeUndefined();
    expect(payloadView(v3)).toEqual(payloadView(v1));
    expect(payloadView(v3).payloadBytes).toBe(Buffer.byteLength(JSON.stringify(big)));
    expect(dedupeKey(v3)).toBe(dedupeKey(v1));
  });

  it("a payload small enough to keep is serialized again only to be kept again (the attempt took it)", () => {
    const kept = new KeptPayloads({ maxBytes: 1024 * 1024 });
    const c = counted({ small: "Grüße 😀" });
    const keep = (json: () => string, bytes: number) => kept.keep("ns", "uid-1", json, bytes);
    const v1 = version("uid-1", "1", c.payload);
    stripPayload(v1, [], keep);
    expect(kept.take("ns", "uid-1")).toBe('{"small":"Grüße 😀"}');
    stripPayload(version("uid-1", "2", c.payload), [], keep, v1);
    expect(c.serialized()).toBe(2);
    expect(kept.take("ns", "uid-1")).toBe('{"small":"Grüße 😀"}');
  });

  it("another object under the same name (a new uid) is summarized anew", () => {
    const v1 = version("uid-1", "1", { n: 1 });
    stripPayload(v1);
    const other = version("uid-2", "5", { n: 2, more: "x" });
    stripPayload(other, [], undefined, v1);
    expect(payloadView(other).payloadBytes).toBe(Buffer.byteLength('{"n":2,"more":"x"}'));
    expect(dedupeKey(other)).not.toBe(dedupeKey(v1));
  });

  it("an ordering key the earlier summary did not extract is read from this version's payload", () => {
    const key = { key: "$.customer.id", parsed: parseOrderingKey("$.customer.id")! };
    const v1 = version("uid-1", "1", { customer: { id: "c-7" } });
    stripPayload(v1);
    const v2 = version("uid-1", "2", { customer: { id: "c-7" } });
    stripPayload(v2, [key], undefined, v1);
    expect(orderingValueOf(v2, key)).toEqual({ known: true, value: '"c-7"' });
  });

  it("a payload that cannot be sent stays refused on later versions", () => {
    let deep: unknown = 1;
    for (let i = 0; i < MAX_PAYLOAD_DEPTH + 5; i++) deep = [deep];
    const v1 = version("uid-1", "1", deep);
    stripPayload(v1);
    const v2 = version("uid-1", "2", deep);
    stripPayload(v2, [], undefined, v1);
    expect(payloadView(v2).payloadInvalid).toMatch(/nested deeper than/);
  });

  describe("a payload the watch cut out unparsed (DEFERRED)", () => {
    /** A version as the watch hands it over: spec without payload, the payload's JSON text beside it. */
    const deferredVersion = (uid: string, rv: string, json: string): RawItem => {
      const item = version(uid, rv, undefined);
      delete (item.spec as Record<string, unknown>).payload;
      item[DEFERRED] = Buffer.from(json, "utf8");
      return item;
    };

    it("on first sight, is parsed and summarized as the same payload in place would be", () => {
      const json = JSON.stringify(big);
      const inPlace = version("uid-1", "1", JSON.parse(json));
      stripPayload(inPlace);
      const cut = deferredVersion("uid-2", "1", json);
      stripPayload(cut);
      expect(payloadView(cut)).toEqual(payloadView(inPlace));
      // The dedupe key is the one of the payload read in full (the webhook id is the same eventId).
      expect(dedupeKey(cut)).toBe(dedupeKey(inPlace));
      expect((cut.spec as Record<string, unknown>).payload).toBeUndefined();
    });

    it("on a later version of the same object, is not parsed at all: its summary is the earlier one", () => {
      const v1 = deferredVersion("uid-1", "1", JSON.stringify(big));
      stripPayload(v1);
      // Not JSON: parsing it would throw.
      const v2 = deferredVersion("uid-1", "2", "{not json");
      expect(() => stripPayload(v2, [], undefined, v1)).not.toThrow();
      expect(payloadView(v2)).toEqual(payloadView(v1));
      expect(dedupeKey(v2)).toBe(dedupeKey(v1));
    });

    it("is parsed again for an ordering key the earlier summary lacks, and for another object under the same name", () => {
      const key = { key: "$.customer.id", parsed: parseOrderingKey("$.customer.id")! };
      const json = JSON.stringify({ customer: { id: "c-7" }, pad: "x".repeat(20_000) });
      const v1 = deferredVersion("uid-1", "1", json);
      stripPayload(v1);
      const v2 = deferredVersion("uid-1", "2", json);
      stripPayload(v2, [key], undefined, v1);
      expect(orderingValueOf(v2, key)).toEqual({ known: true, value: '"c-7"' });
      const other = deferredVersion("uid-2", "3", '{"n":2}');
      stripPayload(other, [], undefined, v2);
      expect(payloadView(other).payloadBytes).toBe(7);
    });

    it("a small one is kept from its bytes, serialized as JSON.stringify writes it", () => {
      const kept = new KeptPayloads({ maxBytes: 1024 * 1024 });
      const keep = (json: () => string, bytes: number) => kept.keep("ns", "uid-1", json, bytes);
      const v1 = deferredVersion("uid-1", "1", '{ "small" : "Grüße \u00e9 😀" }');
      stripPayload(v1, [], keep);
      expect(kept.take("ns", "uid-1")).toBe('{"small":"Grüße é 😀"}');
      stripPayload(deferredVersion("uid-1", "2", '{ "small" : "Grüße \u00e9 😀" }'), [], keep, v1);
      expect(kept.take("ns", "uid-1")).toBe('{"small":"Grüße é 😀"}');
    });
  });
});
