// Stream mode's subjects: an event of type T in namespace NS is published on
// `hookline.<NS>.<T>`, and a subscription's eventTypes become the filter subjects of its
// consumer, so JetStream does the fan-out with exactly Hookline's matching rule
// (matchesEventType in core/attempt/policy.ts). Pure.
//
// NATS splits a subject into tokens on "." and refuses empty tokens. The CRD's event types
// ([A-Za-z0-9][A-Za-z0-9_.:/-]*) may hold some: `order..paid`, and a trailing dot, `order.`;
// none of their other characters is special to NATS (no space, `*`, `>` or leading `$`).
// So each token of a type is encoded on its own, the same way on the publish and the filter side:
//
//   ""        -> "_"          an empty token
//   "_rest"   -> "__rest"     a token starting with "_" gets one more (so "_" itself is "__")
//   anything  -> itself       every other token, unchanged (the usual case: readable subjects)
//
// Decoding reads it back ("_" alone is the empty token, a leading "_" is dropped otherwise), so
// the encoding is injective; it maps token to token, so `order.*` (every type starting with
// `order.`) is the filter `hookline.<NS>.order.>` (one or more tokens after `order`), also for a
// prefix with empty tokens (`a..*` -> `hookline.<NS>.a._.>`). Encoded subjects use only the
// characters of event types.
import { deliverySpecSchema } from "../api/delivery.js";
import { EVENT_TYPE_PATTERN } from "../api/subscription.js";

/** The first token of every Hookline subject. */
export const SUBJECT_ROOT = "hookline";
/** The stream's subjects: every Hookline event in every namespace. */
export const ALL_SUBJECTS = `${SUBJECT_ROOT}.>`;

const NAMESPACE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const PATTERN = new RegExp(EVENT_TYPE_PATTERN);
const MAX_TYPE_LENGTH = 256;

/** A namespace, type or eventTypes entry that has no subject; `field` names the input. */
export class SubjectError extends Error {
  override readonly name = "SubjectError";
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

function checkNamespace(namespace: string): void {
  if (namespace.length > 63 || !NAMESPACE.test(namespace)) throw new SubjectError("namespace", `namespace ${JSON.stringify(namespace)} is not a namespace name (lowercase RFC 1123 label)`);
}

export function encodeToken(token: string): string {
  return token === "" || token.startsWith("_") ? `_${token}` : token;
}

export function decodeToken(token: string): string {
  return token.startsWith("_") ? token.slice(1) : token;
}

const encodeTokens = (text: string): string => text.split(".").map(encodeToken).join(".");

/** The subject of an event: `hookline.<namespace>.<encoded type>`. Throws SubjectError naming the field. */
export function eventSubject(namespace: string, type: string): string {
  checkNamespace(namespace);
  if (!deliverySpecSchema.shape.eventType.safeParse(type).success) throw new SubjectError("type", `type ${JSON.stringify(type)} is not an event type (a dotted name such as order.paid, at most ${MAX_TYPE_LENGTH} characters)`);
  return `${SUBJECT_ROOT}.${namespace}.${encodeTokens(type)}`;
}

/** The namespace and event type of a Hookline subject; undefined for any other subject. */
export function parseEventSubject(subject: string): { namespace: string; type: string } | undefined {
  const tokens = subject.split(".");
  if (tokens.length < 3 || tokens[0] !== SUBJECT_ROOT) return undefined;
  const namespace = tokens[1]!;
  if (!NAMESPACE.test(namespace) || namespace.length > 63) return undefined;
  // Only what eventSubject produces: no empty token, and a leading "_" only as "_" or "__...".
  if (tokens.slice(2).some((t) => t === "" || (t.startsWith("_") && t !== "_" && !t.startsWith("__")))) return undefined;
  const type = tokens.slice(2).map(decodeToken).join(".");
  if (!deliverySpecSchema.shape.eventType.safeParse(type).success) return undefined;
  return { namespace, type };
}

/** Every event of a namespace. */
export const namespaceFilter = (namespace: string): string => {
  checkNamespace(namespace);
  return `${SUBJECT_ROOT}.${namespace}.>`;
};

/** The filter subject of one eventTypes entry: "*" every type, "X.*" every type starting with "X.", else exactly the type. */
function patternFilter(namespace: string, pattern: string, field: string): string {
  if (pattern.length === 0 || pattern.length > MAX_TYPE_LENGTH || !PATTERN.test(pattern)) {
    throw new SubjectError(field, `${field} ${JSON.stringify(pattern)} is not an event type pattern ("*", an exact type such as order.paid, or a prefix such as order.*)`);
  }
  if (pattern === "*") return `${SUBJECT_ROOT}.${namespace}.>`;
  if (pattern.endsWith(".*")) return `${SUBJECT_ROOT}.${namespace}.${encodeTokens(pattern.slice(0, -2))}.>`;
  return `${SUBJECT_ROOT}.${namespace}.${encodeTokens(pattern)}`;
}

/** Whether every subject `narrow` matches is matched by `wide` too (both literal or ending in ">"). */
export function covers(wide: string, narrow: string): boolean {
  if (wide === narrow) return true;
  if (!wide.endsWith(".>")) return false;
  // `p.>` covers `p.q` and `p.q.>`: narrow starts with the prefix and has a token after it.
  const prefix = wide.slice(0, -1);
  return narrow.startsWith(prefix) && narrow.length > prefix.length;
}

/**
 * The filter subjects of a consumer for a subscription's eventTypes in `namespace`: omitted,
 * empty or "*" is every type of the namespace. JetStream refuses overlapping filters, so a
 * filter covered by another is left out (`order.*` covers `order.paid`); sorted, so the same
 * eventTypes always give the same list. Throws SubjectError naming the entry (`eventTypes[2]`).
 */
export function filterSubjects(namespace: string, eventTypes: readonly string[] | undefined): string[] {
  checkNamespace(namespace);
  if (!eventTypes || eventTypes.length === 0) return [namespaceFilter(namespace)];
  return withoutCovered(eventTypes.map((p, i) => patternFilter(namespace, p, `eventTypes[${i}]`)));
}

/** The filters (Hookline's: literal or ending in ">") less those another covers, without duplicates, sorted. */
export function withoutCovered(filters: readonly string[]): string[] {
  const unique = [...new Set(filters)];
  return unique.filter((f) => !unique.some((other) => other !== f && covers(other, f))).sort();
}

// ---------------------------------------------------------------------------------------------
// NATS subject rules, from the NATS documentation ("Subject-Based Messaging"): a subject is
// tokens separated by "."; no token is empty or holds whitespace; in a filter `*` is a whole
// token matching exactly one token, and `>` is a whole last token matching one or more tokens.

const WHITESPACE = /[\s]/;

/** Whether `subject` is a valid NATS subject (with `wildcards`, a valid filter). */
export function isValidSubject(subject: string, wildcards = false): boolean {
  if (subject === "" || WHITESPACE.test(subject)) return false;
  const tokens = subject.split(".");
  return tokens.every((t, i) => {
    if (t === "") return false;
    if (t === ">") return wildcards && i === tokens.length - 1;
    if (t === "*") return wildcards;
    return !t.includes("*") && !t.includes(">");
  });
}

/** Whether the literal `subject` matches the filter `filter`, by the rules above. */
export function subjectMatches(filter: string, subject: string): boolean {
  const f = filter.split(".");
  const s = subject.split(".");
  for (let i = 0; i < f.length; i++) {
    const token = f[i]!;
    if (token === ">") return i === f.length - 1 && s.length > i;
    if (i >= s.length) return false;
    if (token !== "*" && token !== s[i]) return false;
  }
  return f.length === s.length;
}
