// Building blocks for the API schemas. Each rule is declared once and used twice: as a CEL
// `x-kubernetes-validations` entry in the generated CRD (the API server refuses bad specs) and
// as a zod refinement (the operator refuses what an older CRD let through).
import { z } from "zod";
import { DURATION_PATTERN, formatDuration, parseDuration } from "./duration.js";

export interface Rule<T> {
  /** CEL expression, evaluated by the API server with `self` (and `oldSelf` for transition rules). */
  rule: string;
  message: string;
  /**
   * CEL giving a message that names the offending part (the API server uses `message` if it
   * fails); `describe` is the same in TypeScript, for the zod refinement.
   */
  messageExpression?: string;
  describe?: (value: T) => string;
  /** JSONPath-like path of the field the message is about, relative to the schema, e.g. `.maxBackoff`. */
  fieldPath?: string;
  /** The same rule in TypeScript; omitted for transition rules (they need the old object). */
  check?: (value: T) => boolean;
}

interface Doc {
  description: string;
  [extension: string]: unknown;
}

/** Attaches a description and CEL rules to a schema; the rules with `check` also refine it. */
export function withRules<S extends z.ZodType>(schema: S, doc: Doc, rules: Rule<z.output<S>>[] = []): S {
  const refined =
    rules.some((r) => r.check) ?
      schema.superRefine((value, ctx) => {
        for (const r of rules) {
          if (r.check && !r.check(value)) {
            const path = r.fieldPath ? r.fieldPath.replace(/^\./, "").split(".") : [];
            ctx.addIssue({ code: "custom", message: r.describe?.(value) ?? r.message, path });
          }
        }
      })
    : schema;
  const validations = rules.map(({ rule, message, messageExpression, fieldPath }) => ({ rule, message, ...(messageExpression ? { messageExpression } : {}), ...(fieldPath ? { fieldPath } : {}) }));
  return refined.meta({ ...doc, ...(validations.length ? { "x-kubernetes-validations": validations } : {}) });
}

/** An integer with inclusive bounds. */
export function int(min: number, max: number, description: string) {
  return z.int().min(min).max(max).meta({ description });
}

/** A Kubernetes-style duration string (`250ms`, `10s`, `1h30m`) with an inclusive range. */
export function duration(min: string, max: string, description: string) {
  const lo = parseDuration(min);
  const hi = parseDuration(max);
  // A malformed value is the pattern's to refuse (one clear message); the range rule judges
  // only well-formed ones, so "10 seconds" does not also report a CEL type conversion error.
  const inRange = (v: string) => {
    const ms = safeDuration(v);
    return ms === undefined || (ms >= lo && ms <= hi);
  };
  return withRules(
    z
      .string()
      .max(DURATION_MAX_LENGTH)
      .regex(new RegExp(DURATION_PATTERN), { message: "must be a duration such as 250ms, 10s or 1h30m" }),
    { description: `${description} A duration such as 250ms, 10s or 1h30m, from ${min} to ${max}.`, pattern: DURATION_PATTERN },
    [
      {
        rule: `!${celIsDuration("self")} || (duration(self) >= duration('${min}') && duration(self) <= duration('${max}'))`,
        message: `must be between ${formatDuration(lo)} and ${formatDuration(hi)}`,
        check: inRange,
      },
    ],
  );
}

/** Longest duration string accepted (bounds the cost of the CEL rules that match it). */
export const DURATION_MAX_LENGTH = 64;

/**
 * CEL: `expr` (a string) is a well-formed duration. Rules guard `duration(expr)` with it: CEL's
 * duration() is Go's, which parses what the pattern refuses ("-1s", "1us") and fails with a type
 * conversion error on the rest.
 */
export function celIsDuration(expr: string): string {
  return `${expr}.matches(r'${DURATION_PATTERN}')`;
}

export function safeDuration(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  try {
    return parseDuration(value);
  } catch {
    return undefined;
  }
}

/** An RFC 3339 timestamp written by the operator. */
export function timestamp(description: string) {
  return z.string().meta({ description, format: "date-time" });
}

/** A Kubernetes object name (RFC 1123 subdomain). */
export function objectName(description: string) {
  return z
    .string()
    .min(1)
    .max(253)
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, {
      message: "must be a lowercase RFC 1123 name",
    })
    .meta({ description });
}

/** The Kubernetes condition shape (metav1.Condition). */
export const conditionSchema = z
  .object({
    type: z.string().max(316).meta({ description: "Type of condition, e.g. Ready or Succeeded." }),
    status: z.enum(["True", "False", "Unknown"]).meta({ description: "True, False or Unknown." }),
    reason: z.string().max(1024).meta({ description: "A CamelCase word saying why." }),
    message: z.string().max(32768).optional().meta({ description: "Human-readable details." }),
    lastTransitionTime: timestamp("When the status last changed."),
    observedGeneration: z.int().min(0).optional().meta({ description: "The .metadata.generation the condition was set for." }),
  })
  .meta({ description: "A condition in the Kubernetes shape." });
export type Condition = z.infer<typeof conditionSchema>;

export function conditions(description: string) {
  return z
    .array(conditionSchema)
    .max(16)
    .meta({ description, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"] });
}
