// Which proxy a request takes under the standard environment (HTTPS_PROXY, HTTP_PROXY,
// NO_PROXY), with NO_PROXY read the way Go's net/http (golang.org/x/net/http/httpproxy) and
// curl read it: comma-separated entries, each `*` (no proxy at all), an IP address, a CIDR, or
// a domain (`example.com` matches it and its subdomains; `.example.com` and `*.example.com`
// only its subdomains), any of them optionally with `:port`. localhost and loopback
// addresses never go through a proxy. Pure: config/ parses, the sender asks.
import { isIP } from "node:net";
import { cidrContains, classifyAddress, embeddedIPv4, parseCidr, type Cidr } from "./netguard.js";

const V4_MAPPED = parseCidr("::ffff:0:0/96");

export interface NoProxy {
  /** `*`: nothing goes through the environment's proxies. */
  all: boolean;
  ips: Array<{ ip: string; port: string }>;
  cidrs: Cidr[];
  /** `host` with a leading dot; `matchHost`: the bare domain matches too. */
  domains: Array<{ suffix: string; matchHost: boolean; port: string }>;
}

export interface ProxyEnv {
  /** For https:// destinations. */
  httpsProxy: URL | undefined;
  /** For http:// destinations. */
  httpProxy: URL | undefined;
  noProxy: NoProxy;
}

export const NO_PROXY_NONE: NoProxy = { all: false, ips: [], cidrs: [], domains: [] };

/** Parses NO_PROXY; throws an Error naming the first entry that looks like a CIDR but is not one. */
export function parseNoProxy(value: string): NoProxy {
  const out: NoProxy = { all: false, ips: [], cidrs: [], domains: [] };
  for (const raw of value.split(",")) {
    const entry = raw.trim().toLowerCase();
    if (entry === "") continue;
    if (entry === "*") return { ...NO_PROXY_NONE, all: true };
    if (entry.includes("/")) {
      out.cidrs.push(parseCidr(entry));
      continue;
    }
    const { host, port } = splitHostPort(entry);
    if (host === "") continue; // ":80": no host part, ignored as Go does
    if (isIP(host)) {
      out.ips.push({ ip: normalizeIp(host), port });
      continue;
    }
    let suffix = host.startsWith("*.") ? host.slice(1) : host;
    const matchHost = !suffix.startsWith(".");
    if (matchHost) suffix = `.${suffix}`;
    out.domains.push({ suffix: stripDot(suffix), matchHost, port });
  }
  return out;
}

/** Whether NO_PROXY exempts `host` (a name or an IP literal, brackets allowed) on `port`. */
export function bypassesProxy(noProxy: NoProxy, hostInput: string, port: string): boolean {
  const host = stripDot(stripBrackets(hostInput).toLowerCase());
  if (host === "localhost" || host.endsWith(".localhost")) return true;
  const ip = isIP(host) ? normalizeIp(host) : undefined;
  if (ip !== undefined && classifyAddress(ip) === "loopback") return true;
  if (noProxy.all) return true;
  if (ip !== undefined) {
    if (noProxy.ips.some((m) => m.ip === ip && (m.port === "" || m.port === port))) return true;
    if (noProxy.cidrs.some((c) => cidrContains(c, ip))) return true;
  }
  return noProxy.domains.some((m) => (host.endsWith(m.suffix) || (m.matchHost && host === m.suffix.slice(1))) && (m.port === "" || m.port === port));
}

/** The environment's proxy for a request to `url`, or undefined to connect directly. */
export function proxyFor(env: ProxyEnv, url: { protocol: string; hostname: string; port: string }): URL | undefined {
  const proxy = url.protocol === "https:" ? env.httpsProxy : url.protocol === "http:" ? env.httpProxy : undefined;
  if (!proxy) return undefined;
  const port = url.port || (url.protocol === "https:" ? "443" : "80");
  return bypassesProxy(env.noProxy, url.hostname, port) ? undefined : proxy;
}

/**
 * Parses a proxy URL as Go does (`proxy:3128` means `http://proxy:3128`). Only http:// and
 * https:// proxies (HTTP CONNECT) are supported. Throws an Error that never repeats credentials.
 */
export function parseProxyUrl(value: string): URL {
  const text = value.includes("://") ? value : `http://${value}`;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error("not a URL (expected http://host:port or https://host:port)");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error(`scheme ${url.protocol.replace(/:$/, "")} is not supported (an HTTP CONNECT proxy: http:// or https://)`);
  if (url.hostname === "") throw new Error("the URL has no host");
  return url;
}

/** A proxy URL fit for logs: the credentials replaced. */
export function redactProxyUrl(url: URL): string {
  if (!url.username && !url.password) return url.origin;
  return `${url.protocol}//***@${url.host}`;
}

function splitHostPort(entry: string): { host: string; port: string } {
  if (entry.startsWith("[")) {
    const end = entry.indexOf("]");
    if (end !== -1) {
      const rest = entry.slice(end + 1);
      return { host: entry.slice(1, end), port: rest.startsWith(":") ? rest.slice(1) : "" };
    }
  }
  const colon = entry.lastIndexOf(":");
  // More than one colon and no brackets: an IPv6 address without a port.
  if (colon === -1 || entry.indexOf(":") !== colon) return { host: entry, port: "" };
  return { host: entry.slice(0, colon), port: entry.slice(colon + 1) };
}

function normalizeIp(ip: string): string {
  // "2001:DB8::1" and "2001:db8:0::1" are one address: compare the normalised text.
  const zone = ip.indexOf("%");
  const bare = zone === -1 ? ip : ip.slice(0, zone);
  // An IPv4-mapped IPv6 address is that IPv4 address (Go's net.IP.Equal).
  if (cidrContains(V4_MAPPED, bare)) return embeddedIPv4(bare)!;
  return parseCidr(bare).text.replace(/\/\d+$/, "");
}

function stripBrackets(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

function stripDot(host: string): string {
  return host.endsWith(".") ? host.slice(0, -1) : host;
}
