// Whether the API server can be reached, for readiness: learned from the answers to the requests
// the operator makes anyway (a transport error or a 5xx is a failure, any other answer a success).
// A streak of failures longer than the grace period makes it unreachable. Watches stream for
// minutes and an idle operator may send nothing else, so while unreachable each readiness probe
// starts one cheap check (GET /version, one at a time) whose answer, seen like any other, ends
// the streak once the API server is back.

export interface ApiHealthOptions {
  /** Failures for this long before the API server counts as unreachable. */
  graceMs: number;
  /** Sends a request whose answer reaches observe() (through the client's observer). */
  check: () => Promise<unknown>;
  now?: () => number;
}

export class ApiHealth {
  private failingSince: number | undefined;
  private checking = false;
  private readonly now: () => number;

  constructor(private readonly opts: ApiHealthOptions) {
    this.now = opts.now ?? Date.now;
  }

  /** Every answer from the API server; code 0 means no answer (transport error, timeout). */
  observe(code: number): void {
    if (code === 0 || code >= 500) this.failingSince ??= this.now();
    else this.failingSince = undefined;
  }

  reachable(): boolean {
    if (this.failingSince === undefined || this.now() - this.failingSince <= this.opts.graceMs) return true;
    if (!this.checking) {
      this.checking = true;
      void this.opts
        .check()
        .catch(() => undefined)
        .finally(() => (this.checking = false));
    }
    return false;
  }
}
