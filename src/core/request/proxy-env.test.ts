import { describe, expect, it } from "vitest";
import { bypassesProxy, parseNoProxy, parseProxyUrl, proxyFor, redactProxyUrl, type ProxyEnv } from "./proxy-env.js";

describe("NO_PROXY, as Go's net/http and curl read it", () => {
  // [NO_PROXY, host, port, bypassed]
  it.each<[string, string, string, boolean]>([
    ["", "hooks.example.com", "443", false],
    ["*", "hooks.example.com", "443", true],
    ["example.com", "example.com", "443", true],
    ["example.com", "hooks.example.com", "443", true],
    ["example.com", "a.b.example.com", "443", true],
    ["example.com", "notexample.com", "443", false],
    ["example.com", "example.com.evil.net", "443", false],
    [".example.com", "hooks.example.com", "443", true],
    [".example.com", "example.com", "443", false],
    ["*.example.com", "hooks.example.com", "443", true],
    ["*.example.com", "example.com", "443", false],
    ["EXAMPLE.com", "Hooks.Example.COM", "443", true],
    ["example.com", "hooks.example.com.", "443", true],
    ["example.com:8443", "hooks.example.com", "8443", true],
    ["example.com:8443", "hooks.example.com", "443", false],
    [" a.test , example.com ", "hooks.example.com", "443", true],
    ["10.1.2.3", "10.1.2.3", "443", true],
    ["10.1.2.3", "10.1.2.4", "443", false],
    ["10.1.2.3:8080", "10.1.2.3", "8080", true],
    ["10.1.2.3:8080", "10.1.2.3", "443", false],
    ["10.0.0.0/8", "10.200.0.1", "443", true],
    ["10.0.0.0/8", "11.0.0.1", "443", false],
    // A CIDR matches IP literals only, never names (Go): the name is not resolved for NO_PROXY.
    ["10.0.0.0/8", "svc.cluster.local", "443", false],
    ["fd00::/8", "[fd12::1]", "443", true],
    ["::ffff:10.0.0.1", "10.0.0.1", "443", true],
    ["2001:DB8:0::1", "[2001:db8::1]", "443", true],
    ["[2001:db8::1]:443", "[2001:db8::1]", "443", true],
    ["2001:db8::1", "[2001:db8::1]", "8443", true],
    [".svc,.cluster.local", "orders.shop.svc", "80", true],
    // localhost and loopback addresses are never proxied (Go).
    ["", "localhost", "8080", true],
    ["", "api.localhost", "8080", true],
    ["", "127.0.0.1", "8080", true],
    ["", "127.9.9.9", "8080", true],
    ["", "[::1]", "8080", true],
    [":80", "hooks.example.com", "80", false],
  ])("NO_PROXY=%j: %s:%s bypassed=%s", (noProxy, host, port, bypassed) => {
    expect(bypassesProxy(parseNoProxy(noProxy), host, port)).toBe(bypassed);
  });

  it("a malformed CIDR is an error naming it; anything else is a domain", () => {
    expect(() => parseNoProxy("example.com,10.0.0.0/33")).toThrow(/10\.0\.0\.0\/33/);
    expect(parseNoProxy("not_a_domain").domains).toHaveLength(1);
  });
});

describe("proxyFor: HTTPS_PROXY for https, HTTP_PROXY for http, unless NO_PROXY", () => {
  const env: ProxyEnv = { httpsProxy: new URL("http://tls-proxy:3128"), httpProxy: new URL("http://plain-proxy:3128"), noProxy: parseNoProxy(".internal") };
  it.each<[string, string, string, string | undefined]>([
    ["https:", "hooks.example.com", "", "http://tls-proxy:3128"],
    ["http:", "hooks.example.com", "", "http://plain-proxy:3128"],
    ["https:", "a.internal", "", undefined],
    ["https:", "127.0.0.1", "8443", undefined],
  ])("%s//%s:%s -> %s", (protocol, hostname, port, want) => {
    expect(proxyFor(env, { protocol, hostname, port })?.origin).toBe(want);
  });
  it("only one of them set: the other scheme goes direct", () => {
    expect(proxyFor({ ...env, httpProxy: undefined }, { protocol: "http:", hostname: "hooks.example.com", port: "" })).toBeUndefined();
  });
});

describe("parseProxyUrl", () => {
  it("reads proxy:3128 as http://proxy:3128 (Go) and keeps credentials for Proxy-Authorization", () => {
    expect(parseProxyUrl("proxy:3128").href).toBe("http://proxy:3128/");
    expect(parseProxyUrl("https://u:p%40ss@proxy:443").password).toBe("p%40ss");
  });
  it.each([
    ["socks5://proxy:1080", /socks5 is not supported/],
    ["http://", /not a URL|no host/],
  ])("refuses %s", (value, message) => {
    expect(() => parseProxyUrl(value)).toThrow(message);
  });
  it("redacts credentials for logs", () => {
    expect(redactProxyUrl(new URL("http://user:hunter2@proxy:3128"))).toBe("http://***@proxy:3128");
    expect(redactProxyUrl(new URL("http://proxy:3128"))).toBe("http://proxy:3128");
  });
});
