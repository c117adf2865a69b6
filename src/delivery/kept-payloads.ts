// Payloads kept in memory between the watch that brought them and the attempt that sends them, so
// that an attempt need not read its delivery back from the API server (one GET per attempt: half
// of the API server's requests in a backlog drain, docs/performance.md). Bounded, so memory stays
// independent of the backlog and of payload sizes:
//
// - at most HOOKLINE_PAYLOAD_CACHE_BYTES in all (0: nothing is kept), each payload counted by its
//   serialized UTF-8 bytes (at least what V8 holds for the string) plus a fixed overhead;
// - only payloads of at most KEPT_PAYLOAD_MAX_BYTES (64 KiB): a bigger one costs the API server
//   more to send than the GET's round trip, and would fill the budget with a few entries;
// - shared between namespaces as TenantLru shares: when the budget is full, the least recently
//   kept payload of the namespace holding the most bytes goes. A namespace that floods the cache
//   evicts only its own payloads while another holds less; a payload that would need another
//   namespace's (holding less) is not kept.
//
// A payload is taken (removed) by the attempt that sends it; a delivery that leaves the cache
// forgets its own. One that is not kept, or was evicted, is read from the API server as before
// (payload.ts loadRequestBody): eviction costs a GET, never a payload. Keyed by the object's uid,
// so a delivery deleted and created again under its name never gets the other's payload.
import { TenantLru, type EvictionReason } from "../lib/tenant-lru.js";

/** The largest serialized payload kept. */
export const KEPT_PAYLOAD_MAX_BYTES = 64 * 1024;
/** What one kept payload costs besides its bytes: the map entries, the string's header, the key. */
export const KEPT_PAYLOAD_OVERHEAD_BYTES = 256;

export interface KeptPayloadsOptions {
  /** HOOKLINE_PAYLOAD_CACHE_BYTES; 0 keeps nothing. */
  maxBytes: number;
  onEvict?: (reason: EvictionReason) => void;
  onRead?: (hit: boolean) => void;
}

interface Kept {
  /** The payload as JSON.stringify wrote it: the body's `data`. */
  json: string;
  weight: number;
}

export class KeptPayloads {
  private readonly lru: TenantLru<Kept> | undefined;

  constructor(private readonly o: KeptPayloadsOptions) {
    this.lru =
      o.maxBytes > 0
        ? new TenantLru<Kept>({ max: o.maxBytes, maxPerNamespace: o.maxBytes, weigh: (k) => k.weight, ...(o.onEvict ? { onEvict: o.onEvict } : {}) })
        : undefined;
  }

  /**
   * Keeps the serialized payload of the delivery `uid` if it is small enough and fits (see
   * above); a function is called only then (the payload serialized only when kept).
   */
  keep(namespace: string, uid: string, json: string | (() => string), bytes: number): void {
    if (!this.lru || bytes > KEPT_PAYLOAD_MAX_BYTES) return;
    this.lru.set(namespace, uid, { json: typeof json === "string" ? json : json(), weight: bytes + KEPT_PAYLOAD_OVERHEAD_BYTES });
  }

  /** The kept payload of `uid`, removed; undefined when it was not kept (read it from the API server). */
  take(namespace: string, uid: string): string | undefined {
    if (!this.lru) {
      this.o.onRead?.(false);
      return undefined;
    }
    const json = this.lru.take(namespace, uid)?.json;
    this.o.onRead?.(json !== undefined);
    return json;
  }

  forget(namespace: string, uid: string): void {
    this.lru?.delete(namespace, uid);
  }

  /** Bytes kept per namespace holding some. */
  bytesByNamespace(): Map<string, number> {
    return this.lru?.weights() ?? new Map<string, number>();
  }

  get bytes(): number {
    return this.lru?.weight ?? 0;
  }
}
