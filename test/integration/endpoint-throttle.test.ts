// Endpoint-wide backpressure, against the real API server and the real operator: a 429 or 503
// with Retry-After holds the whole endpoint (no new attempt of any delivery, replays included,
// before the time it asked for), said by the subscription's EndpointThrottled condition (since,
// until) and an Event, by status.throttle (kept by a new leader), and by the waiting deliveries'
// condition; respectRetryAfter: false turns it off; a huge Retry-After is capped at one hour.
import { describe, expect, it } from "vitest";
import { kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, create, delivery, events, getObj, subscription, waitForPhase } from "../helpers/kube.js";
import { operatorFixture } from "../helpers/fixture.js";

const cond = (o: { status?: Record<string, any> } | undefined, type: string) => o?.status?.conditions?.find((c: { type: string }) => c.type === type);

describe("endpoint-wide Retry-After", () => {
  const f = operatorFixture("throttle", { statusIntervalMs: 300 });

  it("a 429 with Retry-After holds every delivery of the endpoint until then, with a condition, an Event and the waiting deliveries' reason", async () => {
    const { ns, op } = f;
    let first = true;
    const r = await f.receiver(() => {
      if (!first) return 200;
      first = false;
      return { status: 429, headers: { "retry-after": "4" } };
    });
    await apply(subscription(ns, "limited", { url: r.url(), maxInFlight: 1, retry: { initialBackoff: "100ms", maxBackoff: "10s" } }));
    await apply(delivery(ns, "first", "limited"));
    await r.waitForRequests(1);
    const throttledAt = r.requests[0]!.at;
    await create(Array.from({ length: 5 }, (_, i) => delivery(ns, `next-${i}`, "limited")));
    // The subscription says since when and until when.
    const sub = await waitFor(async () => {
      const s = await getObj("whsub", ns, "limited");
      return cond(s, "EndpointThrottled")?.status === "True" ? s : undefined;
    }, { description: "EndpointThrottled True" });
    const c = cond(sub, "EndpointThrottled");
    expect(c.reason).toBe("RetryAfter");
    expect(c.message).toMatch(/answered 429 with Retry-After: 4 at .*: no new attempt to it before /);
    expect(sub.status!.throttle).toMatchObject({ status: 429, retryAfter: "4" });
    const until = Date.parse(sub.status!.throttle.until);
    expect(until - Date.parse(sub.status!.throttle.since)).toBe(4_000);
    // The others wait, saying why.
    const waiting = await waitFor(async () => {
      const d = await getObj("whdel", ns, "next-0");
      return cond(d, "Succeeded")?.reason === "EndpointThrottled" ? d : undefined;
    }, { description: "next-0 waits for the endpoint" });
    expect(cond(waiting, "Succeeded").message).toContain("asked for no requests before");
    const ev = await waitFor(async () => (await events(ns, "limited")).find((e) => e.reason === "EndpointThrottled"), { description: "EndpointThrottled Event" });
    expect(ev.type).toBe("Warning");

    await waitForPhase(ns, ["first", ...Array.from({ length: 5 }, (_, i) => `next-${i}`)], "Succeeded", 30_000);
    // Nothing went to the endpoint before the time it asked for.
    const after = r.requests.slice(1);
    expect(after).toHaveLength(6);
    for (const q of after) expect(q.at).toBeGreaterThanOrEqual(throttledAt + 3_900);
    expect(Math.min(...after.map((q) => q.at))).toBeGreaterThanOrEqual(until - 50);
    await waitFor(async () => cond(await getObj("whsub", ns, "limited"), "EndpointThrottled")?.status === "False", { description: "EndpointThrottled False after the hold" });
    expect((await getObj("whsub", ns, "limited"))!.status!.throttle).toBeUndefined();
    expect(await op.metric("webhook_delivery_held_total", { subscription: "limited", reason: "retry_after" })).toBe(5);
  });

  it("a 503 with an HTTP-date holds replays too; respectRetryAfter false does not hold", async () => {
    const { ns } = f;
    let mode: "fail" | "hold" | "ok" = "fail";
    let heldAt = 0;
    const r = await f.receiver(() => {
      if (mode === "fail") return 500;
      if (mode === "hold") {
        mode = "ok";
        heldAt = Date.now();
        return { status: 503, headers: { "retry-after": new Date(Date.now() + 4_000).toUTCString() } };
      }
      return 200;
    });
    await apply([subscription(ns, "dated", { url: r.url(), retry: { maxAttempts: 1 }, circuitBreaker: { failureThreshold: 100 } }), delivery(ns, "dl-a", "dated"), delivery(ns, "dl-b", "dated")]);
    await waitForPhase(ns, ["dl-a", "dl-b"], "DeadLettered");
    mode = "hold";
    await kubectlOk(["annotate", "whdel", "dl-a", "-n", ns, "hookline.dev/replay=first replay gets a 503"]);
    await waitFor(() => heldAt > 0, { description: "the 503" });
    await kubectlOk(["annotate", "whdel", "dl-b", "-n", ns, "hookline.dev/replay=second replay must wait"]);
    await waitForPhase(ns, "dl-b", "Succeeded", 30_000);
    const replayB = r.requests.find((q) => JSON.parse(q.body).data.order === "dl-b" && q.at > heldAt)!;
    // An HTTP-date has whole seconds: the hold ends within the second before the date.
    expect(replayB.at - heldAt).toBeGreaterThanOrEqual(2_900);

    // Off: a 429 holds only the delivery that got it (its own backoff), never the endpoint.
    let n = 0;
    const free = await f.receiver(() => (n++ === 0 ? { status: 429, headers: { "retry-after": "30" } } : 200));
    await apply([subscription(ns, "ignores", { url: free.url(), retry: { respectRetryAfter: false, initialBackoff: "100ms" } }), delivery(ns, "i-0", "ignores")]);
    await free.waitForRequests(1);
    await apply(delivery(ns, "i-1", "ignores"));
    await waitForPhase(ns, ["i-0", "i-1"], "Succeeded", 20_000);
    expect(cond(await getObj("whsub", ns, "ignores"), "EndpointThrottled")).toBeUndefined();
  });

  it("caps a huge Retry-After at one hour", async () => {
    const { ns } = f;
    const r = await f.receiver(() => ({ status: 429, headers: { "retry-after": "999999999" } }));
    await apply([subscription(ns, "capped", { url: r.url() }), delivery(ns, "c-0", "capped")]);
    const s = await waitFor(async () => {
      const o = await getObj("whsub", ns, "capped");
      return o?.status?.throttle ? o : undefined;
    }, { description: "status.throttle" });
    expect(Date.parse(s.status!.throttle.until) - Date.parse(s.status!.throttle.since)).toBe(3_600_000);
    expect(s.status!.throttle.retryAfter).toBe("999999999");
  });
});
