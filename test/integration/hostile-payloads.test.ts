// Hostile input end to end: a real API server, a real receiver, the operator in-process.
// - Payload text: 40 deliveries of ~60 KiB of mixed multi-byte text (the API server sends such
//   watch events in several chunks, cut anywhere, inside characters too) reach the receiver
//   byte-exact and validly signed.
// - Headers that would make every request fail are refused by the API server, naming the header.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNamespace, deleteNamespace, kubectl, kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, create, delivery, secret, subscription, TEST_SECRET } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";

const COUNT = 40;
const SAMPLE = "Zoë 日本語 😀🎉 Ωμέγα αλφάβητο שלום עולם café naïve — ";

/** ~60 KiB of mixed text, shifted per delivery so chunk boundaries fall in different places. */
function text(i: number): string {
  const unit = Buffer.byteLength(SAMPLE);
  return `${"x".repeat(i)}${SAMPLE.repeat(Math.floor((60 * 1024) / unit))}#${i}`;
}

describe("hostile input", () => {
  let ns: string;
  let op: TestOperator;
  let receiver: Receiver;

  beforeAll(async () => {
    ns = await createNamespace("hostile");
    receiver = await Receiver.start(() => 200);
    op = await startOperator({ namespaces: [ns] });
  });
  afterAll(async () => {
    await op?.stop();
    await receiver?.close();
    if (ns) await deleteNamespace(ns);
  });

  it(`${COUNT} deliveries of ~60 KiB multi-byte text reach the receiver byte-exact, with no U+FFFD, validly signed`, async () => {
    await apply([secret(ns, "signing"), subscription(ns, "utf8", { url: receiver.url("/utf8"), secretRef: { name: "signing" } })]);
    await waitFor(() => op.op.caches.subscriptions.size > 0, { description: "the subscription in the operator's cache" });
    // Payload keys in alphabetical order: the API server stores objects with sorted keys.
    const payload = (i: number) => ({ n: i, text: text(i) });
    await create(Array.from({ length: COUNT }, (_, i) => delivery(ns, `utf8-${i}`, "utf8", { eventId: `evt-utf8-${i}`, payload: payload(i) })));

    const got = await receiver.waitForRequests(COUNT, 120_000);
    await waitFor(async () => (await kubectlOk(["get", "whdel", "-n", ns, "--field-selector=status.phase=Succeeded", "-o", "name"])).trim().split("\n").length === COUNT, {
      description: `${COUNT} deliveries Succeeded`,
      timeoutMs: 60_000,
    });
    const created = new Map(
      (await kubectlOk(["get", "whdel", "-n", ns, "-o", 'jsonpath={range .items[*]}{.spec.eventId} {.metadata.creationTimestamp}{"\\n"}{end}']))
        .trim()
        .split("\n")
        .map((line) => line.split(" ") as [string, string]),
    );
    expect(got).toHaveLength(COUNT);
    const results = got.map((r) => {
      const id = String(r.headers["webhook-id"]);
      const i = Number(id.replace("evt-utf8-", ""));
      const expected = Buffer.from(JSON.stringify({ id, type: "order.paid", timestamp: created.get(id), created_at: created.get(id), data: payload(i) }), "utf8");
      let signed = false;
      try {
        signed = (Receiver.verify(r, TEST_SECRET) as { id?: string }).id === id;
      } catch {
        signed = false;
      }
      return { id, exact: r.bytes.equals(expected), replaced: r.body.includes("\uFFFD"), signed, bytes: r.bytes.length };
    });
    const summary = `${results.filter((r) => r.exact).length} of ${COUNT} byte-exact, ${results.filter((r) => r.replaced).length} with U+FFFD, ${results.filter((r) => r.signed).length} validly signed`;
    expect(summary).toBe(`${COUNT} of ${COUNT} byte-exact, 0 with U+FFFD, ${COUNT} validly signed`);
    expect(Math.min(...results.map((r) => r.bytes))).toBeGreaterThan(60 * 1024);
    expect(new Set(got.map((r) => r.headers["webhook-id"])).size).toBe(COUNT);
  });

  it.each([
    ["Connection", "close", /header "Connection" may not be set: it controls the connection/],
    ["Expect", "100-continue", /header "Expect" may not be set: it controls the connection/],
    ["Proxy-Authorization", "Basic eA==", /header "Proxy-Authorization" may not be set/],
    ["X-Tenant", "acme\u0007", /header "X-Tenant": its value has a character other than tab and printable ASCII/],
  ])("a subscription with header %s is refused by the API server, naming the header", async (name, value, message) => {
    const r = await kubectl(["create", "-f", "-"], { input: JSON.stringify(subscription(ns, `bad-${name.toLowerCase()}`, { url: receiver.url(), headers: { [name]: value } })) });
    expect(r.code, `accepted: ${r.stdout}`).not.toBe(0);
    expect(r.stderr).toContain("spec.headers");
    expect(r.stderr).toMatch(message);
  });
});
