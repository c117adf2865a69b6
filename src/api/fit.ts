// Fitting what the operator writes to what the API server accepts: every string it writes into
// status is cut to its schema's maxLength here, and nowhere else, so no error text, event type
// list or replay reason can make the API server refuse a status write (422). The limits come
// from the same zod schemas that generate the CRDs, so they cannot drift.
import type { z } from "zod";

/** Marks a cut: the reader sees that the text went on. */
const ELLIPSIS = "…";

/**
 * `text` cut to at most `max` UTF-16 code units (what zod counts; never more code points than
 * the API server counts), ending in "…" when cut. A surrogate pair is never split.
 */
export function clipText(text: string, max: number): string {
  if (text.length <= max) return text;
  if (max <= 0) return "";
  let end = max - ELLIPSIS.length;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--; // a high surrogate whose partner would be cut off
  return text.slice(0, Math.max(0, end)) + ELLIPSIS;
}

/** `text` cut to at most `maxBytes` bytes of UTF-8, on a character boundary, ending in "…" when cut. */
export function clipBytes(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text) <= maxBytes) return text;
  const budget = maxBytes - Buffer.byteLength(ELLIPSIS);
  let bytes = 0;
  let out = "";
  for (const ch of text) {
    const n = Buffer.byteLength(ch);
    if (bytes + n > budget) break;
    bytes += n;
    out += ch;
  }
  return out + ELLIPSIS;
}

interface Def {
  type: string;
  innerType?: z.ZodType;
  in?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  element?: z.ZodType;
  valueType?: z.ZodType;
  checks?: Array<{ _zod: { def: { check: string; maximum?: number } } }>;
}

function defOf(schema: z.ZodType): Def {
  return (schema as unknown as { _zod: { def: Def } })._zod.def;
}

function maxLength(def: Def): number | undefined {
  for (const c of def.checks ?? []) if (c._zod.def.check === "max_length") return c._zod.def.maximum;
  return undefined;
}

/**
 * `value` with every string cut to its schema's maxLength and every array to its maxItems (the
 * newest items kept: lists such as status.history are oldest first). Fields the schema does not
 * know, nulls (merge-patch deletions) and other values pass unchanged. Idempotent; never throws.
 */
export function fitToSchema<T>(schema: z.ZodType, value: T): T {
  return fit(schema, value) as T;
}

// One case per zod schema kind, in one switch: splitting it would scatter the walk's order.
// eslint-disable-next-line complexity
function fit(schema: z.ZodType, value: unknown): unknown {
  if (value === null || value === undefined) return value;
  const def = defOf(schema);
  switch (def.type) {
    case "optional":
    case "nullable":
    case "default":
    case "prefault":
    case "readonly":
    case "catch":
      return fit(def.innerType!, value);
    case "pipe":
      return fit(def.in!, value);
    case "string": {
      const max = maxLength(def);
      return typeof value === "string" && max !== undefined ? clipText(value, max) : value;
    }
    case "array": {
      if (!Array.isArray(value)) return value;
      const max = maxLength(def);
      const kept = max !== undefined && value.length > max ? value.slice(value.length - max) : value;
      return kept.map((v) => fit(def.element!, v));
    }
    case "object": {
      if (typeof value !== "object" || Array.isArray(value)) return value;
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = def.shape![k] ? fit(def.shape![k], v) : v;
      return out;
    }
    case "record": {
      if (typeof value !== "object" || Array.isArray(value)) return value;
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = fit(def.valueType!, v);
      return out;
    }
    default:
      return value;
  }
}
