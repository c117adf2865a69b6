// The delivery engine end to end: a real API server, the real operator, real receivers.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { apply, delivery, getObj, secret, subscription, TEST_SECRET } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";

const fastRetry = { initialBackoff: "50ms", multiplier: 2, maxAttempts: 6, maxBackoff: "5s", jitterPercent: 0 };

describe("delivery: three customers", () => {
  let ns: string;
  let op: TestOperator;
  const receivers: Receiver[] = [];

  beforeAll(async () => {
    ns = await createNamespace("delivery");
    op = await startOperator({ namespaces: [ns] });
  });
  afterAll(async () => {
    await op?.stop();
    await Promise.all(receivers.map((r) => r.close()));
    await deleteNamespace(ns);
  });

  it("retries 503s to success, dead-letters 410 at once and exhausts a 500", async () => {
    const flaky = await Receiver.start(Receiver.sequence([503, 503], 200));
    const gone = await Receiver.start(() => 410);
    const broken = await Receiver.start(() => 500);
    receivers.push(flaky, gone, broken);
    await apply([
      secret(ns, "signing"),
      subscription(ns, "flaky", { url: flaky.url(), secretRef: { name: "signing" }, retry: fastRetry }),
      subscription(ns, "gone", { url: gone.url(), secretRef: { name: "signing" }, retry: fastRetry }),
      subscription(ns, "broken", { url: broken.url(), secretRef: { name: "signing" }, retry: fastRetry, circuitBreaker: { failureThreshold: 100 } }),
      delivery(ns, "to-flaky", "flaky", { eventId: "evt-1" }),
      delivery(ns, "to-gone", "gone", { eventId: "evt-2" }),
      delivery(ns, "to-broken", "broken", { eventId: "evt-3" }),
    ]);

    const done = (name: string, phase: string) =>
      waitFor(async () => {
        const d = await getObj("whdel", ns, name);
        return d?.status?.phase === phase ? d : undefined;
      }, { description: `${name} ${phase}`, timeoutMs: 30_000 });

    const ok = await done("to-flaky", "Succeeded");
    expect(flaky.requests).toHaveLength(3);
    expect(ok.status!.attempts).toBe(3);
    expect(ok.status!.conditions.find((c: any) => c.type === "Succeeded").status).toBe("True");

    const g = await done("to-gone", "DeadLettered");
    expect(gone.requests).toHaveLength(1);
    expect(g.status!.deadLetter.reason).toBe("Gone");
    await waitFor(async () => (await getObj("whsub", ns, "gone"))?.status?.health?.state === "Disabled", { description: "gone endpoint Disabled" });

    const b = await done("to-broken", "DeadLettered");
    expect(broken.requests).toHaveLength(6);
    expect(b.status!.deadLetter.reason).toBe("Exhausted");
    expect(b.status!.history).toHaveLength(6);
    // Gaps grow roughly twofold: 50, 100, 200, 400, 800 ms.
    const gaps = broken.requests.slice(1).map((r, i) => r.at - broken.requests[i]!.at);
    for (let i = 1; i < gaps.length; i++) expect(gaps[i]! / gaps[i - 1]!).toBeGreaterThan(1.4);

    for (const [r, id] of [[flaky, "evt-1"], [gone, "evt-2"], [broken, "evt-3"]] as const) {
      for (const req of r.requests) {
        expect(req.headers["webhook-id"]).toBe(id);
        expect(() => Receiver.verify(req, TEST_SECRET)).not.toThrow();
        expect(JSON.parse(req.body)).toMatchObject({ id, type: "order.paid" });
      }
    }
  });
});
