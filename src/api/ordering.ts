// The grammar of a subscription's spec.ordering.key, shared by the CRD's CEL rule and the
// operator's parser (core/ordering-key.ts): "eventType", or a JSONPath into the payload in a
// small safe subset: `$` then 1..32 steps, each `.name`, `['any name']` or `[index]`. No
// wildcards, filters, slices or recursive descent, so one evaluation costs at most 32 lookups.

/** The key that orders by the delivery's spec.eventType instead of its payload. */
export const EVENT_TYPE_KEY = "eventType";
export const ORDERING_KEY_MAX_LENGTH = 256;
export const ORDERING_KEY_MAX_STEPS = 32;

// A name step: ASCII letters, digits, `_` and `-`, or any non-ASCII character (RE2 and
// JavaScript agree on both classes). A bracket step takes any name without `'`, `\` or controls.
export const NAME_STEP = String.raw`\.(?:[A-Za-z0-9_-]|[^\x00-\x7F])+`;
export const QUOTED_STEP = String.raw`\['[^'\\\x00-\x1F]+'\]`;
export const INDEX_STEP = String.raw`\[(?:0|[1-9][0-9]{0,5})\]`;

/** The grammar of a payload key, for CEL (RE2) and for JavaScript (with the `u` flag). */
export const ORDERING_PATH_PATTERN = `^\\$(?:${NAME_STEP}|${QUOTED_STEP}|${INDEX_STEP}){1,${ORDERING_KEY_MAX_STEPS}}$`;
const PATH_RE = new RegExp(ORDERING_PATH_PATTERN, "u");

/** Whether `key` is an ordering key the operator understands (the API server's rule, in TypeScript). */
export function isOrderingKey(key: string): boolean {
  return key === EVENT_TYPE_KEY || (key.length <= ORDERING_KEY_MAX_LENGTH && PATH_RE.test(key));
}
