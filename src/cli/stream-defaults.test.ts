// Where the operator's environment meets the stream layer: what HOOKLINE_STREAM_* default to is
// what a StreamConnection makes without them (jetstream/layout.ts DEFAULT_LAYOUT).
import { describe, expect, it } from "vitest";
import { INT_VARS, loadConfig } from "../config/config.js";
import { ATTEMPTS_TTL_MS } from "../transports/stream/attempt-log.js";
import { DEFAULT_LAYOUT } from "../jetstream/layout.js";

describe("stream defaults", () => {
  it("the operator's defaults are the layout's", () => {
    const c = loadConfig({});
    expect({ maxAgeMs: c.streamMaxAgeMs, namespaceMaxMessages: c.streamNamespaceMaxMessages, namespaceMaxBytes: c.streamNamespaceMaxBytes, replicas: c.streamReplicas }).toEqual({
      maxAgeMs: DEFAULT_LAYOUT.maxAgeMs,
      namespaceMaxMessages: DEFAULT_LAYOUT.namespaceMaxMessages,
      namespaceMaxBytes: DEFAULT_LAYOUT.namespaceMaxBytes,
      replicas: DEFAULT_LAYOUT.replicas,
    });
    // A message may wait up to the age with failed attempts behind it: their record must last as long.
    expect(INT_VARS.streamMaxAgeMs.max).toBeLessThanOrEqual(ATTEMPTS_TTL_MS);
  });
});
