// The longest status the operator can produce, written to the real API server: every string
// field of both kinds filled past its limit with multi-byte text, every list past its length,
// then fitted by the operator's one status writer. The API server must take it; unfitted, it
// must refuse it (so this test fails when a limit is missed). Events likewise.
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inject } from "vitest";
import { z } from "zod";
import { deliveryStatusSchema } from "../../src/api/delivery.js";
import { API_VERSION } from "../../src/api/names.js";
import { STATUS_FITTERS } from "../../src/api/status-limits.js";
import { subscriptionStatusSchema } from "../../src/api/subscription.js";
import { DELIVERIES, SUBSCRIPTIONS } from "../../src/delivery/objects.js";
import { ApiError, KubeClient } from "../../src/kube/client.js";
import { EventRecorder } from "../../src/kube/events.js";
import { StatusWriter } from "../../src/kube/status-writer.js";
import { createLogger } from "../../src/observability/logger.js";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { apply, delivery, events, getObj, subscription } from "../helpers/kube.js";

const wellFormed = (s: string) => Buffer.from(s, "utf8").toString("utf8") === s;

/** Mixed 1-, 2-, 3- and 4-byte characters (a surrogate pair in UTF-16). */
const FILLER = "aé日😀";

function filler(prefix: string, units: number): string {
  let s = prefix;
  while (s.length < units) s += FILLER;
  return wellFormed(s.slice(0, units)) ? s.slice(0, units) : s.slice(0, units - 1);
}

interface Def {
  type: string;
  innerType?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  element?: z.ZodType;
  valueType?: z.ZodType;
  entries?: Record<string, string>;
  checks?: Array<{ _zod: { def: { check: string; maximum?: number; value?: number } } }>;
}
const defOf = (s: z.ZodType) => (s as unknown as { _zod: { def: Def } })._zod.def;
const maxOf = (d: Def) => d.checks?.find((c) => c._zod.def.check === "max_length")?._zod.def.maximum;

/** A value of `schema` with every string and list longer than its limit (`i` keeps list-map keys apart). */
function oversized(schema: z.ZodType, i = 0): unknown {
  const d = defOf(schema);
  switch (d.type) {
    case "optional":
    case "default":
    case "nullable":
      return oversized(d.innerType!, i);
    case "object":
      return Object.fromEntries(Object.entries(d.shape!).map(([k, v]) => [k, oversized(v, i)]));
    case "array":
      return Array.from({ length: (maxOf(d) ?? 3) + 2 }, (_, j) => oversized(d.element!, j));
    case "record":
      return { k: oversized(d.valueType!, i) };
    case "enum":
      return Object.values(d.entries!)[i % Object.values(d.entries!).length];
    case "string":
      if ((z.globalRegistry.get(schema) as { format?: string } | undefined)?.format === "date-time") return "2026-12-01T00:00:00Z";
      return filler(`T${i}-`, (maxOf(d) ?? 2000) + 100);
    case "int":
    case "number":
      return d.checks?.find((c) => c._zod.def.check === "greater_than")?._zod.def.value ?? 1;
    case "boolean":
      return true;
    default:
      throw new Error(`oversized: no rule for ${d.type}`);
  }
}

describe("status limits against the real API server", () => {
  let ns: string;
  let client: KubeClient;
  beforeAll(async () => {
    ns = await createNamespace("limits");
    const kc = new KubeConfig();
    kc.loadFromFile(inject("kubeconfig"));
    client = await KubeClient.create(kc);
    await apply([subscription(ns, "sub", { url: "https://hooks.example.com/x" }), delivery(ns, "del", "sub")]);
  });
  afterAll(async () => {
    await client?.destroy();
    await deleteNamespace(ns);
  });

  for (const [kind, type, schema, name] of [
    ["WebhookDelivery", DELIVERIES, deliveryStatusSchema, "del"],
    ["WebhookSubscription", SUBSCRIPTIONS, subscriptionStatusSchema, "sub"],
  ] as const) {
    it(`${kind}: the fitted longest status is accepted; unfitted it is refused`, async () => {
      const status = oversized(schema);
      const raw = new StatusWriter(client);
      const err = await raw.patchStatus(type, ns, name, status).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).isRefused).toBe(true);

      const fitted = new StatusWriter(client, STATUS_FITTERS);
      const stored = await fitted.patchStatus(type, ns, name, status);
      expect(schema.safeParse(stored.status).success).toBe(true);
      expect(JSON.stringify(stored.status)).toContain("…");
    });
  }

  it("an Event's message is cut to 1,024 bytes and recorded", async () => {
    const recorder = new EventRecorder(client, createLogger({ level: "silent" }), { component: "hookline-test" });
    const obj = await getObj("whdel", ns, "del");
    recorder.record({ apiVersion: API_VERSION, kind: "WebhookDelivery", namespace: ns, name: "del", uid: obj!.metadata.uid }, "Warning", "LongMessage", filler("m-", 5000));
    await recorder.flush();
    const e = await waitFor(async () => (await events(ns, "del")).find((x) => x.reason === "LongMessage"), { description: "LongMessage Event" });
    expect(Buffer.byteLength(e.message)).toBeLessThanOrEqual(1024);
    expect(e.message.startsWith("m-aé日😀")).toBe(true);
  });
});
