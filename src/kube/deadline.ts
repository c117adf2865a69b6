// A deadline for one request: one timer and one abort signal, cleared when the request ends.
// (AbortSignal.timeout() keeps its timer until it fires, long after the request is done, and
// AbortSignal.any() adds weak-ref bookkeeping: measurable at thousands of requests a second.)
//
// The signal is an EventEmitter with `aborted` and `reason`, the other form of signal undici
// takes: an AbortController per request, and a listener on the parent signal per request, were
// about 2.5% of a stream-mode delivery's CPU. A parent signal (the operator's drain) gets one
// listener for all the deadlines under it, which it aborts together.
import { EventEmitter } from "node:events";

/** What undici (and the tests) read of a signal: whether it aborted, why, and its "abort" event. */
export class DeadlineSignal extends EventEmitter {
  aborted = false;
  reason: unknown = undefined;

  /** Aborts once: sets `aborted` and `reason`, then emits "abort". */
  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit("abort");
  }
}

export interface Deadline {
  signal: DeadlineSignal;
  /** True once the timer fired (as opposed to the parent signal aborting). */
  readonly expired: boolean;
  clear(): void;
}

/** The deadlines open under each parent signal, with the one listener that aborts them. */
const children = new WeakMap<AbortSignal, Set<DeadlineSignal>>();

function underParent(parent: AbortSignal, signal: DeadlineSignal): () => void {
  let open = children.get(parent);
  if (!open) {
    const set = new Set<DeadlineSignal>();
    open = set;
    children.set(parent, set);
    parent.addEventListener(
      "abort",
      () => {
        for (const s of [...set]) s.abort(parent.reason);
        set.clear();
      },
      { once: true },
    );
  }
  const set = open;
  set.add(signal);
  return () => set.delete(signal);
}

export function deadline(ms: number, parent?: AbortSignal): Deadline {
  const signal = new DeadlineSignal();
  let expired = false;
  const timer = ms > 0 ? setTimeout(() => {
    expired = true;
    signal.abort(new DOMException(`no answer within ${ms} ms`, "TimeoutError"));
  }, ms) : undefined;
  let leave: (() => void) | undefined;
  if (parent?.aborted) signal.abort(parent.reason);
  else if (parent) leave = underParent(parent, signal);
  return {
    signal,
    get expired() {
      return expired;
    },
    clear() {
      if (timer) clearTimeout(timer);
      leave?.();
    },
  };
}
