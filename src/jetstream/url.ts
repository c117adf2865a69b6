// HOOKLINE_NATS_URL and `--nats URL`: one nats:// or tls:// URL, or a comma-separated list of
// them (the servers of one NATS cluster), the way the nats CLI's NATS_URL reads. Pure: parsed
// here once, for the config (validated at start) and for every client that connects.
//
// nats.js ignores credentials in a server URL, so they are taken out here and passed as options:
// nats://USER:PASSWORD@host and nats://TOKEN@host. They never appear in a message or a log line:
// redactNatsUrl is what is shown.

export class NatsUrlError extends Error {
  override readonly name = "NatsUrlError";
}

export interface NatsServers {
  /** host:port of each server, for nats.js `servers` (port 4222 when the URL has none). */
  servers: string[];
  /** tls:// : the connection must use TLS. */
  tls: boolean;
  user?: string;
  pass?: string;
  token?: string;
}

const DEFAULT_PORT = 4222;

// A comma followed by a scheme starts the next URL of a list; any other comma may be inside a
// password written raw (as may "/", "@", ":" and spaces), so it does not end the one before.
const NEXT_URL = /,(?=\s*[a-z][a-z0-9+.-]*:\/\/)/i;
const SCHEME = /^(\s*[a-z][a-z0-9+.-]*:\/\/)?/i;
const PORT = /^\d*\/?\s*$/;

/**
 * The URL(s) with any password or token replaced by "***", for messages and logs. Written for
 * text that may not parse (it is shown in the error that says so): the user information of a
 * URL runs to its last "@" (a host has none), whatever characters the password holds; and in a
 * URL without "@", what follows a colon that is not a port is taken for a password.
 */
export function redactNatsUrl(text: string): string {
  return text
    .split(NEXT_URL)
    .map((one) => {
      const scheme = SCHEME.exec(one)![0];
      const rest = one.slice(scheme.length);
      const at = rest.lastIndexOf("@");
      if (at >= 0) {
        const colon = rest.indexOf(":");
        return `${scheme}${colon >= 0 && colon < at ? `${rest.slice(0, colon)}:***` : "***"}${rest.slice(at)}`;
      }
      // An IPv6 host's colons are inside its brackets.
      const colon = rest.indexOf(":", rest.startsWith("[") ? Math.max(0, rest.indexOf("]")) : 0);
      if (colon < 0 || PORT.test(rest.slice(colon + 1))) return one;
      return `${scheme}${rest.slice(0, colon)}:***`;
    })
    .join(",");
}

function parseOne(entry: string): { server: string; tls: boolean; user?: string; pass?: string; token?: string } {
  const shown = redactNatsUrl(entry);
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(entry)) throw new NatsUrlError(`"${shown}" is not a URL: write nats://HOST:PORT or tls://HOST:PORT`);
  let url: URL;
  try {
    url = new URL(entry);
  } catch {
    throw new NatsUrlError(`"${shown}" is not a valid URL`);
  }
  const scheme = url.protocol.slice(0, -1).toLowerCase();
  if (scheme !== "nats" && scheme !== "tls") throw new NatsUrlError(`"${shown}" has the scheme ${scheme}://; use nats:// (or tls:// to require TLS)`);
  if (!url.hostname) throw new NatsUrlError(`"${shown}" has no host`);
  if ((url.pathname !== "" && url.pathname !== "/") || url.search || url.hash) throw new NatsUrlError(`"${shown}" must be only scheme, host and port (no path, query or fragment)`);
  const port = url.port === "" ? DEFAULT_PORT : Number(url.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new NatsUrlError(`"${shown}" has an invalid port`);
  const host = url.hostname.includes(":") && !url.hostname.startsWith("[") ? `[${url.hostname}]` : url.hostname;
  const decode = (s: string) => decodeURIComponent(s);
  const creds = url.password !== "" ? { user: decode(url.username), pass: decode(url.password) } : url.username !== "" ? { token: decode(url.username) } : {};
  return { server: `${host}:${port}`, tls: scheme === "tls", ...creds };
}

/** Parses HOOKLINE_NATS_URL / --nats; throws NatsUrlError with a sentence naming the problem. */
export function parseNatsUrl(text: string): NatsServers {
  const entries = text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  if (entries.length === 0) throw new NatsUrlError("no URL given: write nats://HOST:PORT");
  const parsed = entries.map(parseOne);
  const first = parsed[0]!;
  for (const p of parsed.slice(1)) {
    if (p.tls !== first.tls) throw new NatsUrlError("mixes nats:// and tls:// URLs: the servers of one cluster take one scheme");
    if (p.user !== first.user || p.pass !== first.pass || p.token !== first.token) throw new NatsUrlError("has different credentials in different URLs: give them once, the same for every server");
  }
  return {
    servers: parsed.map((p) => p.server),
    tls: first.tls,
    ...(first.user !== undefined ? { user: first.user } : {}),
    ...(first.pass !== undefined ? { pass: first.pass } : {}),
    ...(first.token !== undefined ? { token: first.token } : {}),
  };
}
