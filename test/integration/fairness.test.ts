// Fair share of the global request slots (WEBHOOK_MAX_IN_FLIGHT) between namespaces: one
// namespace whose endpoints all hang cannot keep another namespace's healthy deliveries waiting
// once a slot frees, however much of its own work is parked ahead of them; and with slots kept
// back (an eighth of 8 or more) for a namespace that has subscriptions or had work lately, not
// even until then.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { apply, create, delivery, subscription } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";

const GLOBAL_MAX = 4;
const HANGING_SUBS = 20;
const B_DELIVERIES = 5;

describe("fair share of the global slots between namespaces", () => {
  let nsA: string;
  let nsB: string;
  let op: TestOperator;
  let hanging: Receiver;
  let healthy: Receiver;
  let releaseFirst: () => void = () => undefined;

  beforeAll(async () => {
    [nsA, nsB] = await Promise.all([createNamespace("fair-a"), createNamespace("fair-b")]);
    hanging = await Receiver.start(() => "hang");
    // B's first request is held until the test lets it go (B holds one slot meanwhile); the rest answer at once.
    const first = new Promise<void>((r) => (releaseFirst = r));
    healthy = await Receiver.start(async (req) => {
      if (req.n === 1) await first;
      return 200;
    });
    op = await startOperator({ namespaces: [nsA, nsB], env: { WEBHOOK_MAX_IN_FLIGHT: String(GLOBAL_MAX) } });
  });
  afterAll(async () => {
    releaseFirst();
    await hanging?.close(); // the hanging requests fail at once: the drain is short
    await op?.stop();
    await healthy?.close();
    await Promise.all([deleteNamespace(nsA), deleteNamespace(nsB)]);
  });

  const parkedGlobal = (key: string) =>
    op.logs.some((l) => l.includes('"msg":"planned"') && l.includes(`"delivery":"${key}"`) && l.includes('"why":"global"'));

  it("a namespace whose 20 endpoints hang does not keep another namespace's deliveries waiting", async () => {
    // B holds one slot with a request its receiver has not answered yet.
    await apply(subscription(nsB, "healthy", { url: healthy.url() }));
    await create(delivery(nsB, "b-0", "healthy"));
    await healthy.waitForRequests(1);

    // A: 20 subscriptions whose endpoints never answer (timeout 30 s), two deliveries each. A
    // takes the three free slots; the other 37 park for a global slot.
    await apply(Array.from({ length: HANGING_SUBS }, (_, i) => subscription(nsA, `hang-${i}`, { url: hanging.url(`/hang-${i}`), timeout: "30s" })));
    await create(Array.from({ length: HANGING_SUBS * 2 }, (_, i) => delivery(nsA, `a-${i}`, `hang-${i % HANGING_SUBS}`)));
    await waitFor(() => hanging.openRequests === GLOBAL_MAX - 1, { description: `${GLOBAL_MAX - 1} requests hanging at A's receiver` });
    await waitFor(() => Array.from({ length: HANGING_SUBS * 2 }, (_, i) => `${nsA}/a-${i}`).filter(parkedGlobal).length >= HANGING_SUBS * 2 - (GLOBAL_MAX - 1), {
      description: "A's other deliveries parked for a global slot",
    });

    // B's next deliveries park behind all of A's.
    await create(Array.from({ length: B_DELIVERIES }, (_, i) => delivery(nsB, `b-${i + 1}`, "healthy")));
    await waitFor(() => Array.from({ length: B_DELIVERIES }, (_, i) => `${nsB}/b-${i + 1}`).every(parkedGlobal), { description: "B's deliveries parked for a global slot" });

    // B's slot frees: B is below its share (2 of 4) and A above it, so the slot goes to B, and
    // stays with B until B has nothing left; A's hanging requests are still hanging (30 s).
    releaseFirst();
    await healthy.waitForRequests(1 + B_DELIVERIES, 20_000);
    expect(hanging.openRequests).toBeGreaterThanOrEqual(GLOBAL_MAX - 1);
    expect(hanging.requests.length).toBe(hanging.openRequests); // none of A's requests ended yet
  });
});

describe.each([
  { that: "had work a moment ago", delivered: true },
  // A namespace whose last delivery was an hour ago, or that never had one, is the same to the slots.
  { that: "has a subscription but no work since the operator started", delivered: false },
])("slots kept back for a namespace that $that", ({ delivered }) => {
  const MAX = 16; // an eighth, 2 slots, is kept back
  let nsA: string;
  let nsB: string;
  let op: TestOperator;
  let hanging: Receiver;
  let healthy: Receiver;

  beforeAll(async () => {
    [nsA, nsB] = await Promise.all([createNamespace("kept-a"), createNamespace("kept-b")]);
    hanging = await Receiver.start(() => "hang");
    healthy = await Receiver.start(() => 200);
    op = await startOperator({ namespaces: [nsA, nsB], env: { WEBHOOK_MAX_IN_FLIGHT: String(MAX) } });
  });
  afterAll(async () => {
    await hanging?.close();
    await op?.stop();
    await healthy?.close();
    await Promise.all([deleteNamespace(nsA), deleteNamespace(nsB)]);
  });

  it("a namespace whose endpoints hang holds 14 of 16 slots; the other's next deliveries go at once", async () => {
    await apply(subscription(nsB, "healthy", { url: healthy.url() }));
    if (delivered) {
      await create(delivery(nsB, "b-0", "healthy"));
      await healthy.waitForRequests(1);
    }
    const before = delivered ? 1 : 0;

    // A: 20 subscriptions whose endpoints never answer (timeout 60 s), two deliveries each.
    await apply(Array.from({ length: HANGING_SUBS }, (_, i) => subscription(nsA, `hang-${i}`, { url: hanging.url(`/hang-${i}`), timeout: "60s" })));
    await create(Array.from({ length: HANGING_SUBS * 2 }, (_, i) => delivery(nsA, `a-${i}`, `hang-${i % HANGING_SUBS}`)));
    await waitFor(() => hanging.openRequests === MAX - 2, { description: `${MAX - 2} requests hanging at A's receiver` });

    // B's next deliveries take the two slots kept back, long before any of A's requests ends.
    await create(Array.from({ length: B_DELIVERIES }, (_, i) => delivery(nsB, `b-${i + 1}`, "healthy")));
    await healthy.waitForRequests(before + B_DELIVERIES, 20_000);
    expect(hanging.openRequests).toBe(MAX - 2);
    expect(hanging.requests.length).toBe(hanging.openRequests); // none of A's requests ended yet
  });
});
