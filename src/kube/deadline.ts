// A deadline for one request: one AbortController and one timer, cleared when the request ends.
// (AbortSignal.timeout() keeps its timer until it fires, long after the request is done, and
// AbortSignal.any() adds weak-ref bookkeeping: measurable at thousands of requests a second.)

export interface Deadline {
  signal: AbortSignal;
  /** True once the timer fired (as opposed to the parent signal aborting). */
  readonly expired: boolean;
  clear(): void;
}

export function deadline(ms: number, parent?: AbortSignal): Deadline {
  const controller = new AbortController();
  let expired = false;
  const onParent = () => controller.abort(parent?.reason);
  const timer = ms > 0 ? setTimeout(() => {
    expired = true;
    controller.abort(new DOMException(`no answer within ${ms} ms`, "TimeoutError"));
  }, ms) : undefined;
  if (parent?.aborted) onParent();
  else parent?.addEventListener("abort", onParent, { once: true });
  return {
    signal: controller.signal,
    get expired() {
      return expired;
    },
    clear() {
      if (timer) clearTimeout(timer);
      parent?.removeEventListener("abort", onParent);
    },
  };
}
