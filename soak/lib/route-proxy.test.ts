// The partition proxy with real sockets on 127.0.0.1: bytes pass; a cut node's links carry
// nothing until the heal, then what was held arrives and a connection made meanwhile goes through;
// the advertised sink closes every connection.
import { createServer, connect, type Server, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { RouteProxies } from "./route-proxy.js";

const servers: Server[] = [];
let proxies: RouteProxies | undefined;
afterEach(async () => {
  await proxies?.close();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A "cluster port" that echoes, counting its connections. */
async function echo(): Promise<{ port: number; accepted: () => number; seen: () => string }> {
  let n = 0;
  let seen = "";
  const s = createServer((c) => {
    n++;
    c.on("error", () => undefined);
    c.on("data", (d: Buffer) => (seen += d.toString()));
    c.pipe(c);
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  return { port: (s.address() as { port: number }).port, accepted: () => n, seen: () => seen };
}

function dial(port: number): Promise<Socket & { received: () => string; next: (text: string) => Promise<void> }> {
  return new Promise((resolve, reject) => {
    let got = "";
    const waiters: Array<() => void> = [];
    const s = connect({ host: "127.0.0.1", port }, () =>
      resolve(
        Object.assign(s, {
          received: () => got,
          next: (text: string) => new Promise<void>((r) => (got.includes(text) ? r() : waiters.push(() => got.includes(text) && r()))),
        }),
      ),
    );
    s.on("data", (d: Buffer) => {
      got += d.toString();
      for (const w of waiters) w();
    });
    s.on("error", reject);
  });
}

describe("route proxies", () => {
  it("carry bytes; a cut node's links hold them until the heal; a connection made while cut goes through after it", async () => {
    const two = await echo();
    proxies = await RouteProxies.start([1, two.port]);
    const a = await dial(proxies.port(1, 2));
    a.write("hello");
    await a.next("hello");
    proxies.isolate(2);
    a.write(" held");
    const b = await dial(proxies.port(1, 2));
    b.write("late");
    // A round trip on a link of another pair, through the same event loop: what a cut link carried would have arrived by now.
    const three = await echo();
    const other = await RouteProxies.start([1, three.port]);
    const c = await dial(other.port(1, 2));
    c.write("ping");
    await c.next("ping");
    c.destroy();
    await other.close();
    expect(proxies.linksOf(2)).toBe(2);
    expect(two.seen()).toBe("hello");
    expect(two.accepted()).toBe(1);
    proxies.heal(2);
    await a.next("hello held");
    await b.next("late");
    expect(two.accepted()).toBe(2);
    a.destroy();
    b.destroy();
  });

  it("the sink closes every connection at once", async () => {
    proxies = await RouteProxies.start([1, 2]);
    const [host, port] = proxies.sink.split(":");
    expect(host).toBe("127.0.0.1");
    const closed = await new Promise<boolean>((resolve) => {
      const s = connect({ host, port: Number(port) });
      s.on("error", () => resolve(true));
      s.on("close", () => resolve(true));
    });
    expect(closed).toBe(true);
  });
});
