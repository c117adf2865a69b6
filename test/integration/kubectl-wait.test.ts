// `kubectl wait --for=condition=Succeeded=False` as docs/operations.md shows it: started while
// the delivery is still retrying, it does not return until the delivery is dead-lettered, then
// reports "condition met" and the condition's reason says why; a delivered one never matches.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNamespace, deleteNamespace, kubectl, kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, delivery, getObj, subscription } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";

describe("kubectl wait for a dead letter", () => {
  let ns: string;
  let op: TestOperator;
  let receiver: Receiver;

  beforeAll(async () => {
    ns = await createNamespace("wait");
    receiver = await Receiver.start((req) => (req.path === "/ok" ? 200 : 500));
    op = await startOperator({ namespaces: [ns] });
  });
  afterAll(async () => {
    await op?.stop();
    await receiver?.close();
    await deleteNamespace(ns);
  });

  it("--for=condition=Succeeded=False waits through the retries and returns when the delivery is dead-lettered", async () => {
    // Three attempts, 1 s apart: the delivery is Retrying for about two seconds.
    await apply(subscription(ns, "acme", { url: receiver.url("/fail"), retry: { maxAttempts: 3, initialBackoff: "1s", maxBackoff: "1s", jitterPercent: 0 } }));
    await kubectlOk(["-n", ns, "wait", "--for=condition=Ready", "whsub/acme"]);
    await apply(delivery(ns, "evt-1001-acme", "acme"));
    // The command of docs/operations.md, started before the delivery has finished.
    let exited = false;
    const waiting = kubectl(["-n", ns, "wait", "--for=condition=Succeeded=False", "whdel/evt-1001-acme", "--timeout=5m"], { timeoutMs: 330_000 }).finally(() => (exited = true));
    // Read the flag first, then the phase: while the delivery is still Retrying, the wait cannot have returned.
    await waitFor(async () => {
      const before = exited;
      const phase = (await getObj("whdel", ns, "evt-1001-acme"))?.status?.phase;
      if (phase === "Retrying") expect(before, "kubectl wait returned while the delivery was Retrying").toBe(false);
      return phase === "Retrying";
    }, { description: "evt-1001-acme Retrying" });
    const r = await waiting;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe("webhookdelivery.hookline.dev/evt-1001-acme condition met");
    const s = (await getObj("whdel", ns, "evt-1001-acme"))!.status!;
    expect(s.phase).toBe("DeadLettered");
    expect(s.attempts).toBe(3);
    expect(await kubectlOk(["-n", ns, "get", "whdel", "evt-1001-acme", "-o", `jsonpath={.status.conditions[?(@.type=="Succeeded")].reason}`])).toBe("Exhausted");
  });

  it("a delivered one never matches Succeeded=False (the wait times out), and matches Succeeded", async () => {
    await apply([subscription(ns, "fine", { url: receiver.url("/ok") }), delivery(ns, "evt-1002-fine", "fine")]);
    expect(await kubectlOk(["-n", ns, "wait", "--for=condition=Succeeded", "whdel/evt-1002-fine", "--timeout=60s"])).toContain("condition met");
    const r = await kubectl(["-n", ns, "wait", "--for=condition=Succeeded=False", "whdel/evt-1002-fine", "--timeout=2s"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/timed out waiting for the condition/);
  });
});
