// Event payloads from the seed: ordinary objects, non-ASCII text that splits badly across chunk
// boundaries (emoji, CJK, combining marks, a BOM-like U+FEFF), values near the 256 KiB limit,
// deep nesting (depth up to 200, which the API server accepts), and unusual but valid JSON
// (empty keys, escapes, 1e308, -0, long numbers).
import { MAX_PAYLOAD_BYTES } from "../../src/api/names.js";
import type { Rng } from "./rng.js";

const PIECES = ["a", "Z", "0", " ", "é", "ñ", "日本", "語", "中文", "한국", "😀", "🚀", "👩‍💻", "🇫🇷", "e\u0301", "a\u0308\u0323", "\u200d", "\ufeff", "Ω", "∑", "\"", "\\", "\n", "\t", "</script>", "\u2028"];

export function text(rng: Rng, length: number): string {
  let s = "";
  while (s.length < length) s += rng.pick(PIECES);
  return s;
}

function nested(rng: Rng, depth: number): unknown {
  let v: unknown = text(rng, 8);
  for (let i = 0; i < depth; i++) v = rng.chance(0.5) ? { [rng.pick(["n", "", "ü", "😀"])]: v } : [v];
  return v;
}

/** A string payload whose serialized size lands within a few KiB below the limit. */
function nearLimit(rng: Rng): unknown {
  // Mostly multi-byte characters, so any chunk boundary is likely to split one.
  const unit = rng.pick(["😀", "日本語", "é", "x😀y"]);
  const unitBytes = JSON.stringify(unit).length - 2 + (Buffer.byteLength(unit) - unit.length);
  const budget = MAX_PAYLOAD_BYTES - 200 - rng.int(0, 4096);
  const blob = unit.repeat(Math.floor(budget / Math.max(1, Buffer.byteLength(unit))));
  return { blob, note: text(rng, 20), unitBytes };
}

const UNUSUAL: unknown[] = [
  { "": "empty key", " ": 1, "\u0000": "nul key" },
  { big: 1e308, small: 5e-324, negZero: -0, int: 9007199254740991, neg: -123456789012 },
  { esc: "\u0001\u001f\u007f\ud7ff\ue000\uffff", quote: "\"'`", slash: "/\\/" },
  [null, true, false, 0, [], {}, [[]], [{}]],
  "just a string ☃",
  42,
  null,
  { emoji: "👨‍👩‍👧‍👦🏳️‍🌈", cjk: "漢字かなカナ", combining: "Z\u0351\u0352\u0357\u0300" },
];

export type PayloadKind = "plain" | "unicode" | "nearLimit" | "deep" | "unusual" | "none";

export function payload(rng: Rng, quick: boolean): { kind: PayloadKind; value: unknown } {
  const kind = rng.weighted<PayloadKind>([
    ["plain", 5],
    ["unicode", 4],
    ["nearLimit", quick ? 0.6 : 1],
    ["deep", 1],
    ["unusual", 2],
    ["none", 0.5],
  ]);
  switch (kind) {
    case "plain":
      return { kind, value: { order: rng.int(1, 1e6), amount: { value: rng.int(0, 1e5), currency: rng.pick(["EUR", "USD", "JPY"]) }, tags: [text(rng, 5)] } };
    case "unicode":
      return { kind, value: { text: text(rng, rng.int(10, 20_000)), name: text(rng, 12) } };
    case "nearLimit":
      return { kind, value: nearLimit(rng) };
    case "deep":
      return { kind, value: nested(rng, rng.int(20, 200)) };
    case "unusual":
      return { kind, value: structuredClone(rng.pick(UNUSUAL)) };
    case "none":
      return { kind, value: undefined };
  }
}
