// spec.filter: a CEL expression over the event that decides whether a subscription gets it
// (docs/filters.md, ADR 0015). Compiled once per subscription spec, evaluated at fan-out in
// both modes, with @bufbuild/cel (conformance-tested; `matches` is RE2, linear in its input,
// so no pattern can backtrack for ever).
//
// Bounds. The CRD caps the text (FILTER_MAX_LENGTH); compiling refuses more than FILTER_MAX_NODES
// nodes, nesting deeper than FILTER_MAX_DEPTH and comprehensions (all, exists, map, filter...)
// nested more than FILTER_MAX_COMPREHENSIONS deep, naming the position. CEL has no loops but
// the comprehensions, so an evaluation's cost is bounded by the expression and the event's
// data: before each evaluation, filterCost() works it out from the data's shape (its longest
// list or map, its longest string), and an event over FILTER_COST_BUDGET is not evaluated: it
// fails for this subscription alone, never stalls the others.
import { celEnv, isCelError, parse, plan } from "@bufbuild/cel";
import { FILTER_MAX_LENGTH } from "../api/names.js";

/** The longest filter the CRD accepts (characters). */
export { FILTER_MAX_LENGTH };
/** Nodes of the parsed expression (macros expanded). */
export const FILTER_MAX_NODES = 1000;
/** Nesting of the parsed expression. */
export const FILTER_MAX_DEPTH = 64;
/** Comprehensions inside comprehensions: two (a list of lists) is the most a filter needs. */
export const FILTER_MAX_COMPREHENSIONS = 2;
/** Cost units one evaluation may use: about a few milliseconds of CPU. */
export const FILTER_COST_BUDGET = 1_000_000;
/** A string function's cost per this many characters of the longest string in the data. */
const CHARS_PER_UNIT = 64;

/** The names a filter may use: the event's data, and the event (id, type, namespace, data). */
export const FILTER_VARIABLES = ["data", "event"] as const;

/** The event as a filter sees it. */
export interface FilterEvent {
  id: string;
  type: string;
  namespace: string;
  data: unknown;
}

/** What decides an evaluation's cost: the data's longest list or map and its longest string. */
export interface DataShape {
  maxElements: number;
  maxString: number;
}

/** What the metric counts: matched, filtered, error (on this event), invalid (does not compile). */
export type FilterOutcome = "matched" | "filtered" | "error" | "invalid";

export type FilterResult = { kind: "matched" } | { kind: "filtered" } | { kind: "error"; reason: "evaluation" | "cost" | "type"; message: string };

export interface CompiledFilter {
  readonly source: string;
  /** The cost of an evaluation on data of this shape (filterCost). */
  cost(shape: DataShape): number;
  run(event: FilterEvent, shape?: DataShape): FilterResult;
}

type ParsedExpr = ReturnType<typeof parse>;
type Expr = NonNullable<ParsedExpr["expr"]>;

/** Functions whose work grows with a string's length (and `+`, which may join strings or lists). */
const STRING_COST = new Set(["matches", "contains", "startsWith", "endsWith", "size", "_+_", "_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "@in"]);

const ENV = celEnv();

/**
 * Compiles `source`; a problem is a message naming the position (line:column) and what to
 * change. A compiled filter never throws.
 */
export function compileFilter(source: string): { ok: true; filter: CompiledFilter } | { ok: false; message: string } {
  const c = compileCel(source, "remove spec.filter to deliver every event of eventTypes");
  if (!c.ok) return c;
  const filter: CompiledFilter = {
    source,
    cost: (shape) => c.cost(shape),
    run(event, shape) {
      const out = c.run(event, shape, "filter");
      if (out.kind === "error") return out;
      if (typeof out.value !== "boolean") return { kind: "error", reason: "type", message: `the filter gave ${describe(out.value)}, not true or false` };
      return out.value ? { kind: "matched" } : { kind: "filtered" };
    },
  };
  return { ok: true, filter };
}

/** A CEL expression over an event, compiled with the bounds above; shared by spec.filter and spec.transform. */
export interface CompiledCel {
  cost(shape: DataShape): number;
  /** Evaluates within the cost budget; the value as @bufbuild/cel gives it. Never throws. */
  run(event: FilterEvent, shape: DataShape | undefined, what: string): { kind: "value"; value: unknown } | { kind: "error"; reason: "evaluation" | "cost"; message: string };
}

/** Parses, checks the bounds and plans `source`; `emptyHint` says what to do with an empty one. */
export function compileCel(source: string, emptyHint: string): ({ ok: true } & CompiledCel) | { ok: false; message: string } {
  if (source.length > FILTER_MAX_LENGTH) return { ok: false, message: `is ${source.length} characters long; at most ${FILTER_MAX_LENGTH}` };
  if (source.trim() === "") return { ok: false, message: `is empty: ${emptyHint}` };
  let parsed: ParsedExpr;
  try {
    parsed = parse(source);
  } catch (err) {
    return { ok: false, message: `does not parse: ${oneLine((err as Error).message).replace(/^<input>:/, "at ")}` };
  }
  const expr = parsed.expr;
  if (!expr) return { ok: false, message: "does not parse: no expression" };
  const where = (e: Expr) => position(source, parsed.sourceInfo?.positions[String(e.id)] ?? 0);
  const problem = structureProblem(expr, where);
  if (problem) return { ok: false, message: problem };
  let evaluate: ReturnType<typeof plan>;
  try {
    evaluate = plan(ENV, parsed);
  } catch (err) {
    return { ok: false, message: `cannot be planned: ${oneLine((err as Error).message)}` };
  }
  return {
    ok: true,
    cost: (shape) => cost(expr, shape, 0),
    run(event, shape, what) {
      const s = shape ?? dataShape(event.data);
      const c = cost(expr, s, 0);
      if (c > FILTER_COST_BUDGET) {
        return { kind: "error", reason: "cost", message: `the ${what}'s cost on this event's data (${Math.round(c)} units; its longest list ${s.maxElements} items, its longest string ${s.maxString} characters) is over the budget of ${FILTER_COST_BUDGET}` };
      }
      let out: unknown;
      try {
        out = evaluate({ data: event.data as never, event: { id: event.id, type: event.type, namespace: event.namespace, data: event.data } as never });
      } catch (err) {
        return { kind: "error", reason: "evaluation", message: oneLine((err as Error).message) };
      }
      if (isCelError(out)) return { kind: "error", reason: "evaluation", message: oneLine(out.message) };
      return { kind: "value", value: out };
    },
  };
}

/** Too many nodes, too deep, comprehensions too deep, or a name the filter cannot see. */
function structureProblem(root: Expr, where: (e: Expr) => string): string | undefined {
  let nodes = 0;
  // Iterative: a hostile expression may nest deeper than the stack.
  const stack: Array<{ e: Expr; depth: number; comprehensions: number; scope: ReadonlySet<string> }> = [{ e: root, depth: 1, comprehensions: 0, scope: new Set(FILTER_VARIABLES) }];
  while (stack.length) {
    const { e, depth, comprehensions, scope } = stack.pop()!;
    if (++nodes > FILTER_MAX_NODES) return `has more than ${FILTER_MAX_NODES} parts (macros count expanded); split it or simplify it`;
    if (depth > FILTER_MAX_DEPTH) return `nests deeper than ${FILTER_MAX_DEPTH} at ${where(e)}`;
    const push = (c: Expr | undefined, next: Partial<{ comprehensions: number; scope: ReadonlySet<string> }> = {}) => {
      if (c) stack.push({ e: c, depth: depth + 1, comprehensions: next.comprehensions ?? comprehensions, scope: next.scope ?? scope });
    };
    const k = e.exprKind;
    switch (k.case) {
      case "identExpr":
        if (!scope.has(k.value.name)) return `uses ${JSON.stringify(k.value.name)} at ${where(e)}: a filter sees data (the event's payload) and event (event.id, event.type, event.namespace, event.data)`;
        break;
      case "selectExpr":
        push(k.value.operand);
        break;
      case "callExpr":
        push(k.value.target);
        for (const a of k.value.args) push(a);
        break;
      case "listExpr":
        for (const a of k.value.elements) push(a);
        break;
      case "structExpr":
        if (k.value.messageName) return `builds a ${k.value.messageName} message at ${where(e)}: a filter knows no message types`;
        for (const entry of k.value.entries) {
          if (entry.keyKind.case === "mapKey") push(entry.keyKind.value);
          push(entry.value);
        }
        break;
      case "comprehensionExpr": {
        const c = k.value;
        if (comprehensions + 1 > FILTER_MAX_COMPREHENSIONS) return `nests more than ${FILTER_MAX_COMPREHENSIONS} comprehensions (all, exists, exists_one, map, filter) at ${where(e)}`;
        const inner = new Set([...scope, c.iterVar, ...(c.iterVar2 ? [c.iterVar2] : []), c.accuVar]);
        push(c.iterRange);
        push(c.accuInit, { scope: new Set([...scope, c.accuVar]) });
        for (const part of [c.loopCondition, c.loopStep]) push(part, { comprehensions: comprehensions + 1, scope: inner });
        push(c.result, { scope: new Set([...scope, c.accuVar]) });
        break;
      }
      case "constExpr":
      case undefined:
        break;
    }
  }
  return undefined;
}

/**
 * What one evaluation costs at most on data of this shape: one unit a node, a comprehension's
 * loop once per element of the longest list or map, and a string function (or comparison, or
 * `+`) one unit per CHARS_PER_UNIT characters of the longest string. An upper bound: the
 * evaluation may stop early (`&&`, `exists`), never later.
 */
function cost(e: Expr | undefined, shape: DataShape, depth: number): number {
  if (!e) return 0;
  const k = e.exprKind;
  const stringUnits = 1 + Math.ceil(shape.maxString / CHARS_PER_UNIT);
  switch (k.case) {
    case "selectExpr":
      return 1 + cost(k.value.operand, shape, depth + 1);
    case "callExpr": {
      let c = 1 + cost(k.value.target, shape, depth + 1);
      for (const a of k.value.args) c += cost(a, shape, depth + 1);
      const fn = k.value.function;
      return c + (STRING_COST.has(fn) ? stringUnits : 0);
    }
    case "listExpr":
      return 1 + k.value.elements.reduce((s, a) => s + cost(a, shape, depth + 1), 0);
    case "structExpr":
      return 1 + k.value.entries.reduce((s, en) => s + cost(en.value, shape, depth + 1) + (en.keyKind.case === "mapKey" ? cost(en.keyKind.value, shape, depth + 1) : 0), 0);
    case "comprehensionExpr": {
      const c = k.value;
      const loop = cost(c.loopCondition, shape, depth + 1) + cost(c.loopStep, shape, depth + 1);
      return 1 + cost(c.iterRange, shape, depth + 1) + cost(c.accuInit, shape, depth + 1) + Math.max(1, shape.maxElements) * loop + cost(c.result, shape, depth + 1);
    }
    case "constExpr":
    case "identExpr":
    case undefined:
      return 1;
  }
}

/** The data's longest list or map (entries) and longest string (key or value), walked without recursion. */
export function dataShape(data: unknown): DataShape {
  let maxElements = 0;
  let maxString = 0;
  const stack: unknown[] = [data];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === "string") {
      if (v.length > maxString) maxString = v.length;
    } else if (Array.isArray(v)) {
      if (v.length > maxElements) maxElements = v.length;
      for (const x of v) stack.push(x);
    } else if (v !== null && typeof v === "object") {
      const keys = Object.keys(v);
      if (keys.length > maxElements) maxElements = keys.length;
      for (const key of keys) {
        if (key.length > maxString) maxString = key.length;
        stack.push((v as Record<string, unknown>)[key]);
      }
    }
  }
  return { maxElements, maxString };
}

/** line:column (1-based) of a character offset. */
function position(source: string, offset: number): string {
  const before = source.slice(0, offset);
  const line = before.split("\n").length;
  return `${line}:${offset - before.lastIndexOf("\n")}`;
}

function oneLine(text: string): string {
  const first = text.split("\n").find((l) => l.trim() !== "") ?? text;
  return first.length > 300 ? `${first.slice(0, 300)}…` : first;
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (typeof v === "bigint") return `the number ${v}`;
  if (typeof v === "string") return "a string";
  if (typeof v === "number") return `the number ${v}`;
  return `a ${typeof v}`;
}

/** Compiled expressions kept per kind (filter, transform): a spec's is compiled once, not per event. */
const COMPILED_PER_KIND = 1024;

/** `compile`, remembered by source: the most recently used COMPILED_PER_KIND sources. */
export function rememberedBySource<T>(compile: (source: string) => T): (source: string) => T {
  const kept = new Map<string, T>();
  return (source) => {
    let c = kept.get(source);
    if (c !== undefined) kept.delete(source);
    else c = compile(source);
    kept.set(source, c);
    if (kept.size > COMPILED_PER_KIND) kept.delete(kept.keys().next().value!);
    return c;
  };
}

/** compileFilter, remembered by source. */
export const cachedFilter = rememberedBySource(compileFilter);

/** A subscription's filter against one event: matched when it has none. */
export function applyFilter(source: string | undefined, event: FilterEvent, shape?: () => DataShape): FilterResult | { kind: "invalid"; message: string } {
  if (source === undefined) return { kind: "matched" };
  const c = cachedFilter(source);
  if (!c.ok) return { kind: "invalid", message: `spec.filter ${c.message}` };
  return c.filter.run(event, shape?.());
}
