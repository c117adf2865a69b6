// The CRDs as users meet them: through the real kube-apiserver and the real kubectl. Printer
// columns, short names, the category, kubectl explain, server-side defaults, field selectors,
// the idempotency key, and the invalid-spec table (test/helpers/crd-cases.ts), each case
// refused by the API server with a message that names the field.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deliveryCrd, subscriptionCrd } from "../../src/api/crd.js";
import { subscriptionSpecSchema } from "../../src/api/subscription.js";
import { createNamespace, deleteNamespace, kubectl, kubectlOk } from "../helpers/cluster.js";
import { CASE_KINDS, CREDENTIAL_CASES, INVALID_SPEC_CASES, VALID_HEADERS, at, findEnforcer, prepareCase, refusalCauses, schemaNode, submitCase } from "../helpers/crd-cases.js";
import type { CrdObject, InvalidSpecCase, SchemaNode } from "../helpers/crd-cases.js";
import { apply, delivery, getObj, rawSubscription, subscription } from "../helpers/kube.js";

const SUBSCRIPTIONS = "webhooksubscriptions.hookline.dev";
const DELIVERIES = "webhookdeliveries.hookline.dev";
const REPLAYS = "webhookreplays.hookline.dev";
const API_VERSION = "hookline.dev/v1alpha1";

interface InstalledCrd extends CrdObject {
  status: { conditions: { type: string; status: string }[]; acceptedNames: { shortNames?: string[]; categories?: string[] } };
}

async function getCrd(name: string): Promise<InstalledCrd> {
  return JSON.parse(await kubectlOk(["get", "crd", name, "-o", "json"])) as InstalledCrd;
}

/**
 * Splits `kubectl get` table output into rows of cells, by the column offsets of the header
 * (cells may be empty, and header names may contain one space: "DEAD LETTERS").
 */
function parseTable(out: string): { headers: string[]; rows: Record<string, string>[] } {
  const lines = out.split("\n").filter((l) => l.trim() !== "");
  const header = lines[0] ?? "";
  const columns = [...header.matchAll(/\S+(?: \S+)*/g)].map((m) => ({ name: m[0], start: m.index }));
  const rows = lines.slice(1).map((line) =>
    Object.fromEntries(
      columns.map((c, i) => {
        const end = i + 1 < columns.length ? columns[i + 1]!.start : line.length;
        return [c.name, line.slice(c.start, end).trim()];
      }),
    ),
  );
  return { headers: columns.map((c) => c.name), rows };
}

async function patchStatus(kind: string, ns: string, name: string, status: unknown): Promise<void> {
  await kubectlOk(["patch", kind, name, "-n", ns, "--subresource=status", "--type=merge", "-p", JSON.stringify({ status })]);
}

const names = (out: string) =>
  out
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean)
    .sort();

describe("CRDs through the real API server and kubectl", () => {
  let ns: string;

  beforeAll(async () => {
    ns = await createNamespace("crds");
  });
  afterAll(async () => {
    if (ns) await deleteNamespace(ns);
  });

  it("the three CRDs are Established, with short names whsub/whdel/whrep and the category hookline", async () => {
    for (const [name, short] of [
      [SUBSCRIPTIONS, "whsub"],
      [DELIVERIES, "whdel"],
      [REPLAYS, "whrep"],
    ] as const) {
      const crd = await getCrd(name);
      const cond = (type: string) => crd.status.conditions.find((c) => c.type === type)?.status;
      expect(cond("Established"), name).toBe("True");
      expect(cond("NamesAccepted"), name).toBe("True");
      expect(crd.status.acceptedNames.shortNames).toEqual([short]);
      expect(crd.status.acceptedNames.categories).toEqual(["hookline"]);
    }
    // Discovery, as kubectl sees it.
    const resources = await kubectlOk(["api-resources", "--api-group=hookline.dev", "--no-headers"]);
    expect(resources).toMatch(/^webhookdeliveries\s+whdel\s+hookline\.dev\/v1alpha1\s+true\s+WebhookDelivery\s*$/m);
    expect(resources).toMatch(/^webhooksubscriptions\s+whsub\s+hookline\.dev\/v1alpha1\s+true\s+WebhookSubscription\s*$/m);
    expect(resources).toMatch(/^webhookreplays\s+whrep\s+hookline\.dev\/v1alpha1\s+true\s+WebhookReplay\s*$/m);
    expect(names(await kubectlOk(["api-resources", "--categories=hookline", "-o", "name"]))).toEqual([DELIVERIES, REPLAYS, SUBSCRIPTIONS]);
  });

  it("kubectl get hookline lists both kinds; the short names work", async () => {
    await apply([subscription(ns, "cat-acme", { url: "https://hooks.acme.example/orders" }), delivery(ns, "cat-evt-1", "cat-acme")]);
    expect(names(await kubectlOk(["get", "hookline", "-n", ns, "-o", "name"]))).toEqual([
      "webhookdelivery.hookline.dev/cat-evt-1",
      "webhooksubscription.hookline.dev/cat-acme",
    ]);
    expect(names(await kubectlOk(["get", "whsub", "-n", ns, "-o", "name"]))).toContain("webhooksubscription.hookline.dev/cat-acme");
    expect(names(await kubectlOk(["get", "whdel", "-n", ns, "-o", "name"]))).toContain("webhookdelivery.hookline.dev/cat-evt-1");
  });

  it("printer columns of whsub: the contract's headers, and the status values", async () => {
    const name = "cols-acme";
    await apply(subscription(ns, name, { url: "https://hooks.acme.example/cols" }));
    const get = async (wide = false) => parseTable(await kubectlOk(["get", "whsub", name, "-n", ns, ...(wide ? ["-o", "wide"] : [])]));

    const before = await get();
    expect(before.headers).toEqual(["NAME", "URL", "READY", "BREAKER", "HEALTH", "PENDING", "DEAD LETTERS", "AGE"]);
    expect(before.rows).toHaveLength(1);
    expect(before.rows[0]).toMatchObject({ NAME: name, URL: "https://hooks.acme.example/cols", READY: "", BREAKER: "", PENDING: "" });

    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    await patchStatus("whsub", ns, name, {
      conditions: [{ type: "Ready", status: "True", reason: "Accepted", lastTransitionTime: now }],
      breaker: { state: "Open", consecutiveFailures: 5, openedAt: now },
      health: { state: "Degraded", consecutiveFailures: 5, totalAttempts: 9, totalFailures: 5 },
      deliveries: { pending: 3, succeeded: 4, deadLettered: 2, discarded: 0 },
    });
    const after = await get();
    expect(after.rows[0]).toMatchObject({
      NAME: name,
      URL: "https://hooks.acme.example/cols",
      READY: "True",
      BREAKER: "Open",
      HEALTH: "Degraded",
      PENDING: "3",
      "DEAD LETTERS": "2",
    });
    expect(after.rows[0]!.AGE).toMatch(/^\d+[smhd]/);

    const wide = await get(true);
    expect(wide.headers).toEqual(["NAME", "URL", "READY", "BREAKER", "HEALTH", "PENDING", "DEAD LETTERS", "PAUSED", "AGE"]);
    expect(wide.rows[0]!.PAUSED).toBe("false");
  });

  it("printer columns of whdel: the contract's headers, and the status values", async () => {
    const name = "cols-evt-1";
    await apply(delivery(ns, name, "cols-acme", { eventType: "order.refunded" }));
    const get = async (wide = false) => parseTable(await kubectlOk(["get", "whdel", name, "-n", ns, ...(wide ? ["-o", "wide"] : [])]));

    const before = await get();
    expect(before.headers).toEqual(["NAME", "SUBSCRIPTION", "EVENT TYPE", "PHASE", "ATTEMPTS", "LAST STATUS", "NEXT ATTEMPT", "AGE"]);
    expect(before.rows[0]).toMatchObject({ NAME: name, SUBSCRIPTION: "cols-acme", "EVENT TYPE": "order.refunded", PHASE: "", ATTEMPTS: "" });

    const started = new Date(Date.now() - 60_000).toISOString().replace(/\.\d+Z$/, "Z");
    // In the future, as it is while a delivery waits: it must print as a time, not "<invalid>".
    const next = new Date(Date.now() + 10 * 60_000).toISOString().replace(/\.\d+Z$/, "Z");
    await patchStatus("whdel", ns, name, {
      phase: "Retrying",
      attempts: 2,
      nextAttemptAt: next,
      lastAttempt: { number: 2, startedAt: started, durationMs: 12, responseStatus: 503, outcome: "Failed", reason: "http_5xx" },
    });
    const retrying = await get();
    expect(retrying.rows[0]).toMatchObject({
      NAME: name,
      SUBSCRIPTION: "cols-acme",
      "EVENT TYPE": "order.refunded",
      PHASE: "Retrying",
      ATTEMPTS: "2",
      "LAST STATUS": "503",
      "NEXT ATTEMPT": next,
    });

    const finished = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    // A merge patch with null removes nextAttemptAt, as the operator does when a delivery finishes.
    await patchStatus("whdel", ns, name, {
      phase: "DeadLettered",
      attempts: 6,
      nextAttemptAt: null,
      finishedAt: finished,
      replays: 1,
      lastAttempt: { number: 6, startedAt: finished, durationMs: 3, responseStatus: 500, outcome: "Failed", reason: "http_5xx" },
      deadLetter: { at: finished, reason: "Exhausted" },
      conditions: [{ type: "Succeeded", status: "False", reason: "Exhausted", lastTransitionTime: finished }],
    });
    const wide = await get(true);
    expect(wide.headers).toEqual([
      "NAME",
      "SUBSCRIPTION",
      "EVENT TYPE",
      "PHASE",
      "ATTEMPTS",
      "LAST STATUS",
      "NEXT ATTEMPT",
      "AGE",
      "REASON",
      "FINISHED",
      "REPLAYS",
      "DEAD-LETTERED",
      "ORDERING KEY",
      "ORDERING VALUE",
      "LAST ERROR",
    ]);
    expect(wide.rows[0]).toMatchObject({ PHASE: "DeadLettered", ATTEMPTS: "6", "LAST STATUS": "500", "NEXT ATTEMPT": "", REASON: "Exhausted", REPLAYS: "1", "LAST ERROR": "http_5xx" });
    // The exact finish time (RFC 3339), not an age: the terminal index reads this cell.
    expect(wide.rows[0]!.FINISHED).toMatch(/^\d{4}-\d{2}-\d{2}T/);
  });

  it("kubectl explain prints the schema's descriptions", async () => {
    // kubectl wraps descriptions at 80 columns: compare with whitespace collapsed.
    const explain = async (...args: string[]) => (await kubectlOk(["explain", ...args])).replace(/\s+/g, " ");
    const retry = await explain("whsub.spec.retry");
    expect(retry).toContain("KIND: WebhookSubscription");
    expect(retry).toContain("FIELD: retry <Object>");
    expect(retry).toContain("Exponential backoff with jitter between attempts: initialBackoff * multiplier^n, capped at maxBackoff.");
    expect(retry).toContain("maxAttempts <integer> Attempts in all, the first try included.");
    expect(retry).toContain("initialBackoff <string> Delay after the first failed attempt. A duration such as 250ms, 10s or 1h30m, from 10ms to 1h.");
    expect(retry).toContain("respectRetryAfter <boolean> Honour a Retry-After header on 429 and 503");

    const del = await explain("whdel.spec");
    expect(del).toContain("KIND: WebhookDelivery");
    expect(del).toContain("DESCRIPTION: One event for one subscription. Immutable after create.");
    expect(del).toContain("subscriptionRef <Object> -required- The subscription this event is delivered to.");
    expect(del).toContain("eventType <string> -required- Type of the event, e.g. order.paid.");
    expect(del).toContain("eventId <string> Id of the event, sent as the webhook id (the webhook-id header) on every attempt and replay: printable ASCII, spaces only between other characters, at most 256 characters. Default: metadata.uid.");
    expect(del).toContain("payload <Object> The event data: any JSON value");

    const top = await explain("whsub");
    expect(top).toContain("A WebhookSubscription (hookline.dev/v1alpha1) tells Hookline where and how to deliver one endpoint's webhooks");

    // --recursive lists every field of the spec, nested ones included.
    const recursive = await kubectlOk(["explain", "whsub.spec", "--recursive"]);
    const fields = [...recursive.matchAll(/^\s+([A-Za-z][A-Za-z0-9]*)\s+<[^>]+>/gm)].map((m) => m[1]);
    const schemaFields: string[] = [];
    const walk = (node: SchemaNode) => {
      for (const [key, child] of Object.entries(node.properties ?? {})) {
        schemaFields.push(key);
        walk(child);
      }
      // The fields of list items (headersFrom[].name) are listed too.
      if (node.items) walk(node.items);
    };
    walk(schemaNode(subscriptionCrd(), at("spec")));
    expect(schemaFields.length).toBeGreaterThan(30);
    expect(fields.sort()).toEqual(schemaFields.sort());
  });

  it("the API server applies the defaults; timeout and breaker thresholds stay unset (the operator's environment decides)", async () => {
    await kubectlOk(["create", "-f", "-"], {
      input: JSON.stringify(rawSubscription(ns, "defaults-minimal", { url: "https://hooks.acme.example/minimal" })),
    });
    const minimal = await getObj("whsub", ns, "defaults-minimal");
    expect(minimal!.spec).toEqual({
      url: "https://hooks.acme.example/minimal",
      signature: { scheme: "StandardWebhooks", signedContent: "TimestampAndBody" },
      retry: { maxAttempts: 6, initialBackoff: "1s", multiplier: 2, maxBackoff: "30s", jitterPercent: 10, respectRetryAfter: true },
      circuitBreaker: { whenOpen: "Defer" },
      maxInFlight: 10,
      deadLetter: { maxEntries: 10000, maxReplays: 5 },
      retention: { succeeded: "1h", deadLettered: "720h" },
      paused: false,
    });
    expect(minimal!.spec).not.toHaveProperty("timeout");
    expect(minimal!.spec.circuitBreaker).not.toHaveProperty("failureThreshold");
    expect(minimal!.spec.circuitBreaker).not.toHaveProperty("successThreshold");
    expect(minimal!.spec.circuitBreaker).not.toHaveProperty("cooldown");

    // Defaults fill in the gaps of objects given in part, too.
    await kubectlOk(["create", "-f", "-"], {
      input: JSON.stringify(
        subscription(ns, "defaults-partial", {
          url: "https://hooks.acme.example/partial",
          secretRef: { name: "signing" },
          retry: { maxAttempts: 3 },
          circuitBreaker: { failureThreshold: 7 },
          deadLetter: { maxReplays: 0 },
          retention: { succeeded: "0s" },
        }),
      ),
    });
    const partial = await getObj("whsub", ns, "defaults-partial");
    expect(partial!.spec).toMatchObject({
      secretRef: { name: "signing", key: "secret" },
      retry: { maxAttempts: 3, initialBackoff: "1s", multiplier: 2, maxBackoff: "30s", jitterPercent: 10, respectRetryAfter: true },
      circuitBreaker: { failureThreshold: 7, whenOpen: "Defer" },
      deadLetter: { maxEntries: 10000, maxReplays: 0 },
      retention: { succeeded: "0s", deadLettered: "720h" },
    });
    expect(partial!.spec.secretRef).not.toHaveProperty("previousKey");
  });

  it("field selectors on spec.subscriptionRef.name, spec.eventType and status.phase filter, alone and combined", async ({ onTestFinished }) => {
    // A namespace of its own: the contract's query below runs without the test label.
    const ns = await createNamespace("crds-fieldselectors");
    onTestFinished(() => deleteNamespace(ns));
    const sel = async (selector: string) =>
      names(await kubectlOk(["get", "whdel", "-n", ns, "-l", "test=fieldselectors", "--field-selector", selector, "-o", "name"])).map((n) =>
        n.replace(/^webhookdelivery\.hookline\.dev\//, ""),
      );
    const labelled = (name: string, sub: string, eventType: string) => {
      const d = delivery(ns, name, sub, { eventType }) as { metadata: Record<string, unknown> };
      d.metadata.labels = { test: "fieldselectors" };
      return d;
    };
    await apply([
      labelled("fs-acme-paid", "fs-acme", "order.paid"),
      labelled("fs-acme-refunded", "fs-acme", "order.refunded"),
      labelled("fs-globex-paid", "fs-globex", "order.paid"),
      labelled("fs-globex-invoice", "fs-globex", "invoice.sent"),
    ]);
    const t = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    await patchStatus("whdel", ns, "fs-acme-paid", { phase: "Succeeded", attempts: 1, finishedAt: t });
    await patchStatus("whdel", ns, "fs-acme-refunded", { phase: "DeadLettered", attempts: 6, deadLetter: { at: t, reason: "Exhausted" } });
    await patchStatus("whdel", ns, "fs-globex-paid", { phase: "DeadLettered", attempts: 1, deadLetter: { at: t, reason: "Gone" } });
    await patchStatus("whdel", ns, "fs-globex-invoice", { phase: "Retrying", attempts: 2 });

    expect(await sel("spec.subscriptionRef.name=fs-acme")).toEqual(["fs-acme-paid", "fs-acme-refunded"]);
    expect(await sel("spec.subscriptionRef.name!=fs-acme")).toEqual(["fs-globex-invoice", "fs-globex-paid"]);
    expect(await sel("spec.eventType=order.paid")).toEqual(["fs-acme-paid", "fs-globex-paid"]);
    expect(await sel("spec.eventType=invoice.sent")).toEqual(["fs-globex-invoice"]);
    expect(await sel("status.phase=DeadLettered")).toEqual(["fs-acme-refunded", "fs-globex-paid"]);
    expect(await sel("status.phase=Retrying")).toEqual(["fs-globex-invoice"]);
    expect(await sel("status.phase=Pending")).toEqual([]);
    expect(await sel("spec.subscriptionRef.name=fs-globex,status.phase=DeadLettered")).toEqual(["fs-globex-paid"]);
    expect(await sel("spec.eventType=order.paid,status.phase!=DeadLettered")).toEqual(["fs-acme-paid"]);
    expect(await sel("spec.subscriptionRef.name=fs-acme,spec.eventType=order.paid,status.phase=Succeeded")).toEqual(["fs-acme-paid"]);

    // The contract's own example, without the test label, as a user types it.
    const deadLettered = names(await kubectlOk(["get", "whdel", "-n", ns, "--field-selector", "status.phase=DeadLettered", "-o", "name"]));
    expect(deadLettered).toEqual(["webhookdelivery.hookline.dev/fs-acme-refunded", "webhookdelivery.hookline.dev/fs-globex-paid"]);
    const table = parseTable(await kubectlOk(["get", "whdel", "-n", ns, "--field-selector", "status.phase=DeadLettered"]));
    expect(table.rows.map((r) => r.PHASE)).toEqual(["DeadLettered", "DeadLettered"]);

    // Only the declared fields are selectable.
    const refused = await kubectl(["get", "whdel", "-n", ns, "--field-selector", "spec.eventId=evt-1"]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain("field label not supported: spec.eventId");
  });

  it("creating the same delivery name twice is refused (AlreadyExists): the name is the idempotency key", async () => {
    const first = delivery(ns, "evt-1001-acme", "acme", { eventId: "evt-1001", payload: { order: 1001 } });
    const second = delivery(ns, "evt-1001-acme", "acme", { eventId: "evt-1001", payload: { order: 9999 } });
    await kubectlOk(["create", "-f", "-"], { input: JSON.stringify(first) });
    const again = await kubectl(["create", "-f", "-"], { input: JSON.stringify(second) });
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain("(AlreadyExists)");
    expect(again.stderr).toContain(`${DELIVERIES} "evt-1001-acme" already exists`);
    expect((await getObj("whdel", ns, "evt-1001-acme"))!.spec.payload).toEqual({ order: 1001 });
  });

  describe("invalid specs are refused by the API server, naming the field", () => {
    it("the table has at least 25 distinct cases, and each names a rule present in the installed CRDs", async () => {
      expect(INVALID_SPEC_CASES.length).toBeGreaterThanOrEqual(25);
      expect(new Set(INVALID_SPEC_CASES.map((c) => c.name)).size).toBe(INVALID_SPEC_CASES.length);
      expect(new Set(INVALID_SPEC_CASES.map((c) => JSON.stringify([c.spec, c.update]))).size).toBe(INVALID_SPEC_CASES.length);
      const installed = { subscription: await getCrd(SUBSCRIPTIONS), delivery: await getCrd(DELIVERIES) };
      const generated = { subscription: subscriptionCrd(), delivery: deliveryCrd() };
      for (const c of INVALID_SPEC_CASES) {
        // The installed CRD is the generated one: the table describes what users run.
        expect(findEnforcer(installed[c.kind], c.enforcedBy), c.name).toBe(findEnforcer(generated[c.kind], c.enforcedBy));
      }
    });

    it("accepts ordinary headers (tokens that only look like refused ones, tabs and printable ASCII values)", async () => {
      await kubectlOk(["create", "-f", "-"], { input: JSON.stringify(subscription(ns, "valid-headers", { url: "https://hooks.example.com/orders", headers: VALID_HEADERS })) });
      expect((await getObj("whsub", ns, "valid-headers"))!.spec.headers).toEqual(VALID_HEADERS);
    });

    it("accepts the longest stored trace contexts and the odd characters W3C allows, as they are", async () => {
      const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03";
      // 32 entries in exactly 512 characters; keys with @, *, / and digits first; values with inner
      // and leading spaces and every other printable character but "," and "=".
      const keys = ["0t@sys", "a*/-_b", ...Array.from({ length: 30 }, (_, i) => `k${i}`)];
      const odd = " !\"#$%&'()*+-./:;<>?[\\]^`{|}~";
      let tracestate = keys.map((k, i) => `${k}=${odd.slice(i % 26, (i % 26) + 4)}v`).join(",");
      tracestate += "x".repeat(512 - tracestate.length);
      expect(tracestate.length).toBe(512);
      for (const [name, traceContext] of [
        ["trace-longest", { traceparent, tracestate }],
        ["trace-max-value", { traceparent, tracestate: `k=${"v".repeat(255)}!,${"a".repeat(251)}=v` }],
        ["trace-parent-only", { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00" }],
      ] as const) {
        await kubectlOk(["create", "-f", "-"], { input: JSON.stringify(delivery(ns, name, "acme", { traceContext })) });
        expect((await getObj("whdel", ns, name))!.spec.traceContext, name).toEqual(traceContext);
      }
    });

    it("accepts event ids a header carries unchanged: printable ASCII up to 256 characters, inner spaces included", async () => {
      const printable = Array.from({ length: 0x7e - 0x21 + 1 }, (_, i) => String.fromCharCode(0x21 + i)).join("");
      for (const [name, eventId] of [
        ["id-every-printable", printable],
        ["id-inner-spaces", "order 1001 paid"],
        ["id-longest", "i".repeat(256)],
      ] as const) {
        await kubectlOk(["create", "-f", "-"], { input: JSON.stringify(delivery(ns, name, "acme", { eventId })) });
        expect((await getObj("whdel", ns, name))!.spec.eventId, name).toBe(eventId);
      }
    });

    it("accepts every receiver-credential field at once, and writes their defaults", async () => {
      const spec = {
        url: "https://hooks.example.com/orders",
        headers: { "X-Tenant": "acme" },
        headersFrom: [{ name: "X-Api-Key", secretKeyRef: { name: "tenant-token", key: "api-key" } }],
        tls: { clientCertificateSecretRef: { name: "client-cert" }, caBundleSecretRef: { name: "receiver-ca" } },
        oauth2: { tokenURL: "https://auth.example.com/oauth/token", clientIdSecretRef: { name: "oauth", key: "client-id" }, clientSecretSecretRef: { name: "oauth", key: "client-secret" }, scopes: ["webhooks:write"], audience: "https://hooks.example.com" },
        proxy: { url: "http://egress-proxy.infra.svc:3128" },
      };
      await kubectlOk(["create", "-f", "-"], { input: JSON.stringify(subscription(ns, "all-credentials", spec)) });
      const stored = (await getObj("whsub", ns, "all-credentials"))!.spec as Record<string, any>;
      expect(stored).toMatchObject(spec);
      expect(stored.tls.caBundleSecretRef.key).toBe("ca.crt");
      expect(stored.oauth2.clientAuthentication).toBe("ClientSecretBasic");
    });

    it.concurrent.for(INVALID_SPEC_CASES.map((c, index) => ({ ...c, index })))(
      "refuses $name",
      async ({ index: i, ...c }: InvalidSpecCase & { index: number }, { expect }) => {
        const target = { apiVersion: API_VERSION, kind: CASE_KINDS[c.kind], namespace: ns, name: `invalid-${i}` };
        await prepareCase(c, target);
        const r = await submitCase(c, target, { dryRun: false });
        expect(r.code, `accepted: ${r.stdout}`).not.toBe(0);
        const causes = refusalCauses(r.stderr);
        expect(causes, r.stderr).toHaveLength(1);
        expect(causes[0]!.startsWith(`${c.field}: `), causes[0]).toBe(true);
        expect(causes[0]).toContain(c.message);
        const stored = await getObj(c.kind === "subscription" ? "whsub" : "whdel", ns, target.name);
        if (c.update) expect(stored?.spec, "a refused update leaves the object as it was").toEqual(c.spec);
        else expect(stored, "a refused create leaves nothing behind").toBeUndefined();
      },
    );
  });
});

describe("the operator's zod refuses the receiver-credential cases the CRD refuses, at the same field", () => {
  // "spec.headersFrom[1].name" -> ["headersFrom", 1, "name"]
  const pathOf = (field: string) =>
    field
      .replace(/^spec\.?/, "")
      .split(/\.|\[(\d+)\]/)
      .filter((p) => p !== undefined && p !== "")
      .map((p) => (/^\d+$/.test(p) ? Number(p) : p));

  it.each(CREDENTIAL_CASES.map((c) => [c.name, c] as const))("%s", (_name, c) => {
    const r = subscriptionSpecSchema.safeParse(c.spec);
    expect(r.success).toBe(false);
    if (r.success) return;
    const issue = r.error.issues.find((i) => JSON.stringify(i.path) === JSON.stringify(pathOf(c.field)));
    expect(issue, JSON.stringify(r.error.issues)).toBeDefined();
    // A CEL rule and its zod twin say the same thing.
    if ("rule" in c.enforcedBy) expect(issue!.message).toContain(c.message);
  });

  it("accepts every field at once and fills the defaults", () => {
    const spec = subscriptionSpecSchema.parse({
      url: "https://hooks.example.com/orders",
      headers: { "X-Tenant": "acme" },
      headersFrom: [{ name: "X-Api-Key", secretKeyRef: { name: "tenant-token", key: "api-key" } }],
      tls: { clientCertificateSecretRef: { name: "client-cert" }, caBundleSecretRef: { name: "receiver-ca" } },
      oauth2: { tokenURL: "https://auth.example.com/oauth/token", clientIdSecretRef: { name: "oauth", key: "client-id" }, clientSecretSecretRef: { name: "oauth", key: "client-secret" } },
      proxy: { url: "http://egress-proxy.infra.svc:3128" },
    });
    expect(spec.tls?.caBundleSecretRef?.key).toBe("ca.crt");
    expect(spec.oauth2?.clientAuthentication).toBe("ClientSecretBasic");
  });
});
