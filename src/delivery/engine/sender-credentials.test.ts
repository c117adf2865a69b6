// The sender's receiver credentials against real servers on 127.0.0.1: an HTTPS receiver that
// requires a client certificate from a test CA (made with openssl), a CONNECT proxy, and the
// network guard applied to both the proxy's address and the destination. Names are resolved
// by an injected lookup (receiver.test -> 127.0.0.1), so the environment's proxies, which
// never apply to loopback addresses, can be exercised.
import { createHash } from "node:crypto";
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConnectProxy } from "../../../test/helpers/connect-proxy.js";
import { TestCa, type Pem } from "../../../test/helpers/pki.js";
import { Receiver } from "../../../test/helpers/receiver.js";
import { classify } from "../../core/attempt/classify.js";
import { parseCidrList } from "../../core/request/netguard.js";
import { NO_PROXY_NONE, parseNoProxy } from "../../core/request/proxy-env.js";
import { BLOCKED_ADDRESS_CODE } from "../../core/attempt/classify.js";
import { PROXY_CODES, RESPONSE_TOO_LARGE, Sender, type SenderOptions, type TlsIdentity } from "./sender.js";

const LOOPBACK = parseCidrList("127.0.0.0/8");
const NAMES: Record<string, string> = { "receiver.test": "127.0.0.1", "metadata.test": "169.254.169.254", "public.test": "93.184.215.14" };
const fakeLookup = ((hostname: string, options: { all?: boolean }, cb: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) => {
  const address = NAMES[hostname];
  if (!address) return dnsLookup(hostname, { all: true }, cb);
  cb(null, [{ address, family: 4 }]);
}) as unknown as typeof dnsLookup;

const identity = (pem: Partial<Pem>, ca?: string): TlsIdentity => ({
  ...(pem.cert ? { cert: pem.cert, key: pem.key! } : {}),
  ...(ca ? { ca } : {}),
  id: createHash("sha256").update(`${pem.cert ?? ""}|${pem.key ?? ""}|${ca ?? ""}`).digest("hex"),
});

let ca: TestCa;
let otherCa: TestCa;
let client1: Pem;
let client2: Pem;
let stranger: Pem;
let tlsReceiver: Receiver;
let plain: Receiver;
let proxy: ConnectProxy;
const senders: Sender[] = [];
const sender = (opts: Partial<SenderOptions> = {}) => {
  const s = new Sender({ allowedNetworks: LOOPBACK, lookup: fakeLookup, ...opts });
  senders.push(s);
  return s;
};
const post = (s: Sender, url: string, extra: Partial<Parameters<Sender["send"]>[0]> = {}) => s.send({ url, headers: { "content-type": "application/json" }, body: "{}", timeoutMs: 5_000, ...extra });

beforeAll(async () => {
  ca = await TestCa.create("Receiver CA");
  otherCa = await TestCa.create("Someone else's CA");
  const server = await ca.issue("receiver", "server");
  [client1, client2, stranger] = await Promise.all([ca.issue("hookline-client-1", "client"), ca.issue("hookline-client-2", "client"), otherCa.issue("stranger", "client")]);
  tlsReceiver = await Receiver.startHttps({ cert: server.cert, key: server.key, clientCa: ca.cert, requireClientCert: true });
  plain = await Receiver.start();
  proxy = await ConnectProxy.start();
}, 60_000);

afterAll(async () => {
  await Promise.all(senders.map((s) => s.destroy()));
  await Promise.all([tlsReceiver?.close(), plain?.close(), proxy?.close()]);
  await Promise.all([ca?.close(), otherCa?.close()]);
});

describe("Sender: client certificates and a private CA", () => {
  it("presents the client certificate and trusts only the given CA", async () => {
    const s = sender();
    const sent = await post(s, tlsReceiver.url(), { tls: identity(client1, ca.cert) });
    expect(sent).toMatchObject({ kind: "response", status: 200 });
    expect(tlsReceiver.requests.at(-1)!.clientCertificate?.cn).toBe("hookline-client-1");
  });

  it("without a client certificate the receiver refuses the handshake; nothing is delivered", async () => {
    const before = tlsReceiver.requests.length;
    const sent = await post(sender(), tlsReceiver.url(), { tls: identity({}, ca.cert) });
    expect(sent.kind).toBe("error");
    expect(tlsReceiver.requests.length).toBe(before);
  });

  it("a certificate from another CA is refused the same way", async () => {
    const before = tlsReceiver.requests.length;
    const sent = await post(sender(), tlsReceiver.url(), { tls: identity(stranger, ca.cert) });
    expect(sent.kind).toBe("error");
    expect(tlsReceiver.requests.length).toBe(before);
  });

  it("without the private CA the server's certificate is not trusted (a TLS error)", async () => {
    const sent = await post(sender(), tlsReceiver.url(), { tls: identity(client1) });
    expect(sent.kind).toBe("error");
    if (sent.kind !== "error") return;
    expect(classify({ kind: "error", code: sent.code, name: sent.code }).reason).toBe("tls");
    expect(sent.message).toMatch(/^TLS error/);
  });

  it("one dispatcher per TLS identity, reused; a rotated certificate is a new one; idle ones are closed", async () => {
    const s = sender({ idleDispatcherMs: 60_000 });
    expect(s.dispatchers).toBe(1);
    for (let i = 0; i < 3; i++) expect(await post(s, tlsReceiver.url(), { tls: identity(client1, ca.cert) })).toMatchObject({ status: 200 });
    expect(s.dispatchers).toBe(2);
    expect(await post(s, tlsReceiver.url(), { tls: identity(client2, ca.cert) })).toMatchObject({ status: 200 });
    expect(tlsReceiver.requests.at(-1)!.clientCertificate?.cn).toBe("hookline-client-2");
    expect(s.dispatchers).toBe(3);
    await s.closeIdle(Date.now() + 30_000);
    expect(s.dispatchers).toBe(3);
    await s.closeIdle(Date.now() + 61_000);
    expect(s.dispatchers).toBe(1);
    // Used again after being closed: a new dispatcher, the same certificate.
    expect(await post(s, tlsReceiver.url(), { tls: identity(client2, ca.cert) })).toMatchObject({ status: 200 });
    expect(s.dispatchers).toBe(2);
  });
});

describe("Sender: through an HTTP CONNECT proxy", () => {
  it("spec.proxy.url: the request reaches the receiver through the proxy, which is asked for the checked IP", async () => {
    const before = proxy.connects.length;
    const sent = await post(sender(), plain.url().replace("127.0.0.1", "receiver.test"), { proxyUrl: proxy.url() });
    expect(sent).toMatchObject({ kind: "response", status: 200 });
    expect(proxy.connects.slice(before).map((c) => c.authority)).toEqual([`127.0.0.1:${plain.port}`]);
    expect(plain.requests.at(-1)!.headers.host).toBe(`receiver.test:${plain.port}`);
  });

  it("TLS with a client certificate runs end to end inside the tunnel", async () => {
    const before = proxy.connects.length;
    const sent = await post(sender(), tlsReceiver.url(), { proxyUrl: proxy.url(), tls: identity(client1, ca.cert) });
    expect(sent).toMatchObject({ kind: "response", status: 200 });
    expect(proxy.connects.slice(before).map((c) => c.authority)).toEqual([`127.0.0.1:${tlsReceiver.port}`]);
    expect(tlsReceiver.requests.at(-1)!.clientCertificate?.cn).toBe("hookline-client-1");
  });

  it.each([
    ["an IP outside WEBHOOK_ALLOWED_NETWORKS", "http://10.20.30.40:8080/hook", /10\.20\.30\.40 is private/],
    ["a name resolving to the metadata address", "https://metadata.test/latest", /metadata\.test resolves to 169\.254\.169\.254/],
    ["plain http to a public address", "http://public.test/hook", /plain http to public address 93\.184\.215\.14/],
  ])("the guard refuses %s before any CONNECT is sent", async (_what, url, message) => {
    const before = proxy.connects.length;
    const sent = await post(sender(), url, { proxyUrl: proxy.url() });
    expect(sent).toMatchObject({ kind: "error", code: BLOCKED_ADDRESS_CODE });
    if (sent.kind === "error") expect(sent.message).toMatch(message);
    expect(proxy.connects.length).toBe(before);
  });

  it("the guard refuses a proxy outside WEBHOOK_ALLOWED_NETWORKS (nothing is sent)", async () => {
    const sent = await post(sender(), plain.url(), { proxyUrl: "http://10.9.9.9:3128" });
    expect(sent).toMatchObject({ kind: "error", code: BLOCKED_ADDRESS_CODE });
    if (sent.kind === "error") expect(sent.message).toMatch(/^proxy address 10\.9\.9\.9 is private/);
  });

  it("a proxy that demands credentials: 407 without them, Proxy-Authorization from the URL's user info", async () => {
    const authProxy = await ConnectProxy.start({ requireAuth: `Basic ${Buffer.from("egress:p@ss").toString("base64")}` });
    try {
      const refused = await post(sender(), plain.url(), { proxyUrl: authProxy.url() });
      expect(refused).toMatchObject({ kind: "error", code: PROXY_CODES.auth });
      const s = sender({ proxy: { httpsProxy: undefined, httpProxy: new URL(`http://egress:p%40ss@127.0.0.1:${authProxy.port}`), noProxy: NO_PROXY_NONE } });
      expect(await post(s, plain.url().replace("127.0.0.1", "receiver.test"))).toMatchObject({ kind: "response", status: 200 });
      expect(authProxy.connects.at(-1)!.answered).toBe(200);
    } finally {
      await authProxy.close();
    }
  });

  it("a proxy that refuses the CONNECT (the target is down): the proxy's status in the message", async () => {
    const sent = await post(sender(), "http://127.0.0.1:1/hook", { proxyUrl: proxy.url() });
    expect(sent).toMatchObject({ kind: "error", code: PROXY_CODES.refused, message: "the proxy answered CONNECT with 502" });
  });
});

describe("Sender: HTTPS_PROXY, HTTP_PROXY and NO_PROXY", () => {
  const envSender = (noProxy: string) => sender({ proxy: { httpsProxy: new URL(proxy.url()), httpProxy: new URL(proxy.url()), noProxy: parseNoProxy(noProxy) } });

  it.each([
    ["", true],
    ["receiver.test", false],
    [".test", false],
    ["*", false],
    ["other.test,example.com", true],
    // A CIDR matches IP literals only: the name still goes through the proxy.
    ["127.0.0.0/8", true],
  ])("NO_PROXY=%j: through the proxy = %s", async (noProxy, proxied) => {
    const before = { connects: proxy.connects.length, requests: plain.requests.length };
    expect(await post(envSender(noProxy), plain.url().replace("127.0.0.1", "receiver.test"))).toMatchObject({ kind: "response", status: 200 });
    expect(proxy.connects.length - before.connects).toBe(proxied ? 1 : 0);
    expect(plain.requests.length - before.requests).toBe(1);
  });

  it("a loopback address never goes through the environment's proxy; spec.proxy.url still does", async () => {
    const s = envSender("");
    const before = proxy.connects.length;
    expect(await post(s, plain.url())).toMatchObject({ status: 200 });
    expect(proxy.connects.length).toBe(before);
    expect(await post(s, plain.url(), { proxyUrl: proxy.url() })).toMatchObject({ status: 200 });
    expect(proxy.connects.length).toBe(before + 1);
  });
});

describe("Sender: a response body returned up to a cap (token requests)", () => {
  let big: Server;
  let url: string;
  beforeAll(async () => {
    big = createServer((req, res) => {
      req.resume();
      res.end(req.url === "/big" ? "x".repeat(100_000) : '{"ok":true}');
    });
    await new Promise<void>((r) => big.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(big.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    big.closeAllConnections();
    await new Promise((r) => big.close(r));
  });

  it("returns a small body, refuses one above the cap", async () => {
    const s = sender();
    expect(await post(s, `${url}/small`, { responseBodyLimit: 65_536 })).toMatchObject({ kind: "response", status: 200, body: '{"ok":true}' });
    expect(await post(s, `${url}/big`, { responseBodyLimit: 65_536 })).toMatchObject({ kind: "error", code: RESPONSE_TOO_LARGE });
    expect(await post(s, `${url}/big`)).toMatchObject({ kind: "response", status: 200 });
  });
});
