// Usage errors of both command lines, in process: exit code 2, an error line naming the problem
// and a usage line on stderr, before any kubeconfig is read (KUBECONFIG points at nothing, so
// reading it would fail differently). Only calls that stop at the usage check are made here:
// nothing starts a control plane or connects. test/integration/cli-reference.test.ts runs the
// built bins against every command of docs/api.md.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { kubectlHookline } from "./kubectl-hookline.js";
import { main } from "./main.js";

let stderr: string;
let stdout: string;
/** An empty binary cache for every case (removed at the end). */
const emptyCache = mkdtempSync(join(tmpdir(), "hookline-usage-"));
afterAll(() => rmSync(emptyCache, { recursive: true, force: true }));
// The commands' modules, loaded (transformed) once here, not inside the first case's timeout:
// main() imports each command's module when it runs. (The operator and the demo themselves are
// imported only past the usage checks; test/integration/cli-reference.test.ts runs the bins.)
beforeAll(async () => {
  await Promise.all([import("./cluster.js"), import("./run-operator.js"), import("./publish.js"), import("./demo-command.js")]);
}, 120_000);
beforeEach(() => {
  stderr = "";
  stdout = "";
  vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => ((stderr += String(chunk)), true));
  vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => ((stdout += String(chunk)), true));
  vi.stubEnv("KUBECONFIG", "/nonexistent/hookline-test/kubeconfig");
  vi.stubEnv("HOOKLINE_NATS_URL", undefined);
  vi.stubEnv("TRACEPARENT", undefined);
  // A safety net should a usage check be missed: no Go and an empty binary cache, so dev,
  // cluster up and demo fail at once instead of starting a control plane.
  vi.stubEnv("HOOKLINE_CACHE_DIR", emptyCache);
  vi.stubEnv("PATH", dirname(process.execPath));
});
afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
});

const NOT_CONNECTING = /ENOENT|ECONNREFUSED|TLS|certificate|kubeconfig\b.*(load|read)|HTTP protocol/i;

describe("hookline: usage errors exit 2 with the problem and a usage line", () => {
  const cases: Array<[string[], RegExp, RegExp]> = [
    [["operator", "--bogus"], /^hookline operator: Unknown option '--bogus'$/m, /^usage: hookline operator /m],
    [["operator", "extra"], /^hookline operator: Unexpected argument 'extra'/m, /^usage: hookline operator /m],
    [["operator", "--leader-elect=maybe"], /--leader-elect must be true or false, got "maybe"/, /^usage: hookline operator /m],
    [["operator", "--leader-elect"], /--leader-elect/, /^usage: hookline operator /m],
    [["dev", "--bogus"], /^hookline dev: Unknown option '--bogus'$/m, /^usage: hookline dev /m],
    [["dev", "--dir", ""], /--dir must not be empty/, /^usage: hookline dev /m],
    [["cluster", "--bogus"], /^hookline cluster: Unknown option '--bogus'$/m, /^usage: hookline cluster up /m],
    [["cluster"], /missing subcommand/, /^usage: hookline cluster up /m],
    [["cluster", "sideways"], /unexpected "sideways"/, /^ {7}hookline cluster down /m],
    [["cluster", "down", "--nats"], /--nats is an option of cluster up/, /^usage: hookline cluster up /m],
    [["cluster", "up", "--nats-nodes", "3"], /--nats-nodes is an option of --nats/, /^usage: hookline cluster up /m],
    [["cluster", "up", "--nats", "--nats-nodes", "2"], /--nats-nodes must be 1, 3 or 5 \(an odd number: a majority of the nodes must be up\), got "2"/, /^usage: hookline cluster up /m],
    [["cluster", "up", "--nats", "--nats-nodes", "three"], /--nats-nodes must be 1, 3 or 5/, /^usage: hookline cluster up /m],
    [["cluster", "nats-publisher", "--nats-nodes", "3", "shop"], /nats-publisher takes --dir and namespaces only/, /^usage: hookline cluster up /m],
    [["dev", "--nats-nodes", "3"], /--nats-nodes is an option of --nats/, /^usage: hookline dev /m],
    [["dev", "--nats", "--nats-nodes", "4"], /--nats-nodes must be 1, 3 or 5/, /^usage: hookline dev /m],
    [["cluster", "up", "--apiserver-port", "99999"], /--apiserver-port must be a port number/, /^usage: hookline cluster up /m],
    [["publish", "--bogus"], /^hookline publish: Unknown option '--bogus'$/m, /^usage: hookline publish /m],
    [["publish", "-t", "order.paid", "-d", "{}"], /--namespace is required/, /^usage: hookline publish /m],
    [["publish", "-n", "shop", "-d", "{}"], /--type is required/, /^usage: hookline publish /m],
    [["publish", "-n", "shop", "-t", "order.paid"], /--data is required/, /^usage: hookline publish /m],
    [["publish", "-n", "shop", "-t", "order paid", "-d", "{}"], /--type: type must be a dotted name/, /^usage: hookline publish /m],
    [["publish", "-n", "Shop!", "-t", "order.paid", "-d", "{}"], /--namespace: namespace must be a namespace name/, /^usage: hookline publish /m],
    [["publish", "-n", "shop", "-t", "order.paid", "-d", "{}", "-o", "xml"], /--output must be table, json or yaml/, /^usage: hookline publish /m],
    [["demo", "--bogus"], /^hookline demo: Unknown option '--bogus'$/m, /^usage: hookline demo /m],
    [["demo", "now"], /^hookline demo: Unexpected argument 'now'/m, /^usage: hookline demo /m],
    [["demo", "--keep", "--dir", ""], /--dir must not be empty/, /^usage: hookline demo /m],
    [["bogus"], /unknown command "bogus"/, /^usage: hookline <command>/m],
  ];
  it.each(cases)("hookline %j", async (args, problem, usage) => {
    expect(await main(args)).toBe(2);
    expect(stderr).toMatch(problem);
    expect(stderr).toMatch(usage);
    expect(stderr).not.toMatch(NOT_CONNECTING);
    expect(stdout).toBe("");
  });

  it("no command at all is a usage error on stderr", async () => {
    expect(await main([])).toBe(2);
    expect(stderr).toMatch(/^usage: hookline <command>/m);
    expect(stdout).toBe("");
  });
});

describe("kubectl hookline: arguments are checked before the kubeconfig is read", () => {
  const cases: Array<[string[], RegExp, RegExp]> = [
    [["status"], /SUB \(a WebhookSubscription\) is required/, /^usage: kubectl hookline status SUB$/m],
    [["status", "a", "b"], /one SUB \(a WebhookSubscription\) only/, /^usage: kubectl hookline status SUB$/m],
    [["status", "acme", "--bogus"], /^error: Unknown option '--bogus'$/m, /^usage: kubectl hookline status SUB$/m],
    [["attempts"], /DELIVERY \(a WebhookDelivery\) is required/, /^usage: kubectl hookline attempts DELIVERY$/m],
    [["dlq", "acme"], /dlq takes no arguments/, /^usage: kubectl hookline dlq /m],
    [["dlq", "--since", "yesterday"], /--since must be a duration/, /^usage: kubectl hookline dlq /m],
    [["dlq", "-o", "xml"], /--output must be table, json or yaml/, /^usage: kubectl hookline dlq /m],
    [["replay"], /DELIVERY \(or --subscription S\) is required/, /^usage: kubectl hookline replay DELIVERY /m],
    [["replay", "d1"], /--reason is required/, /^ {7}kubectl hookline replay --subscription S /m],
    [["replay", "d1", "--reason", "oops"], /--reason must have 5 to 1024 characters/, /^usage: kubectl hookline replay /m],
    [["replay", "d1", "--reason", "endpoint fixed", "--concurrency", "4"], /--concurrency applies to replay --subscription/, /^usage: kubectl hookline replay /m],
    [["replay", "d1", "--reason", "endpoint fixed", "--wait", "--timeout", "soon"], /--timeout must be a duration/, /^usage: kubectl hookline replay /m],
    [["replay", "d1", "--subscription", "acme", "--reason", "endpoint fixed"], /either DELIVERY or --subscription S, not both/, /^usage: kubectl hookline replay /m],
    [["replay", "--subscription", "acme"], /--reason is required/, /^usage: kubectl hookline replay /m],
    [["replay", "--subscription", "acme", "--reason", "outage over", "--concurrency", "99"], /--concurrency must be an integer from 1 to 50/, /^usage: kubectl hookline replay /m],
    [["reset"], /SUB \(a WebhookSubscription\) is required/, /^usage: kubectl hookline reset SUB /m],
    [["reset", "acme"], /--reason is required/, /^usage: kubectl hookline reset SUB /m],
    [["reset", "acme", "--reason", "breaker fixed", "--timeout", "0s"], /--timeout must be a duration/, /^usage: kubectl hookline reset SUB /m],
    [["ping"], /SUB \(a WebhookSubscription\) is required/, /^usage: kubectl hookline ping SUB/m],
    [["ping", "acme", "--timeout", "x"], /--timeout must be a duration/, /^usage: kubectl hookline ping SUB/m],
    [["publish", "-d", "{}"], /--type is required/, /^usage: kubectl hookline publish /m],
    [["publish", "-t", "order.paid"], /--data is required/, /^usage: kubectl hookline publish /m],
    [["publish", "-t", "order paid", "-d", "{}"], /--type: type must be a dotted name/, /^usage: kubectl hookline publish /m],
    [["publish", "-t", "order.paid", "-d", "{not json"], /--data is not valid JSON/, /^usage: kubectl hookline publish /m],
    [["publish", "-t", "order.paid", "-d", "{}", "--bogus"], /^error: Unknown option '--bogus'$/m, /^usage: kubectl hookline publish /m],
    [["status", "acme", "-n", "Not_A_Namespace"], /--namespace must be a namespace name/, /^usage: kubectl hookline status SUB$/m],
    [["publish", "-t", "order.paid", "-d", "{}", "-A"], /^error: Unknown option '-A'$/m, /^usage: kubectl hookline publish /m],
    [["publish", "--bogus", "--help"], /^error: Unknown option '--bogus'$/m, /^usage: kubectl hookline publish /m],
    [["bogus"], /unknown command "bogus"/, /^usage: kubectl hookline <command>/m],
  ];
  it.each(cases)("kubectl hookline %j", async (args, problem, usage) => {
    expect(await kubectlHookline(args)).toBe(2);
    expect(stderr).toMatch(problem);
    expect(stderr).toMatch(usage);
    expect(stderr).not.toMatch(NOT_CONNECTING);
    expect(stdout).toBe("");
  });

  it("--help of one command shows that command's usage; --version works without a kubeconfig", async () => {
    expect(await kubectlHookline(["replay", "--help"])).toBe(0);
    expect(stdout).toMatch(/^usage: kubectl hookline replay DELIVERY /m);
    expect(stdout).toMatch(/^ {7}kubectl hookline replay --subscription S /m);
    expect(stdout).not.toContain("kubectl hookline status");
    stdout = "";
    expect(await kubectlHookline(["publish", "--help"])).toBe(0);
    expect(stdout).toMatch(/^usage: kubectl hookline publish -t TYPE /m);
    expect(stdout).toContain("The same as hookline publish");
    stdout = "";
    expect(await kubectlHookline(["--version"])).toBe(0);
    expect(stdout).toMatch(/^kubectl-hookline \d/);
    expect(stderr).toBe("");
  });
});
