import { describe, expect, it } from "vitest";
import { ConfigError, configWarnings, loadConfig } from "./config.js";

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe("tracing configuration (the OpenTelemetry variables)", () => {
  it("is off without an endpoint, or when disabled", () => {
    expect(loadConfig({}).tracing).toBeUndefined();
    expect(loadConfig({ OTEL_SERVICE_NAME: "x", OTEL_EXPORTER_OTLP_HEADERS: "a=b" }).tracing).toBeUndefined();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", OTEL_SDK_DISABLED: "true" }).tracing).toBeUndefined();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", OTEL_TRACES_EXPORTER: "none" }).tracing).toBeUndefined();
  });

  it("appends /v1/traces to the base endpoint and uses the traces endpoint as it is", () => {
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }).tracing?.url).toBe("http://collector:4318/v1/traces");
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "https://otel.example/base/" }).tracing?.url).toBe("https://otel.example/base/v1/traces");
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://b:4318/custom" }).tracing?.url).toBe("http://b:4318/custom");
  });

  it("reads headers (percent-decoded, traces-specific ones winning), the service name, resource attributes, sampler and timings", () => {
    const t = loadConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
      OTEL_EXPORTER_OTLP_HEADERS: "api-key=s3cr%3Dt%2C1 , x-tenant=acme",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: "x-tenant=globex",
      OTEL_SERVICE_NAME: "hookline-prod",
      OTEL_RESOURCE_ATTRIBUTES: "deployment.environment.name=prod,service.name=ignored",
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0.25",
      OTEL_BSP_SCHEDULE_DELAY: "100",
      OTEL_EXPORTER_OTLP_TIMEOUT: "2000",
    }).tracing!;
    expect(t.headers).toEqual({ "api-key": "s3cr=t,1", "x-tenant": "globex" });
    expect(t.headerNames).toEqual(["api-key", "x-tenant"]);
    expect(t.serviceName).toBe("hookline-prod");
    expect(t.resourceAttributes).toEqual({ "deployment.environment.name": "prod", "service.name": "ignored" });
    expect(t.sampler).toEqual({ name: "parentbased_traceidratio", ratio: 0.25 });
    expect(t.scheduleDelayMs).toBe(100);
    expect(t.exportTimeoutMs).toBe(2000);
    // The service name defaults to hookline, then OTEL_RESOURCE_ATTRIBUTES' service.name.
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }).tracing?.serviceName).toBe("hookline");
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_RESOURCE_ATTRIBUTES: "service.name=from-attrs" }).tracing?.serviceName).toBe("from-attrs");
  });

  it("redacts credentials of the endpoint for the log", () => {
    const t = loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "https://user:pw@otel.example:4318?key=secret" }).tracing!;
    expect(t.urlRedacted).not.toMatch(/pw|secret|user/);
    expect(t.urlRedacted).toContain("otel.example:4318");
  });

  it("refuses bad values naming the variable, never repeating a header value", () => {
    expect(problemsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318 " })[0]).toMatch(/^OTEL_EXPORTER_OTLP_ENDPOINT is invalid: Hookline exports OTLP over HTTP/);
    expect(problemsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "not a url" })[0]).toMatch(/^OTEL_EXPORTER_OTLP_ENDPOINT is invalid: not a URL/);
    expect(problemsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })[0]).toMatch(/^OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported/);
    const headerProblem = problemsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_HEADERS: "api-key=line%0Abreak-s3cret" });
    expect(headerProblem[0]).toMatch(/^OTEL_EXPORTER_OTLP_HEADERS entry 1 \("api-key"\) is invalid/);
    expect(headerProblem.join()).not.toContain("s3cret");
    expect(problemsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_HEADERS: "novalue-s3cret" }).join()).not.toContain("s3cret");
    expect(problemsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_SAMPLER: "sometimes" })[0]).toMatch(/^OTEL_TRACES_SAMPLER="sometimes" is not supported/);
    expect(problemsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "2" })[0]).toMatch(/^OTEL_TRACES_SAMPLER_ARG="2" is invalid/);
    expect(problemsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_BSP_SCHEDULE_DELAY: "soon" })[0]).toMatch(/^OTEL_BSP_SCHEDULE_DELAY="soon" is invalid/);
    expect(problemsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "zipkin" })[0]).toMatch(/^OTEL_TRACES_EXPORTER="zipkin" is not supported/);
  });

  it("warns that http/protobuf is sent as JSON", () => {
    const config = loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf" });
    expect(configWarnings(config).map((w) => w.variable)).toContain("OTEL_EXPORTER_OTLP_PROTOCOL");
  });
});

describe("publish door configuration", () => {
  it("accepts tokens for the audience hookline by default", () => {
    const c = loadConfig({});
    expect(c.publish.audiences).toEqual(["hookline"]);
    expect(c.publish.tls).toBeUndefined();
    expect(c.publish.authFailures).toEqual({ burst: 10, perMinute: 10 });
  });

  it("reads the audiences, the TLS files and the failed-authentication limit", () => {
    const c = loadConfig({
      PUBLISH_PORT: "8090",
      PUBLISH_TOKEN_AUDIENCES: "hookline, https://kubernetes.default.svc ,hookline",
      PUBLISH_TLS_CERT_FILE: "/etc/hookline/publish-tls/tls.crt",
      PUBLISH_TLS_KEY_FILE: "/etc/hookline/publish-tls/tls.key",
      PUBLISH_AUTH_FAILURE_BURST: "3",
      PUBLISH_AUTH_FAILURE_PER_MINUTE: "60",
    });
    expect(c.publishPort).toBe(8090);
    expect(c.publish.audiences).toEqual(["hookline", "https://kubernetes.default.svc"]);
    expect(c.publish.tls).toEqual({ certFile: "/etc/hookline/publish-tls/tls.crt", keyFile: "/etc/hookline/publish-tls/tls.key" });
    expect(c.publish.authFailures).toEqual({ burst: 3, perMinute: 60 });
  });

  it("refuses half a TLS pair, a bad audience list and out-of-range limits", () => {
    expect(problemsOf({ PUBLISH_TLS_CERT_FILE: "/tls.crt" })[0]).toMatch(/^PUBLISH_TLS_KEY_FILE is missing/);
    expect(problemsOf({ PUBLISH_TLS_KEY_FILE: "/tls.key" })[0]).toMatch(/^PUBLISH_TLS_CERT_FILE is missing/);
    expect(problemsOf({ PUBLISH_TOKEN_AUDIENCES: "a b" })[0]).toMatch(/^PUBLISH_TOKEN_AUDIENCES="a b" is invalid/);
    expect(problemsOf({ PUBLISH_AUTH_FAILURE_BURST: "0" })[0]).toMatch(/^PUBLISH_AUTH_FAILURE_BURST="0" is invalid: must be an integer from 1 to 100000/);
    expect(problemsOf({ PUBLISH_PORT: "http" })[0]).toMatch(/^PUBLISH_PORT="http" is invalid/);
  });
});
