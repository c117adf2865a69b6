import { describe, expect, it } from "vitest";
import { webhookBody } from "../payload.js";
import { transformBody } from "./attempt.js";

describe("transformBody: the attempt's body, transformed", () => {
  it("reads the standard body's event and keeps the webhook id", () => {
    const message = { id: "evt-9", type: "order.paid", body: webhookBody("evt-9", "order.paid", "2026-12-05T05:00:00Z", '{"order":9}') };
    expect(transformBody('{"text": event.type + " " + string(data.order) + " in " + event.namespace}', message, "shop")).toEqual({ ok: true, message: { id: "evt-9", type: "order.paid", body: '{"text":"order.paid 9 in shop"}' } });
    expect(transformBody("{", message, "shop")).toMatchObject({ ok: false });
  });
});

