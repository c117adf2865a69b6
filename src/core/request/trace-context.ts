// A producer's W3C trace context (https://www.w3.org/TR/trace-context/), read strictly and
// brought to the stored form of src/api/trace-context.ts. Pure; every door (library, CLI, HTTP,
// stream messages) goes through normalizeTraceContext, so they accept and store the same.
//
// Strict: upper-case hex, version ff, reserved flag bits, all-zero ids, non-ASCII, a malformed
// tracestate entry, more than 32 entries or a repeated key are refused with a message naming
// the field. What W3C lets a participant change, and only that, is changed:
// - a higher traceparent version is downgraded to 00 (its ids and sampled flag kept),
// - spaces and tabs around tracestate entries and empty entries are dropped,
// - a tracestate longer than 512 characters is truncated by whole entries, those longer than
//   128 characters first, then from the end (the W3C's order).
import { MAX_TRACESTATE_KEY_LENGTH, MAX_TRACESTATE_LENGTH, MAX_TRACESTATE_MEMBERS, MAX_TRACESTATE_VALUE_LENGTH, TRACESTATE_KEY, TRACESTATE_VALUE, type TraceContext } from "../../api/trace-context.js";

export type { TraceContext } from "../../api/trace-context.js";

export type TraceContextCheck = { ok: true; value: TraceContext } | { ok: false; field: "traceparent" | "tracestate"; message: string };

/** No input longer than this is read: spaces aside, the longest valid tracestate is 16 447 characters. */
export const MAX_TRACESTATE_INPUT_LENGTH = 32 * 1024;
/** W3C: entries longer than this are the first to go when a tracestate is truncated. */
const LONG_ENTRY = 128;
const FLAG_SAMPLED = 0x01;
const FLAG_RANDOM = 0x02;

const PARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const MEMBER = new RegExp(`^(${TRACESTATE_KEY})=(${TRACESTATE_VALUE})$`);
/** Space and horizontal tab: HTTP's optional whitespace around tracestate entries. */
const OWS = /^[ \t]+|[ \t]+$/g;

const EXAMPLE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/** A parsed version-00 traceparent. */
export interface Traceparent {
  traceId: string;
  parentId: string;
  /** The trace-flags byte. */
  flags: number;
}

type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

function describe(value: string): string {
  return JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}...` : value);
}

/** Reads a traceparent as W3C asks, strictly; a higher version is read as version 00. */
export function parseTraceparent(value: string): Parsed<Traceparent> {
  const bad = (why: string): Parsed<Traceparent> => ({ ok: false, message: `traceparent ${describe(value)} is not a W3C traceparent: ${why} (e.g. ${EXAMPLE})` });
  if (typeof value !== "string") return bad("it must be a string");
  const m = PARENT.exec(value);
  if (!m) {
    if (/[A-F]/.test(value) && PARENT.test(value.toLowerCase())) return bad("hex digits must be lowercase");
    return bad("the form is 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>");
  }
  const [, version, traceId, parentId, flagsHex, rest] = m as unknown as [string, string, string, string, string, string | undefined];
  if (version === "ff") return bad("version ff is forbidden");
  if (version === "00" && rest !== undefined) return bad("version 00 has exactly four fields (55 characters)");
  if (/^0+$/.test(traceId)) return bad("the trace id is all zeros");
  if (/^0+$/.test(parentId)) return bad("the parent id is all zeros");
  let flags = parseInt(flagsHex, 16);
  if (version === "00") {
    if (flags & ~(FLAG_SAMPLED | FLAG_RANDOM)) return bad(`flags ${flagsHex} set reserved bits (only 01 sampled and 02 random are defined; the others must be 0)`);
  } else {
    // A later version's other flags mean nothing to version 00: only the sampled bit is kept.
    flags &= FLAG_SAMPLED;
  }
  return { ok: true, value: { traceId, parentId, flags } };
}

export function formatTraceparent(p: Traceparent): string {
  return `00-${p.traceId}-${p.parentId}-${p.flags.toString(16).padStart(2, "0")}`;
}

/** Whether an entry's characters are what a tracestate may hold at all (for a clearer message). */
const PRINTABLE = /^[\x20-\x7e\t]*$/;

/**
 * Reads a tracestate (several header fields already joined by ","), strictly, into its entries
 * without optional whitespace and empty entries. Empty or only whitespace: no entries.
 */
export function parseTracestate(value: string): Parsed<string[]> {
  const bad = (why: string): Parsed<string[]> => ({ ok: false, message: `tracestate is not a W3C tracestate: ${why}` });
  if (typeof value !== "string") return bad("it must be a string");
  if (value.length > MAX_TRACESTATE_INPUT_LENGTH) return bad(`it is ${value.length} characters, longer than any valid one (${MAX_TRACESTATE_INPUT_LENGTH} at most are read)`);
  if (!PRINTABLE.test(value)) return bad("it holds a character that is not printable ASCII (control characters, line breaks and non-ASCII are not allowed)");
  const listMembers = value.split(",");
  if (listMembers.length > MAX_TRACESTATE_MEMBERS) return bad(`it has ${listMembers.length} entries; at most ${MAX_TRACESTATE_MEMBERS} are allowed`);
  const entries: string[] = [];
  const keys = new Set<string>();
  for (const [i, raw] of listMembers.entries()) {
    const entry = raw.replace(OWS, "");
    if (entry === "") continue;
    const m = MEMBER.exec(entry);
    const at = `entry ${i + 1} ${describe(entry)}`;
    if (!m) {
      if (!entry.includes("=")) return bad(`${at} is not key=value`);
      const key = entry.slice(0, entry.indexOf("="));
      if (!new RegExp(`^${TRACESTATE_KEY}$`).test(key)) return bad(`${at}: a key starts with a lowercase letter or digit and holds only a-z, 0-9, _, -, *, / and @`);
      return bad(`${at}: a value is 1 to 256 printable ASCII characters other than "," and "=", not ending in a space`);
    }
    const [, key, val] = m as unknown as [string, string, string];
    if (key.length > MAX_TRACESTATE_KEY_LENGTH) return bad(`${at}: the key is ${key.length} characters; at most ${MAX_TRACESTATE_KEY_LENGTH}`);
    if (val.length > MAX_TRACESTATE_VALUE_LENGTH) return bad(`${at}: the value is ${val.length} characters; at most ${MAX_TRACESTATE_VALUE_LENGTH}`);
    if (keys.has(key)) return bad(`the key ${JSON.stringify(key)} appears twice (one entry per key)`);
    keys.add(key);
    entries.push(entry);
  }
  return { ok: true, value: entries };
}

/**
 * Whole entries kept so that, joined by ",", they fit in `max` characters: entries longer than
 * 128 characters are removed first (the last first), then entries from the end.
 */
export function truncateTracestate(entries: readonly string[], max = MAX_TRACESTATE_LENGTH): string[] {
  const kept = [...entries];
  const length = () => kept.reduce((n, e) => n + e.length, 0) + Math.max(0, kept.length - 1);
  for (let i = kept.length - 1; i >= 0 && length() > max; i--) if (kept[i]!.length > LONG_ENTRY) kept.splice(i, 1);
  while (kept.length && length() > max) kept.pop();
  return kept;
}

/**
 * A producer's trace context in the stored form (src/api/trace-context.ts), or why it cannot be
 * used, naming `traceparent` or `tracestate`. A tracestate without a traceparent is refused
 * (W3C reads tracestate only beside a valid traceparent).
 */
export function normalizeTraceContext(input: { traceparent?: string | undefined; tracestate?: string | undefined }): TraceContextCheck {
  if (input.traceparent === undefined) {
    if (input.tracestate !== undefined && input.tracestate.replace(/[ \t,]/g, "") !== "") return { ok: false, field: "tracestate", message: "tracestate needs a traceparent beside it" };
    return { ok: false, field: "traceparent", message: "traceparent is required" };
  }
  const parent = parseTraceparent(input.traceparent);
  if (!parent.ok) return { ok: false, field: "traceparent", message: parent.message };
  const out: TraceContext = { traceparent: formatTraceparent(parent.value) };
  if (input.tracestate !== undefined) {
    const state = parseTracestate(input.tracestate);
    if (!state.ok) return { ok: false, field: "tracestate", message: state.message };
    const kept = truncateTracestate(state.value);
    if (kept.length) out.tracestate = kept.join(",");
  }
  return { ok: true, value: out };
}

/** The trace id of a stored traceparent (for log lines); undefined when there is none. */
export function traceIdOf(trace: TraceContext | undefined): string | undefined {
  return trace?.traceparent.slice(3, 35);
}

/**
 * The traceparent of a child: same trace, `spanId` as the parent id, the sampled flag given and
 * the parent's random flag kept (W3C level 2: it describes the trace id, which is unchanged).
 */
export function childTraceparent(parent: TraceContext | undefined, traceId: string, spanId: string, sampled: boolean): string {
  const random = parent ? parseInt(parent.traceparent.slice(53, 55), 16) & FLAG_RANDOM : 0;
  return formatTraceparent({ traceId, parentId: spanId, flags: random | (sampled ? FLAG_SAMPLED : 0) });
}
