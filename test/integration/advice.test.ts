// Configuration advice against the real API server: a breaker cooldown (the subscription's own,
// or WEBHOOK_CB_TIMEOUT_MS) shorter than the largest retry delay shows as the condition
// ConfigurationAdvice=True with a Warning Event, keeps Ready=True, and clears when fixed; the
// start-up warning for the operator default comes from configWarnings.
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { configWarnings, loadConfig } from "../../src/config/config.js";
import { createNamespace, deleteNamespace, kubectl, kubectlOk, waitFor } from "../helpers/cluster.js";
import { exec } from "../helpers/exec.js";
import { apply, events, getObj, subscription } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";

type Condition = { type: string; status: string; reason: string; message?: string; observedGeneration?: number };
const condition = async (ns: string, name: string, type: string, generation?: number): Promise<Condition | undefined> => {
  const o = await getObj("whsub", ns, name);
  const c = (o?.status?.conditions as Condition[] | undefined)?.find((x) => x.type === type);
  return c && (generation === undefined || c.observedGeneration === generation) ? c : undefined;
};
const URL_ = "https://hooks.acme.example/orders";
const PLUGIN = fileURLToPath(new URL("../../bin/kubectl-hookline.js", import.meta.url));

describe("ConfigurationAdvice: breaker cooldown shorter than the largest retry delay", () => {
  let ns: string;
  let op: TestOperator;
  const env = { WEBHOOK_CB_TIMEOUT_MS: "10000" };

  beforeAll(async () => {
    ns = await createNamespace("advice");
    op = await startOperator({ namespaces: [ns], env });
  });
  afterAll(async () => {
    await op?.stop();
    await deleteNamespace(ns);
  });

  it("the operator default (10 s) below the default retry's 17.6 s: a start-up warning naming the variable", () => {
    expect(configWarnings(loadConfig(env))).toEqual([expect.objectContaining({ variable: "WEBHOOK_CB_TIMEOUT_MS", message: expect.stringContaining("WEBHOOK_CB_TIMEOUT_MS=10000 is shorter than the largest delay of the default retry policy, 17600 ms") })]);
    expect(configWarnings(loadConfig({}))).toEqual([]);
    // And the operator running with it logged it at start.
    const line = op.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === "configuration advice");
    expect(line).toMatchObject({ level: "warn", variable: "WEBHOOK_CB_TIMEOUT_MS", advice: expect.stringContaining("17600 ms") });
  });

  it("True with a Warning Event for an own cooldown and for the inherited default, Ready stays True; False (NoAdvice) when they agree; kubectl wait works on it", async () => {
    await apply([
      // Own cooldown 5s, retry up to 30s: advised.
      subscription(ns, "own", { url: URL_, circuitBreaker: { cooldown: "5s" }, retry: { maxAttempts: 10, maxBackoff: "30s" } }),
      // No cooldown: WEBHOOK_CB_TIMEOUT_MS (10s) against the default retry (17.6s): advised.
      subscription(ns, "inherits", { url: URL_ }),
      // Cooldown 60s of its own: no advice.
      subscription(ns, "fine", { url: URL_, circuitBreaker: { cooldown: "60s" } }),
      // A fast retry policy (at most 2.2 s): the 10 s default is long enough.
      subscription(ns, "fast", { url: URL_, retry: { maxAttempts: 4, initialBackoff: "500ms", maxBackoff: "2s" } }),
    ]);

    const own = await waitFor(() => condition(ns, "own", "ConfigurationAdvice"), { description: "ConfigurationAdvice on own" });
    expect(own).toMatchObject({ status: "True", reason: "CooldownShorterThanBackoff", observedGeneration: 1 });
    expect(own.message).toBe(
      "circuitBreaker.cooldown 5s is shorter than the largest retry delay, 30s (10 attempts, delays from 1s times 2, capped at 30s, jitter 10%): " +
        "an open breaker would probe sooner than the retries wait, and a probe into the same outage opens it again at once; " +
        "set circuitBreaker.cooldown to at least 30s, or lower retry.maxBackoff",
    );
    const inherits = await waitFor(() => condition(ns, "inherits", "ConfigurationAdvice"), { description: "ConfigurationAdvice on inherits" });
    expect(inherits).toMatchObject({ status: "True", reason: "CooldownShorterThanBackoff" });
    expect(inherits.message).toContain("the breaker cooldown (WEBHOOK_CB_TIMEOUT_MS, 10s: the subscription sets no circuitBreaker.cooldown) is shorter than the largest retry delay, 17.6s");
    for (const name of ["fine", "fast"]) {
      expect(await waitFor(() => condition(ns, name, "ConfigurationAdvice"), { description: `ConfigurationAdvice on ${name}` })).toMatchObject({ status: "False", reason: "NoAdvice" });
    }
    // Advice never costs readiness.
    for (const name of ["own", "inherits", "fine", "fast"]) expect(await condition(ns, name, "Ready")).toMatchObject({ status: "True", reason: "Ready" });

    // One Warning Event each for the advised ones, with the condition's reason and message.
    const warned = await waitFor(async () => {
      const e = (await events(ns)).filter((x) => x.reason === "CooldownShorterThanBackoff");
      return e.length >= 2 ? e : undefined;
    }, { description: "two CooldownShorterThanBackoff Events" });
    expect(warned.map((e) => [e.type, e.involvedObject.kind, e.involvedObject.name]).sort()).toEqual([
      ["Warning", "WebhookSubscription", "inherits"],
      ["Warning", "WebhookSubscription", "own"],
    ]);
    expect(warned.find((e) => e.involvedObject.name === "own")!.message).toBe(own.message);

    // The on-call console shows it under the conditions, only while it applies.
    const status = async (name: string) => (await exec(process.execPath, [PLUGIN, "status", name, "-n", ns, "--kubeconfig", inject("kubeconfig")])).stdout;
    expect(await status("own")).toMatch(/^Advice: +CooldownShorterThanBackoff: circuitBreaker\.cooldown 5s is shorter than the largest retry delay, 30s/m);
    expect(await status("fine")).not.toMatch(/^Advice:/m);

    // What a user runs to check a subscription is free of advice, or to find one that is not.
    expect(await kubectlOk(["wait", "--for=condition=ConfigurationAdvice=False", "whsub/fine", "whsub/fast", "-n", ns, "--timeout=10s"])).toContain("condition met");
    const advised = await kubectl(["wait", "--for=condition=ConfigurationAdvice=False", "whsub/own", "-n", ns, "--timeout=1s"]);
    expect(advised.code).not.toBe(0);
  });

  it("fixing the cooldown clears it (False, NoAdvice) with no new Warning; a change that makes it apply again warns again", async () => {
    await waitFor(() => condition(ns, "own", "ConfigurationAdvice"), { description: "ConfigurationAdvice on own" });
    await kubectlOk(["patch", "whsub", "own", "-n", ns, "--type=merge", "-p", JSON.stringify({ spec: { circuitBreaker: { cooldown: "30s" } } })]);
    const fixed = await waitFor(() => condition(ns, "own", "ConfigurationAdvice", 2), { description: "ConfigurationAdvice at generation 2" });
    expect(fixed).toMatchObject({ status: "False", reason: "NoAdvice" });
    const count = async () => (await events(ns, "own")).filter((e) => e.reason === "CooldownShorterThanBackoff").reduce((n, e) => n + ((e as { count?: number }).count ?? 1), 0);
    expect(await count()).toBe(1);

    // Longer retries (up to 2m) make the 30s cooldown short again.
    await kubectlOk(["patch", "whsub", "own", "-n", ns, "--type=merge", "-p", JSON.stringify({ spec: { retry: { maxBackoff: "2m" } } })]);
    const again = await waitFor(() => condition(ns, "own", "ConfigurationAdvice", 3), { description: "ConfigurationAdvice at generation 3" });
    expect(again).toMatchObject({ status: "True", reason: "CooldownShorterThanBackoff" });
    expect(again.message).toContain("circuitBreaker.cooldown 30s is shorter than the largest retry delay, 2m (10 attempts");
    await waitFor(async () => (await count()) === 2, { description: "a second CooldownShorterThanBackoff Event on own" });
  });
});
