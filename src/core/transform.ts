// spec.transform: a CEL expression that builds the body sent to one subscription from the event
// (e.g. a Slack-style {"text": ...}). The same language, bounds and cost as spec.filter
// (core/filter.ts, ADR 0015). It is applied to each attempt's body when the request is built
// (delivery/engine/attempt.ts), so the delivery (and its dead letter) keeps the original event,
// a replay transforms again with the subscription's current expression, and the signature is
// over the body actually sent.
import { isCelList, isCelMap, isCelUint } from "@bufbuild/cel";
import { MAX_PAYLOAD_BYTES } from "../api/names.js";
import { compileCel, rememberedBySource, type CompiledCel, type FilterEvent } from "./filter.js";

/** The largest body a transform may build (serialized JSON, bytes): the payload limit. */
export const TRANSFORM_MAX_BYTES = MAX_PAYLOAD_BYTES;

export type TransformResult = { ok: true; body: string } | { ok: false; message: string };

export interface CompiledTransform {
  readonly source: string;
  run(event: FilterEvent): TransformResult;
}

export function compileTransform(source: string): { ok: true; transform: CompiledTransform } | { ok: false; message: string } {
  const c = compileCel(source, "remove spec.transform to send the event as it is");
  if (!c.ok) return c;
  return { ok: true, transform: { source, run: (event) => runTransform(c, event) } };
}

function runTransform(c: CompiledCel, event: FilterEvent): TransformResult {
  const out = c.run(event, undefined, "transform");
  if (out.kind === "error") return { ok: false, message: out.message };
  try {
    const body = toJson(out.value);
    const bytes = Buffer.byteLength(body, "utf8");
    if (bytes > TRANSFORM_MAX_BYTES) return { ok: false, message: `the body it built is ${bytes} bytes; at most ${TRANSFORM_MAX_BYTES}` };
    return { ok: true, body };
  } catch (err) {
    return { ok: false, message: (err as Error).message };
  }
}

/** compileTransform, remembered by source (core/filter.ts rememberedBySource). */
export const cachedTransform = rememberedBySource(compileTransform);

/**
 * A CEL value as JSON text: maps with string keys (int, uint and bool keys written as strings),
 * lists, strings, bools, null, finite numbers, integers (exact, however large), bytes as base64.
 * Throws on what JSON cannot hold (NaN, a type, a timestamp), naming it. The text grows with the
 * value, which the evaluation's cost bounds; TRANSFORM_MAX_BYTES is checked on the whole.
 */
export function toJson(v: unknown, depth = 0): string {
  if (depth > 1100) throw new Error("the body it built nests deeper than 1,100 levels");
  if (v === null || v === undefined) return "null";
  switch (typeof v) {
    case "string":
      return JSON.stringify(v);
    case "boolean":
      return v ? "true" : "false";
    case "bigint":
      return v.toString();
    case "number":
      if (!Number.isFinite(v)) throw new Error(`the body it built holds ${v}, which JSON cannot`);
      return JSON.stringify(v);
    case "object":
      return objectJson(v, depth);
    case "function":
    case "symbol":
    case "undefined":
      break;
  }
  throw new Error(`the body it built holds a ${typeof v}, which JSON cannot`);
}

/** toJson of a CEL uint, bytes, list or map (or a plain array or object from the data). */
function objectJson(v: object, depth: number): string {
  if (isCelUint(v)) return v.value.toString();
  if (v instanceof Uint8Array) return JSON.stringify(Buffer.from(v).toString("base64"));
  if (isCelList(v) || Array.isArray(v)) {
    const parts: string[] = [];
    for (const x of v as Iterable<unknown>) parts.push(toJson(x, depth + 1));
    return `[${parts.join(",")}]`;
  }
  if (isCelMap(v)) {
    const parts: string[] = [];
    for (const [k, x] of v.entries()) parts.push(`${JSON.stringify(isCelUint(k) ? k.value.toString() : String(k))}:${toJson(x, depth + 1)}`);
    return `{${parts.join(",")}}`;
  }
  if (Object.getPrototypeOf(v) === Object.prototype) {
    const parts = Object.entries(v as Record<string, unknown>).map(([k, x]) => `${JSON.stringify(k)}:${toJson(x, depth + 1)}`);
    return `{${parts.join(",")}}`;
  }
  throw new Error(`the body it built holds a ${v.constructor?.name ?? "value"}, which JSON cannot (a timestamp or a type: make it a string)`);
}
