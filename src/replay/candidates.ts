// What a replay walks, in the order it walks it: first the dead letters the selector matches,
// oldest first (from the index of finished deliveries: it holds them all, without payloads),
// then the Succeeded deliveries it matches, in name order, from a paginated metadata-only list
// of Table rows (they are never kept in memory: each page is dropped once walked). Each walk
// starts after the replay's cursor, so a restarted or new leader resumes where it left off.
import { afterCursor, parseCursor, selects, type ReplayCursor, type ReplaySelection } from "../core/replay-selector.js";
import { ACCEPT, ApiError, type KubeClient } from "../kube/client.js";
import { rowItem, type TableRow } from "../kube/reflector.js";
import { collectionPath, objectKey } from "../kube/types.js";
import { DELIVERIES } from "../delivery/objects.js";
import type { TerminalRecord } from "../finished/records.js";
import { terminalRecord } from "../finished/terminal-index.js";

/** Rows per page of the Succeeded list. */
const PAGE_SIZE = 200;

export interface Candidate {
  key: string;
  rec: TerminalRecord;
  /** Its place in the walk (the cursor once taken). */
  cursor: ReplayCursor;
}

export interface CandidateSource {
  client: KubeClient;
  /** The dead letters indexed in a namespace. */
  deadLetterRecords(namespace: string): Iterable<[string, TerminalRecord]>;
  now?: () => number;
}

interface TablePage {
  metadata?: { continue?: string };
  rows?: TableRow[];
  columnDefinitions?: Array<{ name: string }>;
}

/** The candidates of a replay after `cursorText`, in walk order. */
export async function* replayCandidates(src: CandidateSource, namespace: string, selection: ReplaySelection, cursorText: string | undefined): AsyncGenerator<Candidate> {
  const cursor = parseCursor(cursorText);
  const now = src.now ?? Date.now;
  if (selection.phases.has("DeadLettered")) {
    const matched: Candidate[] = [];
    for (const [key, rec] of src.deadLetterRecords(namespace)) {
      const c: Candidate = { key, rec, cursor: { phase: "DeadLettered", finishedAt: rec.finishedAt, name: rec.metadata.name } };
      if (selects(selection, asCandidate(rec)) && afterCursor(cursor, c.cursor)) matched.push(c);
    }
    matched.sort((a, b) => a.rec.finishedAt - b.rec.finishedAt || (a.rec.metadata.name < b.rec.metadata.name ? -1 : 1));
    yield* matched;
  }
  if (selection.phases.has("Succeeded")) yield* succeeded(src.client, namespace, selection, cursor, now);
}

/** The Succeeded deliveries the selection matches, page by page (name order). */
async function* succeeded(client: KubeClient, namespace: string, selection: ReplaySelection, cursor: ReplayCursor | undefined, now: () => number): AsyncGenerator<Candidate> {
  const only = selection.subscriptions?.size === 1 ? [...selection.subscriptions][0] : undefined;
  const fieldSelector = `status.phase=Succeeded${only ? `,spec.subscriptionRef.name=${only}` : ""}`;
  let last = cursor?.phase === "Succeeded" ? cursor.name : undefined;
  let continueToken: string | undefined;
  do {
    let page: TablePage;
    try {
      page = await client.request<TablePage>({
        method: "GET",
        path: collectionPath(DELIVERIES, namespace),
        accept: ACCEPT.table,
        query: { limit: PAGE_SIZE, continue: continueToken, fieldSelector, includeObject: "Metadata" },
        timeoutMs: 60_000,
      });
    } catch (err) {
      // The continue token expired (a slow replay outlived a compaction): list again from the
      // start; rows up to the last one walked are skipped (the list is in name order).
      if (err instanceof ApiError && err.isGone && continueToken) {
        continueToken = undefined;
        continue;
      }
      throw err;
    }
    const columns = (page.columnDefinitions ?? []).map((c) => c.name);
    for (const row of page.rows ?? []) {
      const rec = terminalRecord(rowItem(columns, row), now);
      if (!rec || rec.phase !== "Succeeded" || (last !== undefined && rec.metadata.name <= last)) continue;
      last = rec.metadata.name;
      if (!selects(selection, asCandidate(rec))) continue;
      yield { key: objectKey(rec.metadata), rec, cursor: { phase: "Succeeded", finishedAt: 0, name: rec.metadata.name } };
    }
    continueToken = page.metadata?.continue || undefined;
  } while (continueToken);
}

function asCandidate(rec: TerminalRecord) {
  return { subscription: rec.subscription, eventType: rec.eventType, phase: rec.phase, reason: rec.reason, finishedAt: rec.finishedAt };
}
