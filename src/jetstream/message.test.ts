import { describe, expect, it } from "vitest";
import { MAX_PAYLOAD_BYTES, MAX_PAYLOAD_DEPTH } from "../api/names.js";
import { dataText, decodeMessage, encodeMessage, MAX_MESSAGE_BYTES, messageId, MSG_ID_HEADER, StreamMessageError, type OutgoingMessage, type StreamEvent } from "./message.js";

const event: StreamEvent = { id: "evt-1", type: "order.paid", namespace: "shop", timestamp: "2026-12-01T10:00:00.000Z", data: { order: 1, note: "déjà vu 😀" } };
const enc = new TextEncoder();

/** What a consumer gets from nats.js: subject, headers (get answers "" when missing) and the body. */
function incoming(m: OutgoingMessage, body: Uint8Array = m.body, headers: Array<[string, string]> = m.headers) {
  const map = new Map(headers);
  return { subject: m.subject, headers: { get: (k: string) => map.get(k) ?? "" }, data: body };
}

function errorOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof StreamMessageError) return `${err.field}: ${err.message}`;
    throw err;
  }
  return "no error";
}

describe("encodeMessage / decodeMessage", () => {
  it("carries the envelope as JSON with the data bytes exactly as serialized, and reads them back", () => {
    const m = encodeMessage(event);
    expect(m.subject).toBe("hookline.shop.order.paid");
    expect(m.msgId).toBe("shop/evt-1");
    expect(m.headers).toEqual([[MSG_ID_HEADER, "shop/evt-1"]]);
    const text = new TextDecoder().decode(m.body);
    expect(JSON.parse(text)).toEqual(event);
    expect(text).toBe(`{"id":"evt-1","type":"order.paid","namespace":"shop","timestamp":"2026-12-01T10:00:00.000Z","data":${JSON.stringify(event.data)}}`);
    const d = decodeMessage(incoming(m));
    expect(d).toMatchObject({ id: "evt-1", type: "order.paid", namespace: "shop", timestamp: event.timestamp, subject: m.subject, msgId: m.msgId });
    expect(Buffer.from(d.data).equals(Buffer.from(JSON.stringify(event.data)))).toBe(true);
    expect(dataText(d)).toBe(JSON.stringify(event.data));
    expect(m.dataBytes).toBe(d.data.length);
  });

  it.each([null, 0, -1.5e300, "text", [], {}, [1, [2, [3]]], { "": { "\u0000": "\u2028\u2029" } }, true])("any JSON data round-trips: %j", (data) => {
    const d = decodeMessage(incoming(encodeMessage({ ...event, data })));
    expect(JSON.parse(dataText(d))).toEqual(data);
  });

  it("keeps multi-byte characters intact wherever they fall against the envelope and the data's edges", () => {
    // Each padding shifts every byte position by one, so 2-, 3- and 4-byte characters land at
    // every alignment next to the `,"data":` key and the closing brace.
    for (let pad = 0; pad < 8; pad++) {
      const id = `${"é".repeat(pad)}𝄞-${"x".repeat(pad)}`;
      const data = `😀${"€".repeat(pad)}é${"y".repeat(pad)}𝄞`;
      const m = encodeMessage({ ...event, id, data: [data, { [data]: data }] });
      const d = decodeMessage(incoming(m));
      expect(d.id).toBe(id);
      expect(Buffer.from(d.data).equals(Buffer.from(JSON.stringify([data, { [data]: data }]), "utf8"))).toBe(true);
      expect(JSON.parse(dataText(d))).toEqual([data, { [data]: data }]);
    }
  });

  it("takes the largest data with the longest envelope inside the stream's message limit, and refuses one byte more", () => {
    const id = "\u0001".repeat(256); // every character escaped as \u0001: the longest id in JSON
    const type = `a${".x".repeat(127)}b`.slice(0, 256);
    const namespace = "n".repeat(63);
    const trace = { traceparent: `00-${"a".repeat(32)}-${"b".repeat(16)}-01`, tracestate: `a=${"v".repeat(254)},b=${"v".repeat(253)}` }; // the longest stored: 512 characters
    // Multi-byte characters up to the limit: "😀" is 4 bytes, "é" 2, the quotes 2.
    const data = `${"😀".repeat(Math.floor((MAX_PAYLOAD_BYTES - 2) / 4))}é`;
    const m = encodeMessage({ id, type, namespace, timestamp: event.timestamp, data }, trace);
    expect(m.dataBytes).toBe(MAX_PAYLOAD_BYTES);
    const headerBytes = m.headers.reduce((n, [k, v]) => n + k.length + v.length + 4, 12);
    expect(m.body.length + headerBytes).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
    const d = decodeMessage(incoming(m));
    expect(d.id).toBe(id);
    expect(d.traceContext).toEqual(trace);
    expect(dataText(d)).toBe(JSON.stringify(data));
    expect(errorOf(() => encodeMessage({ ...event, data: `${data}x` }))).toBe(`data: data is ${MAX_PAYLOAD_BYTES + 1} bytes serialized as JSON; the limit is ${MAX_PAYLOAD_BYTES} bytes`);
  });

  it("refuses data nested deeper than the CR path allows, on both sides, and takes the limit", () => {
    const nested = (depth: number) => JSON.parse(`${"[".repeat(depth)}${"]".repeat(depth)}`) as unknown;
    expect(decodeMessage(incoming(encodeMessage({ ...event, data: nested(MAX_PAYLOAD_DEPTH) }))).data.length).toBe(2 * MAX_PAYLOAD_DEPTH);
    for (const depth of [MAX_PAYLOAD_DEPTH + 1, 100_000]) {
      expect(errorOf(() => encodeMessage({ ...event, data: nested(depth) }))).toBe(`data: data is nested deeper than ${MAX_PAYLOAD_DEPTH} levels of arrays and objects`);
    }
    // A message written by someone else, with deeper data than any door lets through.
    const m = encodeMessage({ ...event, data: null });
    const deep = "[".repeat(MAX_PAYLOAD_DEPTH + 1) + "]".repeat(MAX_PAYLOAD_DEPTH + 1);
    const body = enc.encode(new TextDecoder().decode(m.body).replace(/null}$/, `${deep}}`));
    expect(errorOf(() => decodeMessage(incoming(m, body)))).toMatch(/^data: data is nested deeper than 1000/);
  });

  it("refuses what the doors refuse, naming the field", () => {
    expect(errorOf(() => encodeMessage({ ...event, id: "" }))).toMatch(/^id: /);
    expect(errorOf(() => encodeMessage({ ...event, id: "i".repeat(257) }))).toMatch(/^id: /);
    expect(errorOf(() => encodeMessage({ ...event, type: "order..*" }))).toMatch(/^type: /);
    expect(errorOf(() => encodeMessage({ ...event, namespace: "Shop" }))).toMatch(/^namespace: /);
    expect(errorOf(() => encodeMessage({ ...event, timestamp: "yesterday" }))).toMatch(/^timestamp: /);
    expect(errorOf(() => encodeMessage({ ...event, data: { n: 1n } }))).toMatch(/^data: data is not serializable/);
    expect(errorOf(() => encodeMessage({ ...event, data: undefined }))).toMatch(/^data: data is not a JSON value/);
    expect(errorOf(() => encodeMessage(event, { traceparent: "00-abc" }))).toMatch(/^traceContext.traceparent: /);
    expect(errorOf(() => encodeMessage(event, { traceparent: `00-${"0".repeat(32)}-${"b".repeat(16)}-01` }))).toMatch(/^traceContext.traceparent: /);
    expect(errorOf(() => encodeMessage(event, { traceparent: `00-${"a".repeat(32)}-${"b".repeat(16)}-01`, tracestate: "a=1\nb=2" }))).toMatch(/^traceContext.tracestate: /);
  });

  it("decodes only the encoder's exact form and a subject and Nats-Msg-Id that belong to the event", () => {
    const m = encodeMessage(event);
    const text = new TextDecoder().decode(m.body);
    const variant = (t: string) => errorOf(() => decodeMessage(incoming(m, enc.encode(t))));
    expect(variant(text.replace('"data":', '"data": '))).toBe("no error"); // whitespace inside data's own text is data
    expect(variant(text.replace('{"id"', '{ "id"'))).toMatch(/^body: the message envelope is not in the form Hookline writes/);
    expect(variant(text.replace(/}$/, ',"data":2}'))).toMatch(/^data: data is not valid JSON/);
    expect(variant(text.replace(/}$/, ',"x":2}'))).toMatch(/^data: data is not valid JSON/);
    expect(variant(`{"type":"order.paid","id":"evt-1","namespace":"shop","timestamp":"${event.timestamp}","data":1}`)).toMatch(/^body: the message body is not a Hookline event/);
    expect(variant(`{"id":"evt-1","id":"evt-2","type":"order.paid","namespace":"shop","timestamp":"${event.timestamp}","data":1}`)).toMatch(/^body: /);
    expect(variant(`${text} `)).toMatch(/^body: /);
    expect(variant("not json")).toMatch(/^body: /);
    expect(variant(text.replace('"evt-1"', '"evt\\u002d1"'))).toMatch(/^body: the message envelope is not in the form/);
    // A byte-order mark before the envelope: the same text once decoded by a lax reader, other bytes.
    expect(errorOf(() => decodeMessage(incoming(m, new Uint8Array([0xef, 0xbb, 0xbf, ...m.body]))))).toMatch(/^body: /);
    // Non-ASCII (two-, three- and four-byte characters) in the envelope, in the encoder's form: the same event.
    const wide = encodeMessage({ ...event, id: "évt-😀-漢" });
    expect(decodeMessage({ subject: wide.subject, headers: { get: (n: string) => (n === MSG_ID_HEADER ? wide.msgId : undefined) }, data: wide.body }).id).toBe("évt-😀-漢");
    const badUtf8 = new Uint8Array([...m.body.subarray(0, m.body.length - 1), 0x22, 0xff, 0x22, 0x7d]);
    expect(errorOf(() => decodeMessage(incoming(m, new Uint8Array([...enc.encode(text.slice(0, text.indexOf(',"data":') + 8)), 0x22, 0xc3, 0x22, 0x7d]))))).toMatch(/^data: the message data is not valid UTF-8/);
    expect(errorOf(() => decodeMessage(incoming(m, badUtf8)))).toMatch(/^data: /);
    expect(errorOf(() => decodeMessage({ ...incoming(m), subject: "hookline.other.order.paid" }))).toMatch(/^subject: /);
    expect(errorOf(() => decodeMessage(incoming(m, m.body, [])))).toMatch(/^Nats-Msg-Id: /);
    expect(errorOf(() => decodeMessage(incoming(m, m.body, [[MSG_ID_HEADER, "evt-1"]])))).toMatch(/^Nats-Msg-Id: /);
    expect(errorOf(() => decodeMessage(incoming(m, new Uint8Array(MAX_MESSAGE_BYTES + 1))))).toMatch(/^body: the message is /);
  });

  it("carries a valid trace context as headers and drops an invalid one on the way in", () => {
    const trace = { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: "rojo=00f067aa0ba902b7" };
    const m = encodeMessage(event, trace);
    expect(m.headers).toEqual([
      [MSG_ID_HEADER, "shop/evt-1"],
      ["traceparent", trace.traceparent],
      ["tracestate", trace.tracestate],
    ]);
    expect(decodeMessage(incoming(m)).traceContext).toEqual(trace);
    expect(decodeMessage(incoming(m, m.body, [[MSG_ID_HEADER, m.msgId], ["traceparent", "garbage"]])).traceContext).toBeUndefined();
    expect(decodeMessage(incoming(encodeMessage(event))).traceContext).toBeUndefined();
  });
});

describe("messageId", () => {
  it("is <namespace>/<id> for an id that can be a header value", () => {
    expect(messageId("shop", "evt-1")).toBe("shop/evt-1");
    expect(messageId("shop", "Order#1001/paid:ok")).toBe("shop/Order#1001/paid:ok");
    expect(messageId("billing", "evt-1")).not.toBe(messageId("shop", "evt-1"));
  });

  it("hashes an id that cannot be a header value, and an id that looks hashed, so no two ids share one", () => {
    const ids = ["evt 1", " evt-1", "evt-1 ", "evt\r\n1", "évènement", "\u{1F600}", "\uD800", "\uFFFD", "sha256:abc", `sha256:${"0".repeat(64)}`];
    const out = ids.map((id) => messageId("shop", id));
    for (const v of out) expect(v).toMatch(/^shop\/sha256:[0-9a-f]{64}$/);
    expect(new Set(out).size).toBe(ids.length);
    for (const id of ids) {
      const d = decodeMessage(incoming(encodeMessage({ ...event, id })));
      expect(d.id).toBe(id);
    }
  });
});
