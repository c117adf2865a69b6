// A released backlog costs the API server its deliveries' own writes, not one more status write
// per waiting delivery: conditions that only say why a delivery waits (EndpointBusy, Paused...)
// are informational, so they are written within a budget (src/transports/cr/waits.ts) and never
// compete with the outcomes when thousands wait at once.
import { describe, expect, it } from "vitest";
import { waitFor } from "../helpers/cluster.js";
import { operatorFixture } from "../helpers/fixture.js";
import { create, delivery, getObj, listObjs, subscription, apply } from "../helpers/kube.js";

describe("a released backlog", () => {
  const f = operatorFixture("backlog-drain");

  it("300 deliveries held while paused, then released to maxInFlight 5: at most a budget of wait-condition writes, all delivered once", async () => {
    const { ns, op } = f;
    const r = await f.receiver(() => ({ status: 200, delayMs: 20 }));
    const N = 300;
    await apply(subscription(ns, "drain", { url: r.url(), maxInFlight: 5, paused: true, retention: { succeeded: "0s" } }));
    await waitFor(async () => (await getObj("whsub", ns, "drain"))?.status?.conditions?.some((c: any) => c.type === "Ready" && c.reason === "Paused"), { description: "subscription Ready (Paused)" });
    for (let i = 0; i < N; i += 50) await create(Array.from({ length: Math.min(50, N - i) }, (_, j) => delivery(ns, `q-${String(i + j).padStart(3, "0")}`, "drain")));
    await waitFor(() => op.op.caches.deliveriesOf(`${ns}/drain`).size === N, { description: `${N} pending deliveries cached` });
    // Overdue: every delivery was due long before it can go (the throttle report's threshold is 10 s).
    await new Promise((resolve) => setTimeout(resolve, 11_000)); // ages the backlog past the report threshold
    const patchesBefore = (await op.apiRequests("webhookdeliveries/status")).patch ?? 0;
    await apply(subscription(ns, "drain", { url: r.url(), maxInFlight: 5, paused: false, retention: { succeeded: "0s" } }));
    await waitFor(async () => r.requests.length >= N && (await listObjs("whdel", ns)).length === 0, { description: `${N} delivered and deleted`, timeoutMs: 120_000 });
    const patches = ((await op.apiRequests("webhookdeliveries/status")).patch ?? 0) - patchesBefore;
    expect(new Set(r.requests.map((q) => q.headers["webhook-id"])).size).toBe(N);
    expect(r.requests).toHaveLength(N);
    // Without the budget every parked delivery writes EndpointBusy once (about N status writes).
    expect(patches).toBeLessThanOrEqual(120);
  });
});
