// A list+watch of one resource across all namespaces that survives API server restarts: every
// (re)connect lists first (the list's items are reported as "LIST" events, so a change made while
// the watch was down is still seen, though intermediate states in the gap are not), then watches
// from the list's resourceVersion. Bytes are split on newlines before decoding, so a multi-byte
// character across two chunks is decoded whole.
import type { KubeClient } from "../../src/kube/client.js";
import { collectionPath, type KubeObject, type ResourceType } from "../../src/kube/types.js";
import { sleep } from "../../bench/lib/util.js";

export type WatchEventType = "LIST" | "ADDED" | "MODIFIED" | "DELETED";

export class Watcher {
  private readonly abort = new AbortController();
  private done: Promise<void> | undefined;
  /** Times the watch was (re)established after the first. */
  reconnects = 0;

  constructor(
    private readonly client: KubeClient,
    private readonly type: ResourceType,
    private readonly onEvent: (type: WatchEventType, obj: KubeObject<any, any>) => void,
  ) {}

  start(): Promise<void> {
    let first = true;
    let resolveFirst!: () => void;
    const listed = new Promise<void>((r) => (resolveFirst = r));
    this.done = (async () => {
      while (!this.abort.signal.aborted) {
        try {
          await this.once(() => {
            if (!first) this.reconnects++;
            first = false;
            resolveFirst();
          });
        } catch {
          if (!this.abort.signal.aborted) await sleep(300);
        }
      }
    })();
    return listed;
  }

  private async once(onListed: () => void): Promise<void> {
    const path = collectionPath(this.type);
    const list = await this.client.request<{ metadata: { resourceVersion: string }; items: KubeObject[] }>({ method: "GET", path, signal: this.abort.signal, timeoutMs: 20_000 });
    for (const item of list.items) this.onEvent("LIST", item);
    onListed();
    const res = await this.client.stream({ method: "GET", path, query: { watch: 1, resourceVersion: list.metadata.resourceVersion, allowWatchBookmarks: true, timeoutSeconds: 240 }, signal: this.abort.signal });
    let pending: Buffer = Buffer.alloc(0);
    for await (const chunk of res.body) {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      let nl: number;
      while ((nl = pending.indexOf(10)) >= 0) {
        const line = pending.subarray(0, nl).toString("utf8");
        pending = pending.subarray(nl + 1);
        if (!line.trim()) continue;
        const ev = JSON.parse(line) as { type: string; object: KubeObject };
        if (ev.type === "ERROR") return; // 410 and the like: list again
        if (ev.type === "ADDED" || ev.type === "MODIFIED" || ev.type === "DELETED") this.onEvent(ev.type, ev.object);
      }
    }
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.done?.catch(() => undefined);
  }
}
