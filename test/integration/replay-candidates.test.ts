// What a replay walks comes from the API server when the walk starts, not from the operator's
// watch of dead letters: a user who sees dead letters with kubectl and annotates at once gets
// them all replayed. Before, the walk read the operator's index (a watch), and under CI's load a
// bulk replay annotated right after three deliveries became dead letters walked one of them.
// Here no operator runs at all: the dead letters are written a moment before the walk, and the
// walk has nothing but the API server to find them in.
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { KubeClient } from "../../src/kube/client.js";
import { collectionPath, objectPath } from "../../src/kube/types.js";
import { DELIVERIES } from "../../src/delivery/objects.js";
import { toRfc3339 } from "../../src/core/rfc3339.js";
import type { ReplaySelection } from "../../src/core/replay-selector.js";
import { formatCursor } from "../../src/core/replay-selector.js";
import { replayCandidates } from "../../src/replay/candidates.js";
import { createNamespace, deleteNamespace } from "../helpers/cluster.js";
import { delivery } from "../helpers/kube.js";

/** More than one page of the walk's list (200 rows). */
const DEAD = 250;
const BASE = Date.parse("2026-12-01T00:00:00Z");

describe("a replay's candidates", () => {
  let ns: string;
  let client: KubeClient;
  /** Each dead letter's finish time: the higher its number, the older, so age order is not name order. */
  const finishedAt = (i: number) => BASE + (DEAD - i) * 1000;
  const deadName = (i: number) => `dl-${String(i).padStart(3, "0")}`;

  async function make(name: string, sub: string, status: Record<string, unknown> | undefined): Promise<void> {
    await client.request({ method: "POST", path: collectionPath(DELIVERIES, ns), body: delivery(ns, name, sub) });
    if (status) await client.request({ method: "PATCH", path: `${objectPath(DELIVERIES, ns, name)}/status`, contentType: "application/merge-patch+json", body: { status } });
  }

  beforeAll(async () => {
    ns = await createNamespace("replay-candidates");
    const kc = new KubeConfig();
    kc.loadFromFile(inject("kubeconfig"));
    client = await KubeClient.create(kc, { connections: 16 });
    const work: Array<() => Promise<void>> = [];
    for (let i = 0; i < DEAD; i++) {
      const at = toRfc3339(finishedAt(i));
      work.push(() => make(deadName(i), i % 2 === 0 ? "s1" : "s2", { phase: "DeadLettered", finishedAt: at, deadLetter: { at, reason: "Exhausted" } }));
    }
    for (let i = 0; i < 5; i++) work.push(() => make(`ok-${i}`, "s1", { phase: "Succeeded", finishedAt: toRfc3339(finishedAt(90) + i * 1000) }));
    for (let i = 0; i < 3; i++) work.push(() => make(`pending-${i}`, "s1", undefined));
    for (let i = 0; i < work.length; i += 16) await Promise.all(work.slice(i, i + 16).map((w) => w()));
  }, 120_000);
  afterAll(async () => {
    await deleteNamespace(ns);
  });

  const selection = (o: Partial<ReplaySelection>): ReplaySelection => ({ subscriptions: undefined, eventTypes: undefined, reasons: undefined, phases: new Set(["DeadLettered"]), finishedAfter: undefined, finishedBefore: Number.MAX_SAFE_INTEGER, ...o });
  const walk = async (s: ReplaySelection, cursor?: string) => {
    const out: string[] = [];
    for await (const c of replayCandidates({ client }, ns, s, cursor)) out.push(c.key.split("/")[1]!);
    return out;
  };
  /** The dead letters numbered by `keep`, oldest first. */
  const oldestFirst = (keep: (i: number) => boolean) =>
    Array.from({ length: DEAD }, (_, i) => i)
      .filter(keep)
      .sort((a, b) => finishedAt(a) - finishedAt(b))
      .map(deadName);

  it("walks every dead letter the API server has, over more than one page, oldest first", async () => {
    expect(await walk(selection({}))).toEqual(oldestFirst(() => true));
  });

  it("walks one subscription's dead letters only, and resumes after its cursor", async () => {
    const s1 = oldestFirst((i) => i % 2 === 0);
    expect(await walk(selection({ subscriptions: new Set(["s1"]) }))).toEqual(s1);
    const at = DEAD - 2 - 2 * 40; // an even number: s1's 41st oldest
    const cursor = formatCursor({ phase: "DeadLettered", finishedAt: finishedAt(at), name: deadName(at) });
    expect(await walk(selection({ subscriptions: new Set(["s1"]) }), cursor)).toEqual(s1.slice(s1.indexOf(deadName(at)) + 1));
  });

  it("takes only those finished within the window, then the Succeeded ones in name order; never a pending one", async () => {
    const from = finishedAt(100);
    const before = finishedAt(49);
    const got = await walk(selection({ phases: new Set(["DeadLettered", "Succeeded"]), finishedAfter: from, finishedBefore: before }));
    const expected = [...oldestFirst((i) => finishedAt(i) >= from && finishedAt(i) < before), ...["ok-0", "ok-1", "ok-2", "ok-3", "ok-4"]];
    expect(got).toEqual(expected);
    expect(got.some((n) => n.startsWith("pending-"))).toBe(false);
  });
});
