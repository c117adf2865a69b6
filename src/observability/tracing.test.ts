import { describe, expect, it } from "vitest";
import { createAttemptTracer, PASS_THROUGH, redactedUrl } from "./tracing.js";

const parent = { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: "rojo=00f067aa0ba902b7" };
const info = { namespace: "shop", delivery: "evt-1.acme", subscription: "acme", attempt: 1, replay: false, eventId: "evt-1", url: "https://hooks.example/orders" };

describe("tracing off", () => {
  it("passes the producer's context through unchanged and logs its trace id", () => {
    const t = PASS_THROUGH.start({ ...info, parent });
    expect(t.headers).toEqual({ traceparent: parent.traceparent, tracestate: parent.tracestate });
    expect(t.log).toEqual({ trace_id: "4bf92f3577b34da6a3ce929d0e0e4736" });
    expect(PASS_THROUGH.start(info).headers).toEqual({});
  });

  it("is what createAttemptTracer gives without a configuration", async () => {
    expect(await createAttemptTracer(undefined, { log: { info: () => undefined, warn: () => undefined }, version: "0" })).toBe(PASS_THROUGH);
  });
});

describe("redactedUrl", () => {
  it.each([
    ["https://hooks.example/", "https://hooks.example/"],
    ["https://hooks.slack.com/services/T000/B000/XXXXSECRET", "https://hooks.slack.com/REDACTED"],
    ["https://hooks.example:8443/in?token=SECRET&v=2", "https://hooks.example:8443/REDACTED?token=REDACTED&v=REDACTED"],
    ["http://user:SECRET@127.0.0.1:9000/x", "http://REDACTED:REDACTED@127.0.0.1:9000/REDACTED"],
    ["http://[::1]:9000/", "http://[::1]:9000/"],
    ["not a url SECRET", "REDACTED"],
  ])("%s", (raw, redacted) => {
    expect(redactedUrl(raw)).toBe(redacted);
    expect(redactedUrl(raw)).not.toContain("SECRET");
  });
});
