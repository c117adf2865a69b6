// The kept payloads: the size cap per payload, the byte budget, the fair share between namespaces
// (a flooding namespace evicts only its own while another holds less), and that an attempt's body
// built from a kept payload is the body built from the API server's copy, byte for byte, without
// a read.
import { describe, expect, it } from "vitest";
import type { KubeClient } from "../kube/client.js";
import type { RawItem } from "../kube/reflector.js";
import { KEPT_PAYLOAD_MAX_BYTES, KEPT_PAYLOAD_OVERHEAD_BYTES, KeptPayloads } from "./kept-payloads.js";
import type { DeliveryObject } from "./objects.js";
import { loadRequestBody, stripPayload } from "./payload.js";

/** A payload whose serialized form is exactly `bytes` long (a JSON string of "é" and "x"). */
function jsonOf(bytes: number): string {
  // "é" is two UTF-8 bytes: a character split across any chunk boundary a reader might use.
  const body = "é".repeat(Math.floor((bytes - 2) / 2)) + "x".repeat((bytes - 2) % 2);
  const json = JSON.stringify(body);
  expect(Buffer.byteLength(json)).toBe(bytes);
  return json;
}

describe("KeptPayloads", () => {
  it("keeps a payload of up to 64 KiB serialized, not one byte more; take removes it; forget drops it", () => {
    const reads: boolean[] = [];
    const kept = new KeptPayloads({ maxBytes: 1024 * 1024, onRead: (hit) => reads.push(hit) });
    const largest = jsonOf(KEPT_PAYLOAD_MAX_BYTES);
    kept.keep("a", "uid-1", largest, KEPT_PAYLOAD_MAX_BYTES);
    kept.keep("a", "uid-2", jsonOf(KEPT_PAYLOAD_MAX_BYTES + 1), KEPT_PAYLOAD_MAX_BYTES + 1);
    kept.keep("a", "uid-3", "3", 1);
    expect(kept.bytes).toBe(KEPT_PAYLOAD_MAX_BYTES + 1 + 2 * KEPT_PAYLOAD_OVERHEAD_BYTES);
    expect(kept.take("a", "uid-1")).toBe(largest);
    expect(kept.take("a", "uid-1")).toBeUndefined();
    expect(kept.take("a", "uid-2")).toBeUndefined();
    kept.forget("a", "uid-3");
    expect([kept.take("a", "uid-3"), kept.bytes, kept.bytesByNamespace().size]).toEqual([undefined, 0, 0]);
    expect(reads).toEqual([true, false, false, false]);
  });

  it("keeps nothing with a budget of 0, and counts every read a miss", () => {
    const reads: boolean[] = [];
    const kept = new KeptPayloads({ maxBytes: 0, onRead: (hit) => reads.push(hit) });
    kept.keep("a", "u", "1", 1);
    expect([kept.take("a", "u"), kept.bytes, reads]).toEqual([undefined, 0, [false]]);
  });

  it("one namespace flooding the budget evicts its own payloads, never another's that holds less", () => {
    const evictions: string[] = [];
    const budget = 100 * (1024 + KEPT_PAYLOAD_OVERHEAD_BYTES);
    const kept = new KeptPayloads({ maxBytes: budget, onEvict: (reason) => evictions.push(reason) });
    const payload = jsonOf(1024);
    for (let i = 0; i < 20; i++) kept.keep("quiet", `q-${i}`, payload, 1024);
    // Ten times the budget from the flooding namespace, before and after the quiet one's.
    for (let i = 0; i < 1000; i++) kept.keep("flood", `f-${i}`, payload, 1024);
    for (let i = 20; i < 40; i++) kept.keep("quiet", `q-${i}`, payload, 1024);
    expect(kept.bytes).toBeLessThanOrEqual(budget);
    const by = kept.bytesByNamespace();
    expect(by.get("quiet")).toBe(40 * (1024 + KEPT_PAYLOAD_OVERHEAD_BYTES));
    expect(by.get("flood")).toBe(60 * (1024 + KEPT_PAYLOAD_OVERHEAD_BYTES));
    for (let i = 0; i < 40; i++) expect(kept.take("quiet", `q-${i}`), `q-${i}`).toBe(payload);
    // The flood keeps its most recent 60.
    expect(kept.take("flood", "f-999")).toBe(payload);
    expect(kept.take("flood", "f-939")).toBeUndefined();
    expect(evictions.length).toBe(1000 - 60);
    expect(new Set(evictions)).toEqual(new Set(["total"]));
  });
});

describe("loadRequestBody with kept payloads", () => {
  const noReads = { request: () => Promise.reject(new Error("read from the API server")) } as unknown as KubeClient;

  function cachedDelivery(payload: unknown, kept: KeptPayloads): DeliveryObject {
    const item: RawItem = {
      metadata: { name: "d", namespace: "ns", uid: "uid-d", creationTimestamp: "2026-12-04T10:00:00Z" },
      spec: { subscriptionRef: { name: "s" }, eventType: "order.paid", eventId: "evt-1", payload },
    };
    stripPayload(item, [], (json, bytes) => kept.keep("ns", "uid-d", json, bytes));
    return item;
  }

  it("builds the same body from the kept payload as from the API server's copy, and reads nothing", async () => {
    const payload = { text: "Grüße, 東京 😀 \u2028 \"quoted\" \\", nested: { list: [1, 2.5, -0.001, true, null, { z: 1, a: 2 }] } };
    const kept = new KeptPayloads({ maxBytes: 1024 * 1024 });
    const obj = cachedDelivery(payload, kept);
    expect((obj.spec as Record<string, unknown>).payload).toBeUndefined();
    const body = await loadRequestBody(noReads, obj, undefined, kept);
    expect(body?.body).toBe(`{"id":"evt-1","type":"order.paid","timestamp":"2026-12-04T10:00:00Z","created_at":"2026-12-04T10:00:00Z","data":${JSON.stringify(payload)}}`);
    // Taken: the next attempt reads it from the API server.
    await expect(loadRequestBody(noReads, obj, undefined, kept)).rejects.toThrow("read from the API server");
  });

  it("a payload too big to keep is read from the API server", async () => {
    const kept = new KeptPayloads({ maxBytes: 1024 * 1024 });
    const obj = cachedDelivery({ pad: "x".repeat(KEPT_PAYLOAD_MAX_BYTES) }, kept);
    expect(kept.bytes).toBe(0);
    await expect(loadRequestBody(noReads, obj, undefined, kept)).rejects.toThrow("read from the API server");
  });
});
