// Shutdown: SIGTERM drains in-flight deliveries inside WEBHOOK_DRAIN_TIMEOUT_MS, interrupts and
// records the rest, and exits 0. Real processes, real signals.
import { afterEach, describe, expect, it } from "vitest";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { apply, delivery, getObj, listObjs, subscription } from "../helpers/kube.js";
import { startOperator } from "../helpers/operator.js";
import { spawnOperator, type OperatorProcess } from "../helpers/process.js";
import { Receiver } from "../helpers/receiver.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function setup(prefix: string) {
  const ns = await createNamespace(prefix);
  cleanups.push(() => deleteNamespace(ns));
  return ns;
}

async function operatorProcess(ns: string, env: Record<string, string>): Promise<OperatorProcess> {
  const p = await spawnOperator({ name: `op-${ns}`, namespaces: [ns], env: { LEADER_ELECT: "false", ...env } });
  cleanups.push(async () => {
    if (p.child.exitCode === null) p.kill("SIGKILL");
    await p.exited;
  });
  return p;
}

/** Sends SIGTERM once `inFlight` requests have reached the receiver; the exit code and how long the exit took. */
async function sigtermWith(op: OperatorProcess, r: Receiver, inFlight: number, onSent?: () => void): Promise<{ code: number | null; tookMs: number }> {
  await r.waitForRequests(inFlight);
  const sent = Date.now();
  op.kill("SIGTERM");
  onSent?.();
  const exit = await op.exited;
  return { code: exit.code, tookMs: exit.at - sent };
}

describe("drain on SIGTERM", () => {
  it("lets 20 in-flight deliveries finish (receiver answers after 2 s, drain timeout 5 s): all Succeeded, exit 0", async () => {
    const ns = await setup("drain-ok");
    // Each answer comes 2 s after the SIGTERM, so all 20 are in flight when it arrives however
    // slowly the 20 requests came in (a loaded machine spread them over more than 2 s).
    let signalled!: () => void;
    const sigtermSent = new Promise<void>((resolve) => (signalled = resolve));
    const r = await Receiver.start(async () => {
      await sigtermSent;
      return { status: 200, delayMs: 2_000 };
    });
    cleanups.push(() => r.close());
    const op = await operatorProcess(ns, { WEBHOOK_DRAIN_TIMEOUT_MS: "5000" });
    const names = Array.from({ length: 20 }, (_, i) => `d${i}`);
    await apply([subscription(ns, "slow", { url: r.url(), maxInFlight: 20 }), ...names.map((n) => delivery(ns, n, "slow"))]);
    const exit = await sigtermWith(op, r, 20, signalled);
    expect(exit.code).toBe(0);
    expect(exit.tookMs).toBeLessThan(5_000 + 2_000);
    const all = await listObjs("whdel", ns);
    expect(all.map((d) => d.status?.phase)).toEqual(names.map(() => "Succeeded"));
    expect(r.requests).toHaveLength(20);
    const drained = op.lines.find((l) => l.msg === "webhook_deliveries_drained");
    expect(drained).toMatchObject({ drained: 20 });
    // Everything after the drain (the last rollups, Events, the Lease, caches, clients, servers)
    // fits the shared budget under the chart's margin, and says how long each step took.
    const after = op.lines.find((l) => l.msg === "shutdown steps after the drain") as { afterDrainMs: number; budgetMs: number; steps: Record<string, number> } | undefined;
    expect(after, "the shutdown steps line").toBeDefined();
    console.log(`after the drain: ${after!.afterDrainMs} ms of ${after!.budgetMs} (${JSON.stringify(after!.steps)})`);
    expect(after!.afterDrainMs).toBeLessThan(after!.budgetMs);
    // The clean path says drained and nothing else: no timeout, nothing named "flushed".
    expect(op.lines.some((l) => l.msg === "webhook_drain_timeout")).toBe(false);
    expect(op.lines.filter((l) => typeof l.msg === "string" && /flushed/.test(l.msg))).toEqual([]);
  });

  for (const action of ["requeue", "dead-letter"] as const) {
    it(`with a hanging receiver and drain timeout 2 s, exits 0 in time and ${action === "requeue" ? "requeues the interrupted attempts for the next operator, uncounted" : "dead-letters them with reason Drain"}`, async () => {
      const ns = await setup(`drain-${action}`);
      let hang = true;
      const r = await Receiver.start(() => (hang ? "hang" : 200));
      cleanups.push(() => r.close());
      const op = await operatorProcess(ns, { WEBHOOK_DRAIN_TIMEOUT_MS: "2000", WEBHOOK_DRAIN_TIMEOUT_ACTION: action });
      const names = Array.from({ length: 5 }, (_, i) => `h${i}`);
      await apply([subscription(ns, "hangs", { url: r.url(), timeout: "60s" }), ...names.map((n) => delivery(ns, n, "hangs"))]);
      const exit = await sigtermWith(op, r, 5);
      expect(exit.code).toBe(0);
      // The stated margin: drain timeout + 2 s.
      expect(exit.tookMs).toBeLessThan(2_000 + 2_000);
      expect(exit.tookMs).toBeGreaterThanOrEqual(1_900);
      const timeoutLine = op.lines.find((l) => l.msg === "webhook_drain_timeout");
      expect(timeoutLine).toMatchObject({ interrupted: 5, action });
      // Then, once the interrupted attempts are recorded, the counts (the specification's order).
      const flushed = op.lines.findIndex((l) => l.msg === "webhook_drain_flushed_to_dlq");
      expect(flushed).toBeGreaterThan(op.lines.indexOf(timeoutLine!));
      expect(op.lines[flushed]).toMatchObject(action === "dead-letter" ? { requeued: 0, deadLettered: 5 } : { requeued: 5, deadLettered: 0 });
      expect(op.lines.some((l) => l.msg === "webhook_deliveries_drained")).toBe(false);
      for (const n of names) {
        const d = await getObj("whdel", ns, n);
        expect(d?.status?.lastAttempt?.outcome).toBe("Interrupted");
        if (action === "dead-letter") {
          expect(d?.status?.phase).toBe("DeadLettered");
          expect(d?.status?.deadLetter?.reason).toBe("Drain");
        } else {
          expect(d?.status?.attempts).toBe(0);
          expect(d?.status?.interruptions).toBe(1);
          expect(Date.parse(d!.status!.nextAttemptAt)).toBeLessThanOrEqual(Date.now());
        }
      }
      if (action === "requeue") {
        hang = false;
        const next = await startOperator({ namespaces: [ns] });
        cleanups.push(() => next.stop());
        await waitFor(async () => (await listObjs("whdel", ns)).every((d) => d.status?.phase === "Succeeded"), { description: "the next operator completes them" });
        for (const n of names) expect((await getObj("whdel", ns, n))?.status?.attempts).toBe(1);
      }
    });
  }

  it("exits at once on a second signal", async () => {
    const ns = await setup("drain-twice");
    const r = await Receiver.start(() => "hang");
    cleanups.push(() => r.close());
    const op = await operatorProcess(ns, { WEBHOOK_DRAIN_TIMEOUT_MS: "60000" });
    await apply([subscription(ns, "hangs", { url: r.url(), timeout: "120s" }), delivery(ns, "x", "hangs")]);
    await r.waitForRequests(1);
    op.kill("SIGTERM");
    await op.waitForLog((l) => typeof l.msg === "string" && l.msg.startsWith("shutdown:"), 5_000, "shutdown started");
    const second = Date.now();
    op.kill("SIGINT");
    const exit = await op.exited;
    expect(exit.at - second).toBeLessThan(1_500);
    expect(exit.code).not.toBe(0);
  });
});
