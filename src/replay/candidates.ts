// What a replay walks, in the order it walks it: first the dead letters the selector matches,
// oldest first, then the Succeeded deliveries it matches, in name order. Both come from
// paginated metadata-only lists of Table rows read from the API server when the walk starts, not
// from the operator's index of finished deliveries: that index is a watch, which may not yet have
// the dead letters a user saw with kubectl before annotating (a run started then walked one of
// three). The dead letters matched are held (without payloads, as the index holds them) to be
// sorted by age; Succeeded rows are dropped once walked. Each walk starts after the replay's
// cursor, so a restarted or new leader resumes where it left off.
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
    for await (const rec of listed(src.client, namespace, "DeadLettered", selection, now)) {
      const c: Candidate = { key: objectKey(rec.metadata), rec, cursor: { phase: "DeadLettered", finishedAt: rec.finishedAt, name: rec.metadata.name } };
      if (selects(selection, asCandidate(rec)) && afterCursor(cursor, c.cursor)) matched.push(c);
    }
    matched.sort((a, b) => a.rec.finishedAt - b.rec.finishedAt || (a.rec.metadata.name < b.rec.metadata.name ? -1 : 1));
    yield* matched;
  }
  if (selection.phases.has("Succeeded")) {
    const after = cursor?.phase === "Succeeded" ? cursor.name : undefined;
    for await (const rec of listed(src.client, namespace, "Succeeded", selection, now, after)) {
      if (!selects(selection, asCandidate(rec))) continue;
      yield { key: objectKey(rec.metadata), rec, cursor: { phase: "Succeeded", finishedAt: 0, name: rec.metadata.name } };
    }
  }
}

/**
 * The deliveries of one phase in `namespace` as the API server has them now (a quorum read), in
 * name order and after `after` when given, page by page; of one subscription when the selection
 * names only one.
 */
async function* listed(client: KubeClient, namespace: string, phase: "DeadLettered" | "Succeeded", selection: ReplaySelection, now: () => number, after?: string): AsyncGenerator<TerminalRecord> {
  const only = selection.subscriptions?.size === 1 ? [...selection.subscriptions][0] : undefined;
  const fieldSelector = `status.phase=${phase}${only ? `,spec.subscriptionRef.name=${only}` : ""}`;
  let last = after;
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
      if (!rec || rec.phase !== phase || (last !== undefined && rec.metadata.name <= last)) continue;
      last = rec.metadata.name;
      yield rec;
    }
    continueToken = page.metadata?.continue || undefined;
  } while (continueToken);
}

function asCandidate(rec: TerminalRecord) {
  return { subscription: rec.subscription, eventType: rec.eventType, phase: rec.phase, reason: rec.reason, finishedAt: rec.finishedAt };
}
