// The ordering key of a subscription (spec.ordering.key), parsed once per subscription version
// (the grammar, shared with the CRD's CEL rule, is in api/ordering.ts), and the value a delivery
// has at it. Pure.
import { createHash } from "node:crypto";
import { EVENT_TYPE_KEY, INDEX_STEP, isOrderingKey, NAME_STEP, QUOTED_STEP } from "../api/ordering.js";

export { EVENT_TYPE_KEY, isOrderingKey };

/** Longest serialized key value kept as it is; a longer one is kept as its SHA-256. */
export const ORDERING_VALUE_MAX_LENGTH = 128;

const STEP_RE = new RegExp(`${NAME_STEP}|${QUOTED_STEP}|${INDEX_STEP}`, "gu");

export type Step = { kind: "name"; name: string } | { kind: "index"; index: number };

export type OrderingKey = { kind: "eventType" } | { kind: "path"; steps: Step[] };

/** The parsed key; undefined when it is not in the grammar. */
export function parseOrderingKey(key: string): OrderingKey | undefined {
  if (key === EVENT_TYPE_KEY) return { kind: "eventType" };
  if (!isOrderingKey(key)) return undefined;
  const steps: Step[] = [];
  for (const m of key.slice(1).matchAll(STEP_RE)) {
    const text = m[0];
    if (text.startsWith(".")) steps.push({ kind: "name", name: text.slice(1) });
    else if (text.startsWith("['")) steps.push({ kind: "name", name: text.slice(2, -2) });
    else steps.push({ kind: "index", index: Number(text.slice(1, -1)) });
  }
  return { kind: "path", steps };
}

/**
 * The value a payload has at `key`, serialized as JSON (so 5 and "5" are different keys), or
 * undefined when the payload has no value there (or null): such a delivery is not ordered.
 * A serialized value longer than ORDERING_VALUE_MAX_LENGTH is kept as `sha256:<hex>`.
 */
export function orderingValue(key: OrderingKey, input: { eventType: string; payload: unknown }): string | undefined {
  let v: unknown;
  if (key.kind === "eventType") v = input.eventType;
  else {
    v = input.payload;
    for (const step of key.steps) {
      if (step.kind === "index") v = Array.isArray(v) ? v[step.index] : undefined;
      else v = v !== null && typeof v === "object" && !Array.isArray(v) && Object.hasOwn(v, step.name) ? (v as Record<string, unknown>)[step.name] : undefined;
      if (v === undefined) return undefined;
    }
  }
  if (v === undefined || v === null) return undefined;
  const text = JSON.stringify(v);
  return text.length <= ORDERING_VALUE_MAX_LENGTH ? text : `sha256:${createHash("sha256").update(text).digest("hex")}`;
}
