import { describe, expect, it } from "vitest";
import { ConfigError, INT_VARS, configWarnings, loadConfig } from "./config.js";

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe("loadConfig", () => {
  it("applies the contract's defaults to an empty environment", () => {
    const c = loadConfig({});
    expect(c.deliveryTimeoutMs).toBe(10_000);
    expect(c.breaker).toEqual({ failureThreshold: 5, successThreshold: 1, cooldownMs: 60_000 });
    expect(c.drain).toEqual({ timeoutMs: 25_000, action: "requeue" });
    expect(c.maxInFlight).toBe(100);
    expect(c.maxFinishedDeliveries).toBe(20_000);
    expect(c.allowedNetworks).toEqual([]);
    expect(c.watchNamespaces).toEqual([]);
    expect(c.metricsPort).toBe(8080);
    expect(c.healthPort).toBe(8081);
    expect(c.publishPort).toBeUndefined();
    expect(c.leaderElection.enabled).toBe(true);
    expect(c.leaderElection.leaseDurationMs).toBe(15_000);
  });

  it("reads every variable", () => {
    const c = loadConfig({
      WEBHOOK_DELIVERY_TIMEOUT_MS: "250",
      WEBHOOK_CB_FAILURE_THRESHOLD: "3",
      WEBHOOK_CB_SUCCESS_THRESHOLD: "2",
      WEBHOOK_CB_TIMEOUT_MS: "1000",
      WEBHOOK_DRAIN_TIMEOUT_MS: "0",
      WEBHOOK_DRAIN_TIMEOUT_ACTION: "dead-letter",
      WEBHOOK_MAX_IN_FLIGHT: "7",
      WEBHOOK_MAX_FINISHED_DELIVERIES: "50000",
      WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8, ::1/128",
      WATCH_NAMESPACES: "shop, billing",
      METRICS_PORT: "0",
      HEALTH_PORT: "9001",
      PUBLISH_PORT: "8082",
      LEADER_ELECT: "false",
      POD_NAME: "hookline-0",
      POD_NAMESPACE: "hookline-system",
    });
    expect(c.deliveryTimeoutMs).toBe(250);
    expect(c.breaker).toEqual({ failureThreshold: 3, successThreshold: 2, cooldownMs: 1000 });
    expect(c.drain).toEqual({ timeoutMs: 0, action: "dead-letter" });
    expect(c.maxInFlight).toBe(7);
    expect(c.maxFinishedDeliveries).toBe(50_000);
    expect(c.allowedNetworks).toHaveLength(2);
    expect(c.watchNamespaces).toEqual(["shop", "billing"]);
    expect([c.metricsPort, c.healthPort, c.publishPort]).toEqual([0, 9001, 8082]);
    expect(c.leaderElection).toMatchObject({ enabled: false, identity: "hookline-0", leaseNamespace: "hookline-system" });
  });

  // Every integer variable: below its range, above it, and not a number.
  const cases = Object.values(INT_VARS).flatMap((v) => [
    { name: v.name, value: String(v.min - 1), range: `from ${v.min} to ${v.max}` },
    { name: v.name, value: String(v.max + 1), range: `from ${v.min} to ${v.max}` },
    { name: v.name, value: "12abc", range: `from ${v.min} to ${v.max}` },
    { name: v.name, value: "1.5", range: `from ${v.min} to ${v.max}` },
  ]);
  it.each(cases)("refuses $name=$value naming the variable, value and range", ({ name, value, range }) => {
    const env: Record<string, string> = { [name]: value };
    // Keep the leader-election relations valid while one of them is out of range.
    const problems = problemsOf(env);
    const mine = problems.find((p) => p.startsWith(`${name}=`));
    expect(mine, problems.join("\n")).toBeDefined();
    expect(mine).toContain(JSON.stringify(value));
    expect(mine).toContain(range);
  });

  it.each([
    ["WEBHOOK_DRAIN_TIMEOUT_ACTION", "drop", "requeue, dead-letter"],
    ["WEBHOOK_ALLOWED_NETWORKS", "10.0.0.0/33", "CIDR"],
    ["WEBHOOK_ALLOWED_NETWORKS", "not-a-network", "CIDR"],
    ["WATCH_NAMESPACES", "shop,Bad_NS", "namespace"],
    ["PUBLISH_PORT", "http", "0 to 65535"],
    ["LEADER_ELECT", "maybe", "true or false"],
    ["LOG_LEVEL", "loud", "info"],
  ])("refuses %s=%s", (name, value, hint) => {
    const problems = problemsOf({ [name]: value });
    const mine = problems.find((p) => p.startsWith(name));
    expect(mine, problems.join("\n")).toBeDefined();
    expect(mine).toContain(hint);
  });

  it("reports every bad variable at once", () => {
    const problems = problemsOf({ WEBHOOK_MAX_IN_FLIGHT: "0", METRICS_PORT: "70000" });
    expect(problems).toHaveLength(2);
  });

  it("refuses leader-election timings that cannot work", () => {
    const problems = problemsOf({ LEADER_ELECTION_LEASE_DURATION_MS: "5000", LEADER_ELECTION_RENEW_DEADLINE_MS: "6000" });
    expect(problems.join("\n")).toContain("must be shorter than LEADER_ELECTION_LEASE_DURATION_MS");
  });

  it("leaves stream mode off without HOOKLINE_NATS_URL and takes nats:// and tls:// URLs", () => {
    expect(loadConfig({}).natsUrl).toBeUndefined();
    expect(loadConfig({ HOOKLINE_NATS_URL: "  " }).natsUrl).toBeUndefined();
    expect(loadConfig({ HOOKLINE_NATS_URL: " nats://nats.nats.svc:4222 " }).natsUrl).toBe("nats://nats.nats.svc:4222");
    expect(loadConfig({ HOOKLINE_NATS_URL: "tls://a:4222,tls://b:4222" }).natsUrl).toBe("tls://a:4222,tls://b:4222");
    const withSecret = loadConfig({ HOOKLINE_NATS_URL: "nats://hookline:s3cret@nats:4222" });
    expect(withSecret.natsUrl).toBe("nats://hookline:s3cret@nats:4222");
    expect(withSecret.natsUrlRedacted).toBe("nats://hookline:***@nats:4222");
  });

  it.each([
    ["http://nats:4222", "scheme http://"],
    ["nats.nats.svc:4222", "not a URL"],
    ["nats://", "has no host"],
    ["nats://nats:99999", "not a valid URL"],
    ["nats://nats:4222/path", "no path"],
    ["nats://a:4222,tls://b:4222", "mixes nats:// and tls://"],
    [",", "no URL given"],
  ])("refuses HOOKLINE_NATS_URL=%s naming the variable", (value, hint) => {
    const problems = problemsOf({ HOOKLINE_NATS_URL: value });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^HOOKLINE_NATS_URL=/);
    expect(problems[0]).toContain(hint);
    expect(problems[0]).toContain("nats:// or tls:// URL");
  });

  it("never repeats a password from HOOKLINE_NATS_URL in its message", () => {
    const problems = problemsOf({ HOOKLINE_NATS_URL: "nats://hookline:s3cret@nats:4222/x" });
    expect(problems[0]).toContain("nats://hookline:***@nats:4222/x");
    expect(problems[0]).not.toContain("s3cret");
  });

  it("stream mode's bounds: 32 MiB held per replica, 7 days of age, 1,000,000 events and 256 MiB per namespace by default; each refused out of range, naming the variable", () => {
    const d = loadConfig({});
    expect([d.streamMaxHeldBytes, d.streamMaxAgeMs, d.streamNamespaceMaxMessages, d.streamNamespaceMaxBytes]).toEqual([32 * 1024 * 1024, 7 * 86_400_000, 1_000_000, 256 * 1024 * 1024]);
    const c = loadConfig({ HOOKLINE_STREAM_MAX_HELD_BYTES: "1048576", HOOKLINE_STREAM_MAX_AGE_MS: "1000", HOOKLINE_STREAM_NAMESPACE_MAX_MESSAGES: "1", HOOKLINE_STREAM_NAMESPACE_MAX_BYTES: "1099511627776" });
    expect([c.streamMaxHeldBytes, c.streamMaxAgeMs, c.streamNamespaceMaxMessages, c.streamNamespaceMaxBytes]).toEqual([1024 * 1024, 1_000, 1, 1024 ** 4]);
    const problems = problemsOf({ HOOKLINE_STREAM_MAX_HELD_BYTES: "1000", HOOKLINE_STREAM_MAX_AGE_MS: "1209600001", HOOKLINE_STREAM_NAMESPACE_MAX_MESSAGES: "0", HOOKLINE_STREAM_NAMESPACE_MAX_BYTES: "1GiB" });
    expect(problems).toEqual([
      'HOOKLINE_STREAM_MAX_HELD_BYTES="1000" is invalid: must be an integer from 1048576 to 17179869184 (default 33554432)',
      'HOOKLINE_STREAM_MAX_AGE_MS="1209600001" is invalid: must be an integer from 1000 to 1209600000 (default 604800000)',
      'HOOKLINE_STREAM_NAMESPACE_MAX_MESSAGES="0" is invalid: must be an integer from 1 to 1000000000 (default 1000000)',
      'HOOKLINE_STREAM_NAMESPACE_MAX_BYTES="1GiB" is invalid: must be an integer from 1048576 to 1099511627776 (default 268435456)',
    ]);
  });

  it("stream mode's credentials besides the URL: a user with a password file, TLS files; insecure only when asked", () => {
    const base = { HOOKLINE_NATS_URL: "tls://nats.nats.svc:4222" };
    expect(loadConfig(base).natsAuth).toEqual({ allowInsecure: false });
    const c = loadConfig({
      ...base,
      HOOKLINE_NATS_USER: "hookline-operator",
      HOOKLINE_NATS_PASSWORD_FILE: "/etc/hookline/nats-credentials/password",
      HOOKLINE_NATS_TLS_CA_FILE: "/etc/hookline/nats-tls/ca.crt",
      HOOKLINE_NATS_TLS_CERT_FILE: "/etc/hookline/nats-tls/tls.crt",
      HOOKLINE_NATS_TLS_KEY_FILE: "/etc/hookline/nats-tls/tls.key",
      HOOKLINE_NATS_ALLOW_INSECURE: "false",
    });
    expect(c.natsAuth).toEqual({
      allowInsecure: false,
      credentials: { user: "hookline-operator", passwordFile: "/etc/hookline/nats-credentials/password" },
      tls: { caFile: "/etc/hookline/nats-tls/ca.crt", certFile: "/etc/hookline/nats-tls/tls.crt", keyFile: "/etc/hookline/nats-tls/tls.key" },
    });
    expect(loadConfig({ ...base, HOOKLINE_NATS_ALLOW_INSECURE: "true" }).natsAuth.allowInsecure).toBe(true);
  });

  it.each([
    [{ HOOKLINE_NATS_USER: "op" }, "HOOKLINE_NATS_USER is set without HOOKLINE_NATS_PASSWORD_FILE"],
    [{ HOOKLINE_NATS_PASSWORD_FILE: "/p" }, "HOOKLINE_NATS_PASSWORD_FILE is set without HOOKLINE_NATS_USER"],
    [{ HOOKLINE_NATS_TLS_CERT_FILE: "/c" }, "HOOKLINE_NATS_TLS_CERT_FILE is set without HOOKLINE_NATS_TLS_KEY_FILE"],
    [{ HOOKLINE_NATS_URL: "nats://u:p@nats:4222", HOOKLINE_NATS_USER: "op", HOOKLINE_NATS_PASSWORD_FILE: "/p" }, "give them once"],
    [{ HOOKLINE_NATS_ALLOW_INSECURE: "yes" }, 'HOOKLINE_NATS_ALLOW_INSECURE="yes" is invalid: must be true or false (default false)'],
  ])("refuses stream mode's credentials that cannot work: %j", (env, message) => {
    const problems = problemsOf({ HOOKLINE_NATS_URL: "nats://nats:4222", ...env });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(message);
    expect(problems[0]).not.toContain(":p@");
  });

  it("refuses stream mode's credentials without HOOKLINE_NATS_URL", () => {
    expect(problemsOf({ HOOKLINE_NATS_USER: "op", HOOKLINE_NATS_PASSWORD_FILE: "/p" })).toEqual(["HOOKLINE_NATS_USER, HOOKLINE_NATS_PASSWORD_FILE are set but HOOKLINE_NATS_URL is empty: they are stream mode's (set HOOKLINE_NATS_URL, or remove them)"]);
  });

  it("refuses WEBHOOK_DLQ_PATH (the specification's SQLite store) naming where dead letters are instead; empty is unset", () => {
    const [p] = problemsOf({ WEBHOOK_DLQ_PATH: "./data/webhook-dlq.db" });
    expect(p).toMatch(/^WEBHOOK_DLQ_PATH="\.\/data\/webhook-dlq\.db" is not used: Hookline keeps no dead-letter database; a dead letter is a WebhookDelivery in phase DeadLettered/);
    expect(p).toContain("WEBHOOK_DLQ_MAX_ENTRIES");
    expect(p).toContain("hookline.dev/replay");
    expect(problemsOf({ WEBHOOK_DLQ_PATH: "" })).toEqual([]);
    expect(problemsOf({ WEBHOOK_DLQ_PATH: "   " })).toEqual([]);
  });

  it("HOOKLINE_INSTALLATION: the Lease's namespace and name unless set", () => {
    expect(loadConfig({}).installation).toBe("default/hookline-leader");
    expect(loadConfig({ POD_NAMESPACE: "hookline", LEADER_ELECTION_LEASE_NAME: "prod-hookline" }).installation).toBe("hookline/prod-hookline");
    expect(loadConfig({ HOOKLINE_INSTALLATION: "eu-west/prod" }).installation).toBe("eu-west/prod");
    expect(problemsOf({ HOOKLINE_INSTALLATION: "a b" })[0]).toContain("HOOKLINE_INSTALLATION=\"a b\" is invalid");
    expect(problemsOf({ HOOKLINE_INSTALLATION: "x".repeat(129) })[0]).toContain("HOOKLINE_INSTALLATION=");
  });

  it("WEBHOOK_SECRET_REFRESH_MS: 30 s by default, 1 s .. 10 min", () => {
    expect(loadConfig({}).secretRefreshMs).toBe(30_000);
    expect(loadConfig({ WEBHOOK_SECRET_REFRESH_MS: "1000" }).secretRefreshMs).toBe(1_000);
    expect(problemsOf({ WEBHOOK_SECRET_REFRESH_MS: "999" }).join("\n")).toContain("WEBHOOK_SECRET_REFRESH_MS=\"999\" is invalid: must be an integer from 1000 to 600000");
  });
});

describe("loadConfig: HTTPS_PROXY, HTTP_PROXY, NO_PROXY", () => {
  it("none by default", () => {
    const c = loadConfig({});
    expect(c.proxy.httpsProxy).toBeUndefined();
    expect(c.proxy.httpProxy).toBeUndefined();
    expect(c.proxy.noProxy.all).toBe(false);
    expect(c.proxyText).toBe("");
  });

  it("reads the uppercase names first, then the lowercase ones (as Go does)", () => {
    const c = loadConfig({ HTTPS_PROXY: "http://upper:3128", https_proxy: "http://lower:3128", http_proxy: "proxy.infra:8080", no_proxy: ".svc,10.0.0.0/8" });
    expect(c.proxy.httpsProxy?.host).toBe("upper:3128");
    expect(c.proxy.httpProxy?.href).toBe("http://proxy.infra:8080/");
    expect(c.proxy.noProxy.domains).toEqual([{ suffix: ".svc", matchHost: false, port: "" }]);
    expect(c.proxy.noProxy.cidrs.map((x) => x.text)).toEqual(["10.0.0.0/8"]);
  });

  it("keeps credentials for the proxy but never prints them", () => {
    const c = loadConfig({ HTTPS_PROXY: "http://egress:hunter2@proxy:3128", NO_PROXY: ".svc" });
    expect(c.proxy.httpsProxy?.password).toBe("hunter2");
    expect(c.proxyText).toBe("HTTPS_PROXY=http://***@proxy:3128 NO_PROXY=.svc");
    const problems = problemsOf({ HTTPS_PROXY: "socks5://egress:hunter2@proxy:1080" });
    expect(problems).toEqual(["HTTPS_PROXY is invalid: scheme socks5 is not supported (an HTTP CONNECT proxy: http:// or https://)"]);
    expect(problems.join("")).not.toContain("hunter2");
  });

  it("a bad NO_PROXY entry is named", () => {
    expect(problemsOf({ NO_PROXY: ".svc,10.0.0.0/40" }).join("\n")).toContain('NO_PROXY=".svc,10.0.0.0/40" is invalid');
  });
});

describe("configWarnings: advice the operator logs at start", () => {
  it("none with the defaults (60 s cooldown; the default retry waits at most 17.6 s)", () => {
    expect(configWarnings(loadConfig({}))).toEqual([]);
    expect(configWarnings(loadConfig({ WEBHOOK_CB_TIMEOUT_MS: "17600" }))).toEqual([]);
  });

  it.each(["1000", "10000", "17599"])("WEBHOOK_CB_TIMEOUT_MS=%s, shorter than the default retry's largest delay: one warning naming the variable, both numbers and the fix", (value) => {
    const warnings = configWarnings(loadConfig({ WEBHOOK_CB_TIMEOUT_MS: value }));
    expect(warnings).toEqual([
      {
        variable: "WEBHOOK_CB_TIMEOUT_MS",
        message: `WEBHOOK_CB_TIMEOUT_MS=${value} is shorter than the largest delay of the default retry policy, 17600 ms (6 attempts, delays from 1s times 2, capped at 30s, jitter 10%): an open breaker would probe sooner than the retries wait, and a probe into the same outage opens it again at once; set it to at least 17600. Subscriptions that set circuitBreaker.cooldown or retry are checked on their own (condition ConfigurationAdvice).`,
      },
    ]);
  });
});

describe("the metrics server's variables", () => {
  it("defaults to plain HTTP without authentication (the chart sets METRICS_AUTH=kubernetes and the certificate)", () => {
    expect(loadConfig({}).metrics).toEqual({ auth: "none", tls: undefined });
  });

  it("kubernetes with a certificate and key", () => {
    expect(loadConfig({ METRICS_AUTH: "kubernetes", METRICS_TLS_CERT_FILE: "/tls/tls.crt", METRICS_TLS_KEY_FILE: "/tls/tls.key" }).metrics).toEqual({
      auth: "kubernetes",
      tls: { certFile: "/tls/tls.crt", keyFile: "/tls/tls.key" },
    });
  });

  it.each([
    [{ METRICS_AUTH: "kubernetes" }, "METRICS_AUTH=kubernetes needs METRICS_TLS_CERT_FILE and METRICS_TLS_KEY_FILE: scrapers send a bearer token, which must not cross the network in clear"],
    [{ METRICS_AUTH: "token" }, 'METRICS_AUTH="token" is invalid: must be one of none, kubernetes'],
    [{ METRICS_TLS_CERT_FILE: "/tls/tls.crt" }, "METRICS_TLS_KEY_FILE is missing: METRICS_TLS_CERT_FILE and METRICS_TLS_KEY_FILE go together"],
    [{ METRICS_AUTH: "kubernetes", METRICS_TLS_KEY_FILE: "/tls/tls.key" }, "METRICS_TLS_CERT_FILE is missing: METRICS_TLS_CERT_FILE and METRICS_TLS_KEY_FILE go together"],
  ])("refuses %j, naming the variable", (env, problem) => {
    const problems = problemsOf(env);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(problem);
  });
});
