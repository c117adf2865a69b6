import { describe, expect, it } from "vitest";
import { webhookBody } from "./payload.js";

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
