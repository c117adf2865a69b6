import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DEFAULT_PROVIDERS, GENERIC_PROVIDER, MAX_PROVIDERS, parseProviders, providerLabel } from "./provider.js";

const allowed = new Set<string>(DEFAULT_PROVIDERS);

describe("providerLabel", () => {
  it("keeps an allowed value (trimmed, lower-case), else generic", () => {
    expect(providerLabel("stripe", allowed)).toBe("stripe");
    expect(providerLabel(" GitHub ", allowed)).toBe("github");
    expect(providerLabel("acme-internal", allowed)).toBe(GENERIC_PROVIDER);
    expect(providerLabel(undefined, allowed)).toBe(GENERIC_PROVIDER);
    expect(providerLabel("", allowed)).toBe(GENERIC_PROVIDER);
    expect(providerLabel("strïpe", allowed)).toBe(GENERIC_PROVIDER);
  });

  it("whatever the label holds (any text, any size), the value is one of the allow-list: bounded cardinality", () => {
    fc.assert(
      fc.property(fc.option(fc.string({ unit: "grapheme", maxLength: 300 }), { nil: undefined }), (v) => {
        const got = providerLabel(v, allowed);
        expect(allowed.has(got)).toBe(true);
      }),
    );
  });
});

describe("parseProviders (HOOKLINE_METRIC_PROVIDERS)", () => {
  it("reads a comma list, lower-cased, deduplicated, generic always in", () => {
    expect(parseProviders("Stripe, github,,stripe")).toEqual({ ok: true, providers: ["stripe", "github", "generic"] });
    expect(parseProviders("")).toEqual({ ok: true, providers: ["generic"] });
  });

  it("refuses an entry that is not a short token, naming it, and a list longer than the bound", () => {
    const bad = parseProviders("stripe,my provider");
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.problem).toContain('"my provider"');
    expect(parseProviders("x".repeat(33)).ok).toBe(false);
    expect(parseProviders(Array.from({ length: MAX_PROVIDERS + 1 }, (_, i) => `p${i}`).join(",")).ok).toBe(false);
    expect(parseProviders(Array.from({ length: MAX_PROVIDERS }, (_, i) => `p${i}`).join(",")).ok).toBe(true);
  });
});
