// Publishing: fan-out to matching subscriptions, idempotency by event id, and the three doors
// (library, CLI, HTTP) agreeing on the same input. Real API server, real operator, real CLI.
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { publish as libraryPublish, IdempotencyConflictError, PayloadTooLargeError, PublishInputError } from "../../src/index.js";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { exec } from "../helpers/exec.js";
import { apply, listObjs, publisherToken, subscription } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";

const BIN = fileURLToPath(new URL("../../bin/hookline.js", import.meta.url));

function subscriptions(ns: string, url: string): unknown[] {
  return [
    subscription(ns, "orders", { url, eventTypes: ["order.*"] }),
    subscription(ns, "paid", { url, eventTypes: ["order.paid"] }),
    subscription(ns, "invoices", { url, eventTypes: ["invoice.paid"] }),
    subscription(ns, "paused", { url, eventTypes: ["order.paid"], paused: true }),
  ];
}

function cli(args: string[], input?: string, env?: Record<string, string>) {
  return exec(process.execPath, [BIN, "publish", "--kubeconfig", inject("kubeconfig"), ...args], { timeoutMs: 60_000, ...(input !== undefined ? { input } : {}), ...(env ? { env: { ...process.env, ...env } } : {}) });
}

interface Result {
  id: string;
  namespace: string;
  type: string;
  deliveries: Array<{ subscription: string; name: string; result: string }>;
  skipped: Array<{ subscription: string; reason: string }>;
}

const labelsOf = (d: { metadata: object }) => (d.metadata as { labels?: Record<string, string> }).labels;

async function httpPublish(op: TestOperator, ns: string, body: unknown, token: string): Promise<{ status: number; body: Result }> {
  const res = await fetch(`http://127.0.0.1:${op.op.publishPort}/v1/namespaces/${ns}/events`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Result };
}

const deliveriesIn = (ns: string) => listObjs("whdel", ns);
const summary = (r: { deliveries: Array<{ subscription: string; name: string; result: string }> }) => r.deliveries.map((d) => `${d.subscription} ${d.name} ${d.result}`);

describe("publish: fan-out and idempotency", () => {
  let ns: string;
  let receiver: Receiver;
  let op: TestOperator;

  beforeAll(async () => {
    ns = await createNamespace("publish");
    receiver = await Receiver.start(() => 200);
    await apply(subscriptions(ns, receiver.url()));
    op = await startOperator({ namespaces: [ns] });
  });
  afterAll(async () => {
    await op?.stop();
    await receiver?.close();
    await deleteNamespace(ns);
  });

  it("creates one delivery per matching, non-paused subscription, once per event id", async () => {
    const kubeconfig = inject("kubeconfig");
    const first = await libraryPublish({ namespace: ns, type: "order.paid", id: "evt-1", data: { order: 1 } }, { kubeconfig });
    expect(first).toEqual({
      id: "evt-1",
      namespace: ns,
      type: "order.paid",
      deliveries: [
        { subscription: "orders", name: "evt-1.orders", result: "created" },
        { subscription: "paid", name: "evt-1.paid", result: "created" },
      ],
      skipped: [{ subscription: "paused", reason: "Paused" }],
    });
    let items = await deliveriesIn(ns);
    expect(items.map((d) => d.metadata.name).sort()).toEqual(["evt-1.orders", "evt-1.paid"]);
    for (const d of items) {
      expect(d.spec).toEqual({ subscriptionRef: { name: d.metadata.name.split(".")[1] }, eventType: "order.paid", eventId: "evt-1", payload: { order: 1 } });
      expect(labelsOf(d)).toEqual({ "hookline.dev/subscription": d.metadata.name.split(".")[1], "hookline.dev/event-id": "evt-1" });
    }

    const again = await libraryPublish({ namespace: ns, type: "order.paid", id: "evt-1", data: { order: 1 } }, { kubeconfig });
    expect(summary(again)).toEqual(["orders evt-1.orders existing", "paid evt-1.paid existing"]);
    expect(await deliveriesIn(ns)).toHaveLength(2);

    const second = await libraryPublish({ namespace: ns, type: "order.paid", id: "evt-2", data: { order: 2 } }, { kubeconfig });
    expect(summary(second)).toEqual(["orders evt-2.orders created", "paid evt-2.paid created"]);
    items = await deliveriesIn(ns);
    expect(items).toHaveLength(4);

    // Labels select an event's deliveries; the operator delivers them.
    expect(await listObjs("whdel", ns, ["-l", "hookline.dev/event-id=evt-2"])).toHaveLength(2);
    await waitFor(async () => (await deliveriesIn(ns)).every((d) => d.status?.phase === "Succeeded"), { description: "four deliveries Succeeded" });
    expect(receiver.requests.map((r) => r.headers["webhook-id"]).sort()).toEqual(["evt-1", "evt-1", "evt-2", "evt-2"]);
  });

  it("generates an id when none is given, and matches no one for an unsubscribed type", async () => {
    const kubeconfig = inject("kubeconfig");
    const r = await libraryPublish({ namespace: ns, type: "invoice.paid", data: null }, { kubeconfig });
    expect(r.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(summary(r)).toEqual([`invoices ${r.id}.invoices created`]);
    const none = await libraryPublish({ namespace: ns, type: "refund.issued", data: {} }, { kubeconfig });
    expect(none.deliveries).toEqual([]);
  });

  it("treats an id reused for different data as a conflict, and equal rich data as the same event", async () => {
    const kubeconfig = inject("kubeconfig");
    const rich = { n: 1.5, big: 12345678901234, neg: -0.001, s: "héllo ✓ \u0000", nested: { empty: {}, list: [], nil: null, deep: [[1], { a: [true, false] }] } };
    await libraryPublish({ namespace: ns, type: "order.shipped", id: "evt-rich", data: rich }, { kubeconfig });
    const again = await libraryPublish({ namespace: ns, type: "order.shipped", id: "evt-rich", data: rich }, { kubeconfig });
    expect(again.deliveries.map((d) => d.result)).toEqual(["existing"]);

    await expect(libraryPublish({ namespace: ns, type: "order.shipped", id: "evt-rich", data: { ...rich, n: 2 } }, { kubeconfig })).rejects.toBeInstanceOf(IdempotencyConflictError);
    const cliConflict = await cli(["-n", ns, "-t", "order.shipped", "--id", "evt-rich", "-d", '{"other": true}']);
    expect(cliConflict.code).toBe(1);
    expect(cliConflict.stderr).toMatch(/evt-rich" was already published with a different data/);
  });

  it("stores the producer's trace context from the library option, the CLI flags or TRACEPARENT/TRACESTATE, normalized; refuses a bad one naming the option", async () => {
    const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const kubeconfig = inject("kubeconfig");
    const traceOf = async (name: string) => ((await deliveriesIn(ns)).find((d) => d.metadata.name === name)?.spec as { traceContext?: unknown } | undefined)?.traceContext;

    await libraryPublish({ namespace: ns, type: "invoice.paid", id: "evt-trace-lib", data: {} }, { kubeconfig, traceContext: { traceparent: tp, tracestate: "rojo=1 ,\tcongo=2" } });
    expect(await traceOf("evt-trace-lib.invoices")).toEqual({ traceparent: tp, tracestate: "rojo=1,congo=2" });

    const flags = await cli(["-n", ns, "-t", "invoice.paid", "--id", "evt-trace-cli", "-d", "{}", "--traceparent", tp, "--tracestate", "rojo=1"]);
    expect(flags.code, flags.stderr).toBe(0);
    expect(await traceOf("evt-trace-cli.invoices")).toEqual({ traceparent: tp, tracestate: "rojo=1" });

    // A higher version is read as W3C asks and stored as version 00.
    const fromEnv = await cli(["-n", ns, "-t", "invoice.paid", "--id", "evt-trace-env", "-d", "{}"], undefined, { TRACEPARENT: tp.replace(/^00/, "01"), TRACESTATE: "congo=2" });
    expect(fromEnv.code, fromEnv.stderr).toBe(0);
    expect(await traceOf("evt-trace-env.invoices")).toEqual({ traceparent: tp, tracestate: "congo=2" });

    // A bad environment value (set by another tool) is reported and left out; a bad flag is a usage error.
    const badEnv = await cli(["-n", ns, "-t", "invoice.paid", "--id", "evt-trace-badenv", "-d", "{}"], undefined, { TRACEPARENT: "garbage" });
    expect(badEnv.code, badEnv.stderr).toBe(0);
    expect(badEnv.stderr).toMatch(/warning: TRACEPARENT from the environment is ignored: traceparent "garbage" is not a W3C traceparent/);
    expect(await traceOf("evt-trace-badenv.invoices")).toBeUndefined();
    const cases: Array<[string[], RegExp]> = [
      [["--traceparent", tp.toUpperCase()], /^hookline publish: --traceparent: traceparent .* hex digits must be lowercase/],
      [["--traceparent", tp.replace(/^00/, "ff")], /--traceparent: .*version ff is forbidden/],
      [["--traceparent", tp, "--tracestate", "a=1,a=2"], /--tracestate: tracestate is not a W3C tracestate: the key "a" appears twice/],
      [["--traceparent", tp, "--tracestate", "a=caf\u00e9"], /--tracestate: .*not printable ASCII/],
      [["--tracestate", "a=1"], /--tracestate needs --traceparent/],
    ];
    const runs = await Promise.all(cases.map(([extra]) => cli(["-n", ns, "-t", "invoice.paid", "--id", "evt-trace-refused", "-d", "{}", ...extra])));
    cases.forEach(([extra, why], i) => {
      expect(runs[i]!.code, extra.join(" ")).toBe(2);
      expect(runs[i]!.stderr).toMatch(why);
    });
    await expect(libraryPublish({ namespace: ns, type: "invoice.paid", id: "evt-trace-refused", data: {} }, { kubeconfig, traceContext: { traceparent: "00-abc" } })).rejects.toMatchObject({
      name: "PublishInputError",
      field: "traceContext.traceparent",
    });
    expect(await traceOf("evt-trace-refused.invoices")).toBeUndefined();
    expect((await deliveriesIn(ns)).some((d) => d.metadata.name.startsWith("evt-trace-refused"))).toBe(false);
  });

  it("refuses bad input with typed errors before touching the cluster", async () => {
    const kubeconfig = inject("kubeconfig");
    const before = (await deliveriesIn(ns)).length;
    await expect(libraryPublish({ namespace: ns, type: "order paid", data: 1 }, { kubeconfig })).rejects.toMatchObject({ name: "PublishInputError", field: "type" });
    await expect(libraryPublish({ namespace: ns, type: "order.paid", data: "x".repeat(300 * 1024) }, { kubeconfig })).rejects.toBeInstanceOf(PayloadTooLargeError);
    await expect(libraryPublish({ namespace: ns, type: "order.paid", id: "", data: 1 }, { kubeconfig })).rejects.toBeInstanceOf(PublishInputError);
    // An id that cannot be the webhook-id header would have failed every attempt (and ended Poison).
    await expect(libraryPublish({ namespace: ns, type: "order.paid", id: "evt-1\r\nX-Injected: 1", data: 1 }, { kubeconfig })).rejects.toMatchObject({
      name: "PublishInputError",
      field: "id",
      message: "id must be printable ASCII with no leading or trailing space: it is sent as the webhook-id header",
    });
    expect(await deliveriesIn(ns)).toHaveLength(before);
  });
});

describe("publish: the library, the CLI and the HTTP door agree", () => {
  const spaces: Record<"http" | "cli" | "library", string> = { http: "", cli: "", library: "" };
  let receiver: Receiver;
  let op: TestOperator;
  /** A ServiceAccount token for the HTTP door, allowed in the http and library namespaces. */
  let token: string;
  const input = { type: "order.paid", id: "Order#1001/paid", data: { order: 1001, lines: [{ sku: "A-1", qty: 2 }], note: null } };

  beforeAll(async () => {
    receiver = await Receiver.start(() => 200);
    for (const door of ["http", "cli", "library"] as const) spaces[door] = await createNamespace(`publish-${door}`);
    await apply(Object.values(spaces).flatMap((ns) => subscriptions(ns, receiver.url())));
    token = await publisherToken(spaces.http, "publisher", { publishTo: [spaces.http, spaces.library] });
    op = await startOperator({ namespaces: Object.values(spaces), env: { PUBLISH_PORT: "0" } });
    await waitFor(() => [...op.op.caches.subscriptions.values()].length === 12, { description: "the operator's cache holds the 12 subscriptions" });
  });
  afterAll(async () => {
    await op?.stop();
    await receiver?.close();
    await Promise.all(Object.values(spaces).map(deleteNamespace));
  });

  it("gives the same result and the same deliveries for the same input", async () => {
    const http = await httpPublish(op, spaces.http, input, token);
    expect(http.status).toBe(202);

    const cliRun = await cli(["-n", spaces.cli, "-t", input.type, "--id", input.id, "-d", JSON.stringify(input.data), "-o", "json"]);
    expect(cliRun.code, cliRun.stderr).toBe(0);
    const fromCli = JSON.parse(cliRun.stdout) as Result;

    const fromLibrary = await libraryPublish({ namespace: spaces.library, ...input }, { kubeconfig: inject("kubeconfig") });

    const withoutNs = ({ namespace: _ns, ...rest }: Result) => rest;
    expect(withoutNs(http.body)).toEqual(withoutNs(fromCli));
    expect(withoutNs(fromLibrary)).toEqual(withoutNs(fromCli));
    expect(summary(fromCli)).toHaveLength(2);
    for (const d of fromCli.deliveries) {
      expect(d.result).toBe("created");
      // "Order#1001/paid" is not a clean name: sanitized, with a hash.
      expect(d.name).toMatch(new RegExp(`^order-1001-paid-${d.subscription}-[0-9a-f]{12}$`));
    }

    // The objects themselves are identical across the three namespaces.
    const shape = async (ns: string) =>
      (await deliveriesIn(ns)).map((d) => ({ name: d.metadata.name, labels: labelsOf(d), spec: d.spec })).sort((a, b) => a.name.localeCompare(b.name));
    const [a, b, c] = await Promise.all([shape(spaces.http), shape(spaces.cli), shape(spaces.library)]);
    expect(a).toHaveLength(2);
    expect(b).toEqual(a);
    expect(c).toEqual(a);
    expect(a[0]!.spec).toEqual({ subscriptionRef: { name: a[0]!.name.includes("-orders-") ? "orders" : "paid" }, eventType: "order.paid", eventId: input.id, payload: input.data });
  });

  it("sees what another door published as existing", async () => {
    const viaCli = await cli(["-n", spaces.http, "-t", input.type, "--id", input.id, "-d", "@-"], JSON.stringify(input.data, null, 2));
    expect(viaCli.code, viaCli.stderr).toBe(0);
    expect(viaCli.stdout).toMatch(/^SUBSCRIPTION\s+DELIVERY\s+RESULT\n/);
    expect(viaCli.stdout).toMatch(/orders\s+order-1001-paid-orders-[0-9a-f]{12}\s+existing/);
    expect(viaCli.stdout).toMatch(/paused\s+-\s+skipped \(Paused\)/);
    expect(viaCli.stderr).toMatch(/0 created, 2 existing/);

    const viaLibrary = await libraryPublish({ namespace: spaces.cli, ...input }, { kubeconfig: inject("kubeconfig") });
    const viaHttp = await httpPublish(op, spaces.library, input, token);
    expect(viaHttp.status).toBe(202);
    expect(viaLibrary.deliveries.map((d) => d.result)).toEqual(["existing", "existing"]);
    expect(viaHttp.body.deliveries.map((d) => d.result)).toEqual(["existing", "existing"]);
    for (const ns of Object.values(spaces)) expect(await deliveriesIn(ns)).toHaveLength(2);
  });

  it("the CLI answers usage and input problems with exit code 2 and a message naming the flag", async () => {
    const ns = spaces.cli;
    const cases: Array<[string[], RegExp, string?]> = [
      [["-n", ns, "-d", "{}"], /--type is required/],
      [["-n", ns, "-t", "order paid", "-d", "{}"], /--type: type must be a dotted name/],
      [["-n", ns, "-t", "order.paid", "-d", "{not json"], /--data is not valid JSON/],
      [["-n", ns, "-t", "order.paid", "-d", "@/nonexistent/file.json"], /cannot read --data @\/nonexistent\/file.json: ENOENT/],
      [["-n", ns, "-t", "order.paid", "-d", "{}", "--bogus"], /Unknown option '--bogus'/],
      [["-n", ns, "-t", "order.paid", "-d", "@-"], /--data: data is \d+ bytes serialized as JSON; the limit is 262144 bytes/, JSON.stringify("x".repeat(300 * 1024))],
      [["-n", ns, "-t", "order.paid", "-d", "@-"], /stdin is not valid JSON/, "{"],
      [["-n", ns, "-t", "order.paid", "--id", "évènement", "-d", "{}"], /--id: id must be printable ASCII with no leading or trailing space: it is sent as the webhook-id header/],
      [["-n", ns, "-t", "order.paid", "--id", "evt-1\r\nX-Injected: 1", "-d", "{}"], /--id: id must be printable ASCII/],
    ];
    const runs = await Promise.all(cases.map(([args, , stdin]) => cli(args, stdin)));
    cases.forEach(([args, message], i) => {
      expect(runs[i]!.code, args.join(" ")).toBe(2);
      expect(runs[i]!.stderr).toMatch(message);
    });
    expect(await deliveriesIn(ns)).toHaveLength(2);
  });

  it("the CLI exits 1 with a hint when the cluster refuses the caller", async () => {
    const r = await exec(process.execPath, [BIN, "publish", "--kubeconfig", inject("unprivilegedKubeconfig"), "-n", spaces.cli, "-t", "order.paid", "-d", "{}"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/forbidden/);
    expect(r.stderr).toMatch(/needs list on webhooksubscriptions and create on webhookdeliveries/);
  });
});
