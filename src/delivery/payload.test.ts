import { describe, expect, it } from "vitest";
import { MAX_PAYLOAD_DEPTH } from "../api/names.js";
import { parseOrderingKey } from "../core/ordering-key.js";
import type { RawItem } from "../kube/reflector.js";
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
});
