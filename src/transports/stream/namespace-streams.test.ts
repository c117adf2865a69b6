// Which namespace streams the leader counts and removes: only those of the namespaces it serves,
// on streams its installation claimed, and removed only when nothing is left in them or for them.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { NamespaceStream } from "../../jetstream/jetstream.js";
import { inScope, unusedStreams } from "./namespace-streams.js";

const stream = (namespace: string, o: Partial<NamespaceStream> = {}): NamespaceStream => ({ namespace, stream: `HOOKLINE_${namespace}`, messages: 0, bytes: 0, consumers: 0, owner: "team-a", ...o });
const none = () => false;

describe("unusedStreams", () => {
  it("removes an empty stream of this installation with no consumer and no subscription", () => {
    expect(unusedStreams([stream("gone")], { namespaces: [], installation: "team-a" }, none).map((s) => s.stream)).toEqual(["HOOKLINE_gone"]);
  });

  it("keeps a stream that holds events, has a consumer, or whose namespace has a subscription", () => {
    const scope = { namespaces: [], installation: "team-a" };
    expect(unusedStreams([stream("a", { messages: 1 }), stream("b", { consumers: 1 }), stream("c")], scope, (ns) => ns === "c")).toEqual([]);
  });

  it("never another installation's stream, one nobody claimed, or one of a namespace another operator serves", () => {
    const scope = { namespaces: ["mine", "theirs", "unclaimed"], installation: "team-a" };
    const found = [stream("theirs", { owner: "team-b" }), stream("unclaimed", { owner: undefined }), stream("elsewhere"), stream("mine")];
    expect(unusedStreams(found, scope, none).map((s) => s.namespace)).toEqual(["mine"]);
  });

  it("property: whatever it removes is in scope and empty; whatever another installation claimed it never removes", () => {
    const arb = fc.record({ namespace: fc.constantFrom("a", "b", "c"), owner: fc.option(fc.constantFrom("team-a", "team-b"), { nil: undefined }), messages: fc.nat(2), consumers: fc.nat(2) });
    fc.assert(
      fc.property(fc.array(arb), fc.subarray(["a", "b", "c"]), fc.option(fc.constantFrom("team-a", "team-b"), { nil: undefined }), fc.subarray(["a", "b", "c"]), (raw, namespaces, installation, withSubs) => {
        const streams = raw.map((r) => stream(r.namespace, r));
        const scope = { namespaces, ...(installation !== undefined ? { installation } : {}) };
        for (const s of unusedStreams(streams, scope, (ns) => withSubs.includes(ns))) {
          expect(inScope(s, scope)).toBe(true);
          expect([s.messages, s.consumers, withSubs.includes(s.namespace)]).toEqual([0, 0, false]);
          if (installation !== undefined) expect(s.owner).toBe(installation);
        }
      }),
    );
  });
});
