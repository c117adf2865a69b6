// An AbortController whose signal many concurrent operations listen to at once (every attempt in
// flight, every reconcile). Node warns ("MaxListenersExceededWarning") past 10 listeners on one
// signal (Node 20-24; Node 26 sets no limit); here that many is the design, not a leak, so the
// limit is lifted for this signal only.
import { setMaxListeners } from "node:events";

export function sharedAbortController(): AbortController {
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  return controller;
}
