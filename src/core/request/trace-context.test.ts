import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { traceContextSchema, validStoredTraceparent } from "../../api/trace-context.js";
import { childTraceparent, normalizeTraceContext, parseTraceparent, parseTracestate, traceIdOf, truncateTracestate } from "./trace-context.js";

const TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/** The longest tracestate W3C allows: 32 entries, keys and values of 256 characters each. */
function longestTracestate(): string {
  return Array.from({ length: 32 }, (_, i) => `${String(i).padStart(2, "0")}${"k".repeat(254)}=${"v".repeat(255)}${String.fromCharCode(0x41 + i)}`).join(",");
}

describe("traceparent", () => {
  it.each([
    ["version 00", TP, TP],
    ["not sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"],
    ["random flag (level 2)", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03"],
    ["a higher version, downgraded with its sampled bit", "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-what-the-future-holds", TP],
    ["a higher version of exactly 55 characters", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"],
  ])("accepts %s", (_, input, stored) => {
    expect(normalizeTraceContext({ traceparent: input })).toEqual({ ok: true, value: { traceparent: stored } });
  });

  it.each([
    ["version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /version ff is forbidden/],
    ["a version that is not hex", "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /the form is/],
    ["a one-digit version", "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /the form is/],
    ["upper-case hex", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", /lowercase/],
    ["upper-case flags", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A", /lowercase/],
    ["reserved flags", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff", /reserved bits/],
    ["flags 04", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-04", /reserved bits/],
    ["one-digit flags", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1", /the form is/],
    ["version 00 with a fifth field", `${TP}-extra`, /exactly four fields/],
    ["an all-zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", /trace id is all zeros/],
    ["an all-zero parent id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", /parent id is all zeros/],
    ["a short trace id", "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", /the form is/],
    ["non-ASCII", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b\u00e9-01", /the form is/],
    ["spaces around it", ` ${TP}`, /the form is/],
    ["empty", "", /the form is/],
    ["a higher version shorter than 55 characters", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0", /the form is/],
    ["a higher version not followed by a dash", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", /the form is/],
  ])("refuses %s, naming the field", (_, input, why) => {
    const r = normalizeTraceContext({ traceparent: input });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.field).toBe("traceparent");
    expect(r.message).toMatch(why);
  });

  it("a child keeps the trace, takes the span id, and keeps the parent's random flag", () => {
    const parent = { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03" };
    expect(childTraceparent(parent, "4bf92f3577b34da6a3ce929d0e0e4736", "b7ad6b7169203331", true)).toBe("00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-03");
    expect(childTraceparent(parent, "4bf92f3577b34da6a3ce929d0e0e4736", "b7ad6b7169203331", false)).toBe("00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-02");
    expect(childTraceparent(undefined, "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", true)).toBe("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    expect(traceIdOf(parent)).toBe("4bf92f3577b34da6a3ce929d0e0e4736");
  });

  it("every traceparent it accepts is valid in the stored form, and reads back the same", () => {
    const hex = (n: number) => fc.stringMatching(new RegExp(`^[0-9a-f]{${n}}$`));
    fc.assert(
      fc.property(hex(2), hex(32), hex(16), hex(2), fc.option(fc.stringMatching(/^-[\x21-\x7e]{0,20}$/), { nil: undefined }), (v, t, p, f, rest) => {
        const r = parseTraceparent(`${v}-${t}-${p}-${f}${v === "00" ? "" : (rest ?? "")}`);
        if (!r.ok) return;
        const stored = `00-${r.value.traceId}-${r.value.parentId}-${r.value.flags.toString(16).padStart(2, "0")}`;
        expect(validStoredTraceparent(stored)).toBe(true);
        expect(normalizeTraceContext({ traceparent: stored })).toEqual({ ok: true, value: { traceparent: stored } });
      }),
    );
  });
});

describe("tracestate", () => {
  it("drops optional whitespace and empty entries, keeps the order", () => {
    expect(normalizeTraceContext({ traceparent: TP, tracestate: " rojo=00f067aa0ba902b7 ,\t,congo=t61rcWkgMzE, " })).toEqual({
      ok: true,
      value: { traceparent: TP, tracestate: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE" },
    });
    // Leading spaces of a value are part of it; W3C keys may hold @ (tenant@system).
    expect(normalizeTraceContext({ traceparent: TP, tracestate: "t61@dt= a b" })).toEqual({ ok: true, value: { traceparent: TP, tracestate: "t61@dt= a b" } });
    // Empty, or only whitespace: no tracestate.
    expect(normalizeTraceContext({ traceparent: TP, tracestate: " , " })).toEqual({ ok: true, value: { traceparent: TP } });
  });

  it("the longest W3C tracestate is read whole and truncated to 512 characters by whole entries", () => {
    const longest = longestTracestate();
    expect(longest.length).toBe(16_447);
    const entries = parseTracestate(longest);
    expect(entries).toMatchObject({ ok: true });
    if (!entries.ok) return;
    expect(entries.value).toHaveLength(32);
    const r = normalizeTraceContext({ traceparent: TP, tracestate: longest });
    // Every entry is longer than 128 characters and 512 hold none of them.
    expect(r).toEqual({ ok: true, value: { traceparent: TP } });
  });

  it("truncation drops entries longer than 128 characters first, then from the end", () => {
    const long = `big=${"x".repeat(200)}`;
    const small = Array.from({ length: 20 }, (_, i) => `k${i}=${"v".repeat(20)}`); // 24-25 characters each
    const kept = truncateTracestate([small[0]!, long, ...small.slice(1)], 512);
    expect(kept).not.toContain(long);
    expect(kept).toEqual(small); // 20 entries of ~24 characters fit
    const many = Array.from({ length: 32 }, (_, i) => `k${String(i).padStart(2, "0")}=${"v".repeat(20)}`); // 24 characters each
    const cut = truncateTracestate(many, 512);
    expect(cut).toEqual(many.slice(0, cut.length));
    expect(cut.join(",").length).toBeLessThanOrEqual(512);
    expect(many.slice(0, cut.length + 1).join(",").length).toBeGreaterThan(512);
    // Exactly 512 is kept whole.
    const exact = [`a=${"v".repeat(254)}`, `b=${"v".repeat(253)}`];
    expect(exact.join(",").length).toBe(512);
    expect(truncateTracestate(exact)).toEqual(exact);
  });

  it.each([
    ["33 entries", Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(","), /33 entries; at most 32/],
    ["33 list-members counting an empty one", [...Array.from({ length: 32 }, (_, i) => `k${i}=v`), ""].join(","), /33 entries/],
    ["a repeated key", "rojo=1,congo=2,rojo=3", /appears twice/],
    ["an upper-case key", "Rojo=1", /a key starts with a lowercase letter/],
    ["a key starting with _", "_rojo=1", /a key starts/],
    ["a key of 257 characters", `${"k".repeat(257)}=1`, /the key is 257 characters/],
    ["a value of 257 characters", `k=${"v".repeat(257)}`, /the value is 257 characters/],
    ["an empty value", "rojo=", /a value is 1 to 256/],
    ["a value with =", "rojo=a=b", /a value is/],
    ["no =", "rojo", /is not key=value/],
    ["non-ASCII", "rojo=caf\u00e9", /not printable ASCII/],
    ["a line break", "rojo=1\r\nx-injected: yes", /not printable ASCII/],
    ["a NUL", "rojo=\u0000", /not printable ASCII/],
    ["more than anything valid", `k=${" ".repeat(40_000)}v`, /longer than any valid one/],
  ])("refuses %s, naming the field", (_, tracestate, why) => {
    const r = normalizeTraceContext({ traceparent: TP, tracestate });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.field).toBe("tracestate");
    expect(r.message).toMatch(why);
  });

  it("a tracestate alone is refused; without either, the traceparent is required", () => {
    expect(normalizeTraceContext({ tracestate: "rojo=1" })).toMatchObject({ ok: false, field: "tracestate" });
    expect(normalizeTraceContext({})).toMatchObject({ ok: false, field: "traceparent" });
  });

  it("whatever it accepts, the stored-form schema (the CRD's rules) accepts too", () => {
    const key = fc.stringMatching(/^[a-z0-9][a-z0-9_*/@-]{0,300}$/);
    const value = fc.stringMatching(/^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,300}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/);
    const ows = fc.constantFrom("", " ", "\t", "  ");
    const entry = fc.oneof(fc.tuple(ows, key, value, ows).map(([a, k, v, b]) => `${a}${k}=${v}${b}`), ows);
    fc.assert(
      fc.property(fc.array(entry, { minLength: 1, maxLength: 34 }), (entries) => {
        const r = normalizeTraceContext({ traceparent: TP, tracestate: entries.join(",") });
        if (!r.ok) return;
        expect(traceContextSchema.safeParse(r.value).success).toBe(true);
        expect(r.value.tracestate?.length ?? 0).toBeLessThanOrEqual(512);
      }),
      { numRuns: 300 },
    );
  });
});
