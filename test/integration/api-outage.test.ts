// The API server goes away for 10 s in the middle of 100 deliveries and comes back: the operator
// keeps running, reports not-ready meanwhile, does not spin, and every delivery ends Succeeded
// exactly once. Uses a private control plane (the shared one must stay up for other tests).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { startControlPlane, stopControlPlane, type ControlPlaneInfo } from "../../src/cluster/control-plane.js";
import { kubectl, kubectlOk, waitFor } from "../helpers/cluster.js";
import { delivery, subscription } from "../helpers/kube.js";
import { spawnOperator, type OperatorProcess } from "../helpers/process.js";
import { Receiver } from "../helpers/receiver.js";
import { testTools } from "../helpers/tools.js";

const CRDS = fileURLToPath(new URL("../../crds", import.meta.url));
const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

describe("API server outage", () => {
  it("stops the API server for 10 s during 100 deliveries: all Succeeded once, the operator never exits", async () => {
    const dir = await mkdtemp(join(tmpdir(), "hookline-outage-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const binDir = testTools().controlPlaneBinDir;
    const install = async (cp: ControlPlaneInfo) => {
      await kubectlOk(["apply", "-f", CRDS], { kubeconfig: cp.kubeconfig });
      await kubectlOk(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"], { kubeconfig: cp.kubeconfig });
    };
    let cp = await startControlPlane({ dir, binDir, attachToParent: true, env: process.env, beforeControllerManager: install });
    cleanups.push(() => stopControlPlane(dir));
    const kc = cp.kubeconfig;
    const k = (args: string[], input?: string) => kubectlOk(args, { kubeconfig: kc, ...(input ? { input } : {}) });
    const ns = "outage";
    await k(["create", "namespace", ns]);
    const r = await Receiver.start(() => ({ status: 200, delayMs: 50 }));
    cleanups.push(() => r.close());
    const op: OperatorProcess = await spawnOperator({ name: "outage-op", namespaces: [ns], kubeconfig: kc, env: { LEADER_ELECT: "true", LEADER_ELECTION_NAMESPACE: ns } });
    cleanups.push(async () => {
      if (op.child.exitCode === null) op.kill("SIGKILL");
      await op.exited;
    });
    await op.waitForLog((l) => l.msg === "became leader", 20_000, "leadership");
    const list = (items: unknown[]) => JSON.stringify({ apiVersion: "v1", kind: "List", items });
    const names = Array.from({ length: 100 }, (_, i) => `o-${String(i).padStart(3, "0")}`);
    await k(["apply", "-f", "-"], list([subscription(ns, "steady", { url: r.url(), maxInFlight: 5, paused: true })]));
    await k(["create", "-f", "-"], list(names.map((n) => delivery(ns, n, "steady", { eventId: `evt-${n}` }))));
    await k(["apply", "-f", "-"], list([subscription(ns, "steady", { url: r.url(), maxInFlight: 5, paused: false })]));
    await r.waitForRequests(30);

    const down = Date.now();
    await stopControlPlane(dir);
    const ready = async () => (await fetch(`http://127.0.0.1:${op.healthPort}/readyz`)).status;
    await waitFor(async () => (await ready()) === 503, { description: "not ready while the API server is gone", timeoutMs: 8_000 });
    // The outage lasts 10 s: this wait is the scenario, not a synchronization.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 10_000 - (Date.now() - down))));
    const sentDuringOutage = r.requests.filter((q) => q.at > down + 1_000).length;
    cp = await startControlPlane({ dir, binDir, attachToParent: true, env: process.env });
    expect(cp.kubeconfig).toBe(kc);

    await waitFor(async () => {
      const res = await kubectl(["get", "whdel", "-n", ns, "-o", "jsonpath={range .items[*]}{.status.phase}{\"\\n\"}{end}"], { kubeconfig: kc });
      return res.code === 0 && res.stdout.split("\n").filter((p) => p === "Succeeded").length === 100;
    }, { description: "100 Succeeded after the API server returned", timeoutMs: 90_000 });
    expect(op.child.exitCode).toBeNull();
    await waitFor(
      async () => {
        const res = await fetch(`http://127.0.0.1:${op.healthPort}/readyz`);
        if (res.status !== 200) throw new Error(`${res.status} ${(await res.text()).trim()}`);
        return true;
      },
      { description: "ready again" },
    );
    const perId = new Map<string, number>();
    for (const q of r.requests) perId.set(String(q.headers["webhook-id"]), (perId.get(String(q.headers["webhook-id"])) ?? 0) + 1);
    expect(perId.size).toBe(100);
    expect([...perId.values()].every((n) => n === 1)).toBe(true);
    // No new attempts while outcomes could not be recorded (a few were in flight at the cut).
    expect(sentDuringOutage).toBeLessThanOrEqual(5);
    // Retries back off instead of spinning: a handful of watch/list failures per reflector.
    const failures = op.lines.filter((l) => l.msg === "list/watch failed, retrying").length;
    expect(failures).toBeLessThan(60);
  });
});
