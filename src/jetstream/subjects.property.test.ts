// For every event type T and eventTypes entry P the CRD accepts, JetStream's matching of T's
// subject against P's filter (NATS's rules, subjectMatches) gives what Hookline's own rule
// (matchesEventType) gives; subjects are valid and distinct types never share one.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { deliverySpecSchema } from "../api/delivery.js";
import { EVENT_TYPE_PATTERN } from "../api/subscription.js";
import { matchesEventType } from "../core/attempt/policy.js";
import { eventSubject, filterSubjects, isValidSubject, parseEventSubject, subjectMatches } from "./subjects.js";

const isType = (t: string) => deliverySpecSchema.shape.eventType.safeParse(t).success;
const PATTERN = new RegExp(EVENT_TYPE_PATTERN);
const isPattern = (p: string) => p.length >= 1 && p.length <= 256 && PATTERN.test(p);

// Tokens biased towards the hard cases: empty, "_"-led, and the other legal characters.
const token = fc.oneof(fc.constantFrom("", "", "_", "__", "_a", "a_", "a", "b", "ab", ":", "/", "-", "A", "0"), fc.stringMatching(/^[A-Za-z0-9_:/-]{1,4}$/));
const first = fc.oneof(fc.constantFrom("a", "b", "A", "0"), fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_:/-]{0,3}$/));
const eventType = fc
  .tuple(first, fc.array(token, { maxLength: 6 }))
  .map(([f, rest]) => [f, ...rest].join("."))
  .filter(isType);
// Also any string of the CRD's alphabet, not built from tokens.
const anyType = fc.oneof(eventType, fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,20}$/).filter(isType));

/** "*", an exact type, or a prefix with ".*": often a prefix of `t` itself, so matches happen. */
const patternFor = (t: string) =>
  fc.oneof(
    fc.constant("*"),
    fc.constant(t),
    anyType,
    anyType.map((x) => `${x}.*`),
    fc.nat({ max: t.length }).map((n) => `${t.slice(0, Math.max(1, n))}.*`),
    fc.nat({ max: t.length }).map((n) => t.slice(0, Math.max(1, n))),
  ).filter(isPattern);

const namespace = fc.constantFrom("shop", "a", "team-1", "x".repeat(63));

describe("subjects and filters (property)", () => {
  it("matchesEventType([P], T) equals NATS matching of subject(T) against filter(P)", () => {
    fc.assert(
      fc.property(
        namespace,
        anyType.chain((t) => fc.tuple(fc.constant(t), patternFor(t))),
        (ns, [t, p]) => {
          const subject = eventSubject(ns, t);
          const filters = filterSubjects(ns, [p]);
          expect(filters).toHaveLength(1);
          expect(subjectMatches(filters[0]!, subject)).toBe(matchesEventType([p], t));
        },
      ),
      { numRuns: 5000 },
    );
  });

  it("a whole eventTypes list gives non-overlapping filters that match exactly what matchesEventType matches", () => {
    fc.assert(
      fc.property(
        namespace,
        anyType.chain((t) => fc.tuple(fc.constant(t), fc.array(patternFor(t), { maxLength: 6 }), fc.array(anyType, { maxLength: 4 }))),
        (ns, [t, patterns, others]) => {
          const filters = filterSubjects(ns, patterns);
          for (const probe of [t, ...others]) {
            const subject = eventSubject(ns, probe);
            const hits = filters.filter((f) => subjectMatches(f, subject)).length;
            expect(hits > 0).toBe(matchesEventType(patterns, probe));
            // JetStream refuses filters that overlap: no subject may match two of them.
            expect(hits).toBeLessThanOrEqual(1);
          }
          for (const f of filters) expect(isValidSubject(f, true)).toBe(true);
        },
      ),
      { numRuns: 3000 },
    );
  });

  it("every type has a valid subject, the same on every call, that reads back as the type", () => {
    fc.assert(
      fc.property(namespace, anyType, (ns, t) => {
        const s = eventSubject(ns, t);
        expect(isValidSubject(s)).toBe(true);
        expect(eventSubject(ns, t)).toBe(s);
        expect(parseEventSubject(s)).toEqual({ namespace: ns, type: t });
      }),
      { numRuns: 3000 },
    );
  });

  it("two different types never share a subject (injective)", () => {
    fc.assert(
      fc.property(anyType, anyType, (a, b) => {
        fc.pre(a !== b);
        expect(eventSubject("shop", a)).not.toBe(eventSubject("shop", b));
      }),
      { numRuns: 5000 },
    );
  });

  it("another namespace's subjects never match a filter", () => {
    fc.assert(
      fc.property(anyType.chain((t) => fc.tuple(fc.constant(t), patternFor(t))), ([t, p]) => {
        for (const f of filterSubjects("shop", [p])) expect(subjectMatches(f, eventSubject("shop-2", t))).toBe(false);
      }),
    );
  });
});
