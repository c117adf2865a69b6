// Finds one member of a JSON text by its path of object keys, without parsing the text, and cuts
// it out: the text without it, and the member's value as its own bytes. A watch event's large
// field (a delivery's payload) then need not be parsed when what the cache needs of it is known
// already. Works on UTF-8 bytes: every byte that matters here (quotes, backslashes, brackets,
// commas, colons) is ASCII and never part of a multi-byte character. The value is read once; of
// the objects around it, only what comes before it. Anything it is not sure of (the path does not
// lead to a member, a key written with an escape before the one it looks for, the last key twice
// in its object) is "not found", and the caller parses the whole text as before. A key on the
// path before the last is taken where it first occurs: the API server writes each key once.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

const isSpace = (b: number | undefined): boolean => b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;

function skipSpace(buf: Buffer, i: number): number {
  while (i < buf.length && isSpace(buf[i])) i++;
  return i;
}

/** The index just past the string whose opening quote is at `i`; -1 if it never ends. */
function skipString(buf: Buffer, i: number): number {
  let from = i + 1;
  for (;;) {
    const q = buf.indexOf(QUOTE, from);
    if (q < 0) return -1;
    let slashes = 0;
    for (let k = q - 1; buf[k] === BACKSLASH; k--) slashes++;
    if (slashes % 2 === 0) return q + 1;
    from = q + 1;
  }
}

/** The index just past the value that starts at `i`; -1 if it does not end in `buf`. */
function skipValue(buf: Buffer, i: number): number {
  const first = buf[i];
  if (first === QUOTE) return skipString(buf, i);
  if (first === OPEN_OBJECT || first === OPEN_ARRAY) {
    let depth = 0;
    for (let j = i; j < buf.length; ) {
      const c = buf[j]!;
      if (c === QUOTE) {
        j = skipString(buf, j);
        if (j < 0) return -1;
        continue;
      }
      if (c === OPEN_OBJECT || c === OPEN_ARRAY) depth++;
      else if ((c === CLOSE_OBJECT || c === CLOSE_ARRAY) && --depth === 0) return j + 1;
      j++;
    }
    return -1;
  }
  // A number, true, false or null: up to the next delimiter.
  let j = i;
  while (j < buf.length && buf[j] !== COMMA && buf[j] !== CLOSE_OBJECT && buf[j] !== CLOSE_ARRAY && !isSpace(buf[j])) j++;
  return j > i ? j : -1;
}

interface Member {
  keyStart: number;
  valueStart: number;
  valueEnd: number;
}

/**
 * The member `key` of the object whose `{` is at `i`, if no key before it has an escape. `last`:
 * the object must have it exactly once (its other members are read to the end); else the first
 * is taken and nothing after it is read.
 */
function findMember(buf: Buffer, i: number, key: Buffer, last: boolean): Member | undefined {
  let found: Member | undefined;
  let j = skipSpace(buf, i + 1);
  if (buf[j] === CLOSE_OBJECT) return undefined;
  for (;;) {
    if (buf[j] !== QUOTE) return undefined;
    const keyStart = j;
    const keyEnd = skipString(buf, j);
    if (keyEnd < 0) return undefined;
    // `"sp\u0065c"` is "spec" too: a key with an escape could be the one asked for.
    for (let k = keyStart + 1; k < keyEnd - 1; k++) if (buf[k] === BACKSLASH) return undefined;
    j = skipSpace(buf, keyEnd);
    if (buf[j] !== COLON) return undefined;
    const valueStart = skipSpace(buf, j + 1);
    const matches = keyEnd - keyStart - 2 === key.length && buf.compare(key, 0, key.length, keyStart + 1, keyEnd - 1) === 0;
    if (matches && !last) return { keyStart, valueStart, valueEnd: -1 };
    const valueEnd = skipValue(buf, valueStart);
    if (valueEnd < 0) return undefined;
    if (matches) {
      if (found) return undefined; // JSON.parse keeps the last of two: not ours to guess.
      found = { keyStart, valueStart, valueEnd };
    }
    j = skipSpace(buf, valueEnd);
    if (buf[j] === COMMA) {
      j = skipSpace(buf, j + 1);
      continue;
    }
    return buf[j] === CLOSE_OBJECT ? found : undefined;
  }
}

/**
 * The JSON text `text` without the member at `path` (object keys from the top), and that
 * member's value; undefined when there is no such member (or it is not sure, above). For valid
 * JSON, `JSON.parse(rest)` is the parsed text without the member, and `JSON.parse(value)` the
 * member's value.
 */
export function cutMember(text: Buffer, path: readonly Buffer[]): { rest: Buffer; value: Buffer } | undefined {
  let at = skipSpace(text, 0);
  let member: Member | undefined;
  for (const [n, key] of path.entries()) {
    if (text[at] !== OPEN_OBJECT) return undefined;
    member = findMember(text, at, key, n === path.length - 1);
    if (!member) return undefined;
    at = member.valueStart;
  }
  if (!member) return undefined;
  // Cut the comma before it, or else the one after it, so that the rest stays valid JSON.
  let from = member.keyStart;
  let to = member.valueEnd;
  let before = from - 1;
  while (isSpace(text[before])) before--;
  if (text[before] === COMMA) from = before;
  else {
    const after = skipSpace(text, to);
    if (text[after] === COMMA) to = after + 1;
  }
  return { rest: Buffer.concat([text.subarray(0, from), text.subarray(to)]), value: text.subarray(member.valueStart, member.valueEnd) };
}

/** A path for cutMember, as the UTF-8 bytes of its keys. */
export const memberPath = (...keys: string[]): Buffer[] => keys.map((k) => Buffer.from(k, "utf8"));
