// `kubectl hookline`, end to end: the real bin as a child process against the real API server,
// an in-process operator and a real receiver on 127.0.0.1. The assertions read what a user
// reads (stdout, stderr, exit code), and check the cluster and the receiver agree.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createNamespace, deleteNamespace, kubectlOk, waitFor } from "../helpers/cluster.js";
import { exec } from "../helpers/exec.js";
import { apply, create, delivery, events, getObj, secret, subscription, TEST_SECRET } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";

const PLUGIN = fileURLToPath(new URL("../../bin/kubectl-hookline.js", import.meta.url));
const HOOKLINE = fileURLToPath(new URL("../../bin/hookline.js", import.meta.url));
const { version } = (await import("../../package.json", { with: { type: "json" } })).default as { version: string };

describe("kubectl hookline", () => {
  let ns: string;
  let receiver: Receiver;
  let op: TestOperator;
  let status = 200;
  /** A kubeconfig whose context `console` defaults to the test namespace, like a user's. */
  let kubeconfig: string;
  /** The kubeconfig's directory (removed after the file). */
  let dir: string | undefined;

  const plugin = (args: string[], opts: { kubeconfig?: string } = {}) =>
    exec(process.execPath, [PLUGIN, "--kubeconfig", opts.kubeconfig ?? inject("kubeconfig"), ...args], { timeoutMs: 90_000 });
  const inNs = (args: string[]) => plugin(["-n", ns, ...args]);

  beforeAll(async () => {
    ns = await createNamespace("plugin");
    receiver = await Receiver.start(() => status);
    await apply([
      secret(ns, "acme-signing"),
      subscription(ns, "acme", {
        url: receiver.url(),
        eventTypes: ["order.paid"],
        secretRef: { name: "acme-signing" },
        retry: { maxAttempts: 2, initialBackoff: "10ms", maxBackoff: "10ms", jitterPercent: 0 },
        // Two deliveries of two attempts: the fourth failure dead-letters the second one and opens
        // the breaker, which stays Open for the test (only a reset closes it).
        circuitBreaker: { failureThreshold: 4, cooldown: "300s" },
      }),
    ]);
    op = await startOperator({ namespaces: [ns] });
    dir = mkdtempSync(join(tmpdir(), "plugin-"));
    kubeconfig = join(dir, "kubeconfig");
    writeFileSync(kubeconfig, await kubectlOk(["config", "view", "--raw", "--minify"]));
    const view = (path: string) => exec("kubectl", ["--kubeconfig", kubeconfig, "config", "view", "-o", `jsonpath=${path}`]).then((r) => r.stdout.trim());
    const [cluster, user] = [await view("{.contexts[0].context.cluster}"), await view("{.contexts[0].context.user}")];
    await exec("kubectl", ["--kubeconfig", kubeconfig, "config", "set-context", "console", `--cluster=${cluster}`, `--user=${user}`, `--namespace=${ns}`]);
  });
  afterAll(async () => {
    await op?.stop();
    await receiver?.close();
    await deleteNamespace(ns);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("--version, --help and usage errors: exit 0, 0 and 2, nothing sent", async () => {
    expect(await plugin(["--version"])).toMatchObject({ code: 0, stdout: `kubectl-hookline ${version}\n` });
    expect(await exec(process.execPath, [HOOKLINE, "--version"])).toMatchObject({ code: 0, stdout: `hookline ${version}\n` });
    const help = await plugin(["--help"]);
    expect(help.code).toBe(0);
    for (const c of ["status SUB", "attempts DELIVERY", "dlq", "replay", "reset SUB", "ping SUB", "publish"]) expect(help.stdout).toContain(c);
    const cases: Array<[string[], RegExp]> = [
      [["bogus"], /unknown command "bogus"/],
      [["status"], /SUB \(a WebhookSubscription\) is required/],
      [["reset", "acme", "--reason", "oops"], /--reason must have 5 to 1024 characters/],
      [["replay", "d1"], /--reason is required/],
      [["replay", "--subscription", "acme", "--reason", "outage over", "--concurrency", "99"], /--concurrency must be an integer from 1 to 50/],
      [["dlq", "-o", "xml"], /--output must be table, json or yaml/],
      [["dlq", "--since", "yesterday"], /--since must be a duration/],
      [["status", "acme", "--bogus"], /Unknown option '--bogus'/],
      [["status", "acme", "--context", "nope"], /context "nope" does not exist/],
    ];
    for (const [args, message] of cases) {
      const r = await inNs(args);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr, args.join(" ")).toMatch(message);
    }
    expect((await exec(process.execPath, [HOOKLINE, "bogus"])).code).toBe(2);
    expect(Object.keys((await getObj("whsub", ns, "acme"))!.metadata.annotations ?? {}).filter((k) => k.startsWith("hookline.dev/"))).toEqual([]);
    // The cluster's answer is a failure, not a usage error.
    const missing = await inNs(["status", "nosuch"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/NotFound.*nosuch/);
  });

  it("ping sends one signed hookline.ping through the real path, whatever eventTypes lists, and shows the answer", async () => {
    const r = await plugin(["ping", "acme", "--context", "console"], { kubeconfig });
    expect(r.stderr).toContain(`sent to ${receiver.url()}`);
    expect(r.stdout).toMatch(new RegExp(`^ok: HTTP 200 \\(http_2xx\\) from ${receiver.url().replace(/[.?*+]/g, "\\$&")} in \\d+ms\\n$`));
    expect(r.code, r.stderr).toBe(0);
    const req = receiver.requests.at(-1)!;
    const body = new Webhook(TEST_SECRET).verify(req.body, req.headers as Record<string, string>) as { type: string; data: { subscription: string } };
    expect(body).toMatchObject({ type: "hookline.ping", data: { subscription: "acme" } });
  });

  it("a failing endpoint: status, attempts and dlq tell the story; ping says why it cannot get through", async () => {
    status = 500;
    await create([delivery(ns, "d1", "acme"), delivery(ns, "d2", "acme")]);
    await waitFor(async () => (await getObj("whsub", ns, "acme"))?.status?.deliveries?.deadLettered === 2 && (await getObj("whsub", ns, "acme"))?.status?.breaker?.state === "Open", {
      description: "two dead letters and an Open breaker",
      timeoutMs: 60_000,
    });

    // The same from kubectl: selectable fields, the wide Last error column, waiting for a dead letter.
    expect(await kubectlOk(["get", "whsub", "-n", ns, "--field-selector", "status.breaker.state=Open", "-o", "name"])).toBe("webhooksubscription.hookline.dev/acme\n");
    expect(await kubectlOk(["get", "whsub", "-n", ns, "--field-selector", "status.health.state=Degraded,spec.paused=false", "-o", "name"])).toBe("webhooksubscription.hookline.dev/acme\n");
    expect(await kubectlOk(["get", "whsub", "-n", ns, "--field-selector", "status.breaker.state=Closed", "-o", "name"])).toBe("");
    const wide = (await kubectlOk(["get", "whdel", "d1", "-n", ns, "-o", "wide"])).split("\n");
    expect(wide[0]).toMatch(/LAST ERROR$/);
    expect(wide[1]).toMatch(/http_5xx$/);
    expect(await kubectlOk(["wait", "--for=condition=Succeeded=False", "whdel/d1", "-n", ns, "--timeout=10s"])).toContain("condition met");

    const s = await inNs(["status", "acme"]);
    expect(s.code, s.stderr).toBe(0);
    expect(s.stdout).toMatch(/^Subscription: +.*\/acme$/m);
    expect(s.stdout).toMatch(/^Breaker: +Open since \d+s, 4 failures in a row, next probe in \d+m\d*s?/m);
    expect(s.stdout).toMatch(/^EndpointHealthy: +False Degraded \(since \d+s\): 4 consecutive failures$/m);
    expect(s.stdout).toMatch(/^Health: +Degraded since \d+s, last success \d+s ago, last failure \d+s ago, 4\/\d attempts failed$/m);
    expect(s.stdout).toMatch(/^Backlog: +0 pending$/m);
    expect(s.stdout).toMatch(/^Dead letters: +2 /m);
    expect(s.stdout).toMatch(/Last errors:\nAGE +DELIVERY +PHASE +STATUS +REASON +ERROR\n\d+s +d[12] +DeadLettered +500 +http_5xx/);
    expect(s.stdout).toMatch(/Events:\nAGE +TYPE +REASON +MESSAGE\n(.*\n)*\d+s +Warning +BreakerOpen +circuit breaker Closed -> Open/);
    const sj = JSON.parse((await inNs(["status", "acme", "-o", "json"])).stdout) as { breaker: { state: string }; backlog: { pending: number }; lastErrors: unknown[] };
    expect(sj).toMatchObject({ breaker: { state: "Open" }, backlog: { pending: 0 } });
    expect(sj.lastErrors).toHaveLength(2);

    const a = await inNs(["attempts", "d1"]);
    expect(a.code, a.stderr).toBe(0);
    expect(a.stdout).toMatch(/^Phase: +DeadLettered: Exhausted/m);
    expect(a.stdout).toMatch(/#\s+AGE\s+STATUS\s+REASON\s+DURATION\s+OUTCOME\s+ERROR\n1\s+\d+s\s+500\s+http_5xx\s+\d+ms\s+Failed\s*\n2\s+\d+s\s+500\s+http_5xx\s+\d+ms\s+Failed/);
    expect((await inNs(["attempts", "d1", "-o", "yaml"])).stdout).toMatch(/^phase: DeadLettered$/m);

    const d = await inNs(["dlq"]);
    expect(d.code, d.stderr).toBe(0);
    const lines = d.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^NAME +SUBSCRIPTION +EVENT TYPE +REASON +AGE +ATTEMPTS +LAST STATUS +REPLAYS +MESSAGE$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/).slice(0, 4).join(" ")).sort()).toEqual(["d1 acme order.paid Exhausted", "d2 acme order.paid Exhausted"]);
    const all = JSON.parse((await plugin(["dlq", "-A", "--subscription", "acme", "--since", "1h", "-o", "json"])).stdout) as { items: Array<{ namespace: string; name: string }> };
    expect(all.items.filter((i) => i.namespace === ns).map((i) => i.name).sort()).toEqual(["d1", "d2"]);
    expect((await inNs(["dlq", "--reason", "Gone"])).stdout).toBe(`no dead letters in namespace ${ns} with reason Gone\n`);

    // Defer: the ping waits for the breaker and says so.
    const p = await inNs(["ping", "acme", "--timeout", "4s"]);
    expect(p.code, p.stderr).toBe(1);
    expect(p.stderr).toMatch(/no answer within 4s: .*(breaker|Breaker)/);
  });

  it("reset closes the breaker now (status, Event, annotation removed) and wakes what waited; replay follows to the result", async () => {
    status = 200;
    const r = await inNs(["reset", "acme", "--reason", "endpoint fixed, INC-42"]);
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("whsub/acme reset: breaker Closed (was Open), health Healthy (was Degraded)\n");
    expect(r.code, r.stderr).toBe(0);
    const sub = (await getObj("whsub", ns, "acme"))!;
    expect(sub.metadata.annotations?.["hookline.dev/reset-endpoint"]).toBeUndefined();
    expect(sub.status).toMatchObject({ breaker: { state: "Closed" }, lastReset: { reason: "endpoint fixed, INC-42", breaker: "Open", health: "Degraded" } });
    expect((await events(ns, "acme")).some((e) => e.reason === "EndpointReset" && e.message.includes("endpoint fixed, INC-42"))).toBe(true);
    // The ping that waited for the Open breaker goes through now, not after the 300 s cooldown.
    await waitFor(() => receiver.requests.some((q) => q.n > 1 && q.body.includes('"hookline.ping"') && q.at > Date.parse(sub.status!.lastReset.at) - 1000), { description: "the waiting ping delivered after the reset", timeoutMs: 20_000 });

    const one = await inNs(["replay", "d1", "--reason", "endpoint fixed, INC-42", "--wait"]);
    expect(one.stdout).toMatch(/^replay of d1: Succeeded \(HTTP 200, http_2xx, \d+ms\); phase Succeeded\n$/);
    expect(one.code, one.stderr).toBe(0);

    const bulk = await inNs(["replay", "--subscription", "acme", "--reason", "outage INC-42 over", "--concurrency", "2", "--wait"]);
    expect(bulk.stdout, bulk.stderr).toBe("replay of acme's dead letters finished: 1 attempted, 1 succeeded, 0 failed, 0 deduped\n");
    expect(bulk.code, bulk.stderr).toBe(0);
    expect((await inNs(["dlq"])).stdout).toBe(`no dead letters in namespace ${ns}\n`);
  });

  it("a refused replay exits 1 with the operator's reason", async () => {
    const r = await inNs(["replay", "d1", "--reason", "try again please", "--wait"]);
    expect(r.stderr).toBe('replay of d1 refused: ReplayRefused: replay "try again please" refused: it is not dead-lettered (phase Succeeded)\n');
    expect(r.code, r.stderr).toBe(1);
  });

  it("publish is hookline publish, with the namespace of the kubeconfig context", async () => {
    status = 200;
    const r = await plugin(["publish", "--context", "console", "-t", "order.paid", "--id", "evt-9", "-d", '{"order": 9}', "-o", "yaml"], { kubeconfig });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`namespace: ${ns}\n`);
    expect(r.stdout).toContain("name: evt-9.acme\n");
    await waitFor(async () => (await getObj("whdel", ns, "evt-9.acme"))?.status?.phase === "Succeeded", { description: "evt-9 delivered" });
    expect((await plugin(["publish", "-t", "order.paid", "-d", "not json"], { kubeconfig })).code).toBe(2);
    const badId = await plugin(["publish", "-t", "order.paid", "--id", "evt 1\n", "-d", "{}"], { kubeconfig });
    expect(badId.code).toBe(2);
    expect(badId.stderr).toMatch(/--id: id must be printable ASCII/);
  });
});
