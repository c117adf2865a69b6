// The fault schedule, drawn from the seed before the run starts: which fault at which offset.
// --quick injects each of the eight kinds once, in a seeded order; a longer run cycles through
// seeded kinds every 45-120 s.
import type { FaultKind } from "./history.js";
import type { Rng } from "./rng.js";

export const FAULT_KINDS: FaultKind[] = ["leader-sigkill", "leader-sigterm", "leader-sigstop", "standby-sigkill", "receiver-restart", "apiserver-restart", "etcd-restart", "noisy-tenant"];

export const FAULT_MEANING: Record<FaultKind, string> = {
  "leader-sigkill": "the leading operator dies at once (OOM kill, node loss): no drain, no Lease release",
  "leader-sigterm": "the leading operator is stopped (rollout): drains in-flight requests, releases the Lease",
  "leader-sigstop":
    "the leading operator freezes (SIGSTOP: a long GC pause, a stalled node) past its Lease, so another leads; then it runs again (SIGCONT), must see it no longer leads, and may lead again later",
  "standby-sigkill": "the standby operator dies: must not disturb the leader",
  "receiver-restart": "a receiver process is killed and restarted on the same port after 1-4 s",
  "apiserver-restart": "kube-apiserver is stopped for 3-8 s and started again",
  "etcd-restart": "etcd is stopped for 3-8 s and started again (the API server stays up and fails)",
  "noisy-tenant":
    "the tenant mix: namespace soak-noisy floods for 12 s at ten times the workload's rate (a hanging endpoint, 200 KiB payloads, a paused subscription, dead letters at once); the other tenants' invariants are not relaxed",
  "lease-lost": "not injected: a leader that could not renew its Lease in time (read from the operators' logs), a failover like a kill",
};

export interface PlannedFault {
  at: number;
  kind: FaultKind;
  downMs: number;
  receiver: number;
}

export function schedule(rng: Rng, durationMs: number, quick: boolean): PlannedFault[] {
  const out: PlannedFault[] = [];
  const plan = (kind: FaultKind, at: number) => out.push({ at, kind, downMs: rng.int(3_000, 8_000), receiver: rng.int(0, 1) });
  if (quick) {
    const kinds = [...FAULT_KINDS];
    for (let i = kinds.length - 1; i > 0; i--) {
      const j = rng.int(0, i);
      [kinds[i], kinds[j]] = [kinds[j]!, kinds[i]!];
    }
    const slot = (durationMs - 10_000) / kinds.length;
    kinds.forEach((k, i) => plan(k, 8_000 + Math.round(i * slot + rng.next() * slot * 0.3)));
    return out;
  }
  for (let at = rng.int(20_000, 60_000); at < durationMs - 20_000; at += rng.int(45_000, 120_000)) plan(rng.pick(FAULT_KINDS), at);
  return out;
}
