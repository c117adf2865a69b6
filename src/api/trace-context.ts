// A delivery's W3C trace context (https://www.w3.org/TR/trace-context/): spec.traceContext
// {traceparent, tracestate}, the producer's position in its trace when it published the event.
// The rules here are the stored form, which the API server enforces (CEL) and the operator
// checks again: what the publish doors write after normalizing a producer's headers
// (src/core/request/trace-context.ts). Strict, so that what is stored can be sent as it is:
//
//   traceparent  00-<32 lowercase hex trace id>-<16 lowercase hex parent id>-<flags>
//                ids not all zeros; flags 00..03 (sampled 01, random 02; other bits must be 0)
//   tracestate   key=value list-members joined by "," (no spaces around them, no empty ones),
//                at most 32, keys unique; keys lowercase letters and digits then _ - * / @
//                (1..256), values printable ASCII but "," and "=" (1..256, not ending in a
//                space); at most 512 characters (the W3C's propagation minimum: the doors
//                truncate longer ones by the W3C's rule)
import { z } from "zod";
import { withRules } from "./fields.js";

/** W3C trace context, as it travels in the traceparent and tracestate headers. */
export interface TraceContext {
  traceparent: string;
  tracestate?: string;
}

export const TRACEPARENT_LENGTH = 55;
/** The longest stored tracestate: W3C asks to propagate at least 512 characters; longer ones are truncated by whole entries. */
export const MAX_TRACESTATE_LENGTH = 512;
export const MAX_TRACESTATE_MEMBERS = 32;
export const MAX_TRACESTATE_KEY_LENGTH = 256;
export const MAX_TRACESTATE_VALUE_LENGTH = 256;

/** A stored traceparent: version 00 only (the doors downgrade higher versions, as W3C allows). */
export const TRACEPARENT_PATTERN = "^00-[0-9a-f]{32}-[0-9a-f]{16}-0[0-3]$";
export const TRACESTATE_KEY = "[a-z0-9][a-z0-9_*/@-]*";
/** nblk-chr: printable ASCII but space, comma and equals; chr adds the space. */
export const TRACESTATE_VALUE = "[\\x20-\\x2b\\x2d-\\x3c\\x3e-\\x7e]*[\\x21-\\x2b\\x2d-\\x3c\\x3e-\\x7e]";
const MEMBER = `${TRACESTATE_KEY}=${TRACESTATE_VALUE}`;
/** A stored tracestate: the list grammar, lengths and counts aside. */
export const TRACESTATE_PATTERN = `^${MEMBER}(,${MEMBER})*$`;

const TRACEPARENT_RE = new RegExp(TRACEPARENT_PATTERN);
const TRACESTATE_RE = new RegExp(TRACESTATE_PATTERN);

export const TRACEPARENT_MESSAGE =
  "must be a W3C traceparent: 00-<32 lowercase hex trace id>-<16 lowercase hex parent id>-<flags 00, 01, 02 or 03>, neither id all zeros, e.g. 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/** Whether a stored traceparent is valid (the CEL rule below, in TypeScript). */
export function validStoredTraceparent(v: string): boolean {
  return TRACEPARENT_RE.test(v) && !/^00-0{32}-/.test(v) && !/^00-[0-9a-f]{32}-0{16}-/.test(v);
}

const memberKey = (m: string) => m.slice(0, m.indexOf("="));

export const traceparentSchema = withRules(
  z.string().max(TRACEPARENT_LENGTH),
  { description: "The producer's W3C traceparent when it published the event: 00-<trace id>-<parent id>-<flags>. Each attempt sends a traceparent in this trace (a child span of it when the operator exports traces)." },
  [
    {
      rule: `self.matches(r'${TRACEPARENT_PATTERN}') && !self.matches(r'^00-0{32}-') && !self.matches(r'^00-[0-9a-f]{32}-0{16}-')`,
      message: TRACEPARENT_MESSAGE,
      check: validStoredTraceparent,
    },
  ],
);

export const tracestateSchema = withRules(
  z.string().min(1).max(MAX_TRACESTATE_LENGTH),
  { description: `The producer's W3C tracestate, sent unchanged with every attempt: key=value entries joined by commas, at most ${MAX_TRACESTATE_MEMBERS}, keys unique, at most ${MAX_TRACESTATE_LENGTH} characters.` },
  [
    {
      rule: `self.matches(r'${TRACESTATE_PATTERN}')`,
      message:
        "must be a W3C tracestate: key=value entries joined by commas without spaces; keys start with a lowercase letter or digit and hold a-z 0-9 _ - * / @; values are printable ASCII except , and = and do not end in a space",
      check: (v) => TRACESTATE_RE.test(v),
    },
    {
      rule: `self.split(',').size() <= ${MAX_TRACESTATE_MEMBERS}`,
      message: `must have at most ${MAX_TRACESTATE_MEMBERS} entries (W3C)`,
      check: (v) => v.split(",").length <= MAX_TRACESTATE_MEMBERS,
    },
    {
      rule: `self.split(',').all(m, !m.contains('=') || (m.indexOf('=') <= ${MAX_TRACESTATE_KEY_LENGTH} && m.size() - m.indexOf('=') - 1 <= ${MAX_TRACESTATE_VALUE_LENGTH}))`,
      message: `keys and values must be at most ${MAX_TRACESTATE_KEY_LENGTH} characters each (W3C)`,
      check: (v) => v.split(",").every((m) => !m.includes("=") || (m.indexOf("=") <= MAX_TRACESTATE_KEY_LENGTH && m.length - m.indexOf("=") - 1 <= MAX_TRACESTATE_VALUE_LENGTH)),
    },
    {
      // Values hold no "," or "=", so ",key=" only ever starts an entry: counting its pieces counts the key.
      rule: `self.split(',').all(m, !m.contains('=') || (',' + self).split(',' + m.substring(0, m.indexOf('=')) + '=').size() == 2)`,
      message: "must not repeat a key (W3C: one entry per key)",
      check: (v) => {
        const keys = v.split(",").map(memberKey);
        return new Set(keys).size === keys.length;
      },
    },
  ],
);

export const traceContextSchema = withRules(
  z.object({ traceparent: traceparentSchema, tracestate: tracestateSchema.optional() }),
  {
    description:
      "The producer's W3C trace context (https://www.w3.org/TR/trace-context/), captured by the publish doors from the traceparent and tracestate it sent. Immutable. Attempts and replays are traced in this trace.",
  },
  [{ rule: "self == oldSelf", message: "traceContext is immutable: create a new WebhookDelivery instead" }],
);
