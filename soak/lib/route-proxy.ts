// A network partition of one nats-server node without root: a TCP proxy on every route link of
// a local cluster, one listening port per ordered pair of nodes (node `from` dials it to reach
// node `to`'s cluster port: nats-cluster.ts routePort). Cutting a node freezes every link it is
// on, both ways: the proxy stops reading, so bytes wait in the kernel's buffers as they do when
// packets are dropped, and a new connection is accepted but never reaches the other side (a
// handshake that times out). Healing resumes them; what was held flows on, or the servers have
// given up on the connection and dial again. Its clients still reach the node: a minority
// partition with clients on the minority side. docs/reliability.md says why not iptables.
//
// Each node also advertises `sink` (cluster.advertise), a port that closes every connection at
// once: a node that learns of another by route gossip would otherwise dial its real cluster port
// and bypass the proxy; the gossiped address fails and the configured route through the proxy
// is the one that stays.
import { createServer, connect, type Server, type Socket } from "node:net";

interface Link {
  from: number;
  to: number;
  inbound: Socket;
  outbound?: Socket;
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: "127.0.0.1", port: 0, exclusive: true }, () => {
      const a = server.address();
      if (a === null || typeof a === "string") reject(new Error("no address"));
      else resolve(a.port);
    });
  });
}

export class RouteProxies {
  private readonly servers: Server[] = [];
  private readonly ports = new Map<string, number>();
  private readonly links = new Set<Link>();
  private readonly cut = new Set<number>();
  /** host:port every node advertises (a connection there is closed at once). */
  sink = "";

  private constructor(private readonly clusterPorts: readonly number[]) {}

  /** One proxy per ordered pair of the nodes whose cluster ports are `clusterPorts` (node i at [i - 1]). */
  static async start(clusterPorts: readonly number[]): Promise<RouteProxies> {
    const p = new RouteProxies(clusterPorts);
    const sink = createServer((s) => s.destroy());
    p.servers.push(sink);
    p.sink = `127.0.0.1:${await listen(sink)}`;
    for (let from = 1; from <= clusterPorts.length; from++) {
      for (let to = 1; to <= clusterPorts.length; to++) {
        if (from === to) continue;
        const server = createServer((s) => p.accept(from, to, s));
        p.servers.push(server);
        p.ports.set(`${from}>${to}`, await listen(server));
      }
    }
    return p;
  }

  /** The port node `from` dials for node `to`. */
  port(from: number, to: number): number {
    const port = this.ports.get(`${from}>${to}`);
    if (port === undefined) throw new Error(`no route proxy from node ${from} to node ${to}`);
    return port;
  }

  private frozen(l: Pick<Link, "from" | "to">): boolean {
    return this.cut.has(l.from) || this.cut.has(l.to);
  }

  private accept(from: number, to: number, inbound: Socket): void {
    const link: Link = { from, to, inbound };
    this.links.add(link);
    inbound.on("error", () => undefined);
    inbound.on("close", () => {
      link.outbound?.destroy();
      this.links.delete(link);
    });
    // Cut off: hold it, unread, until the heal (or until the dialer gives up).
    inbound.pause();
    if (!this.frozen(link)) this.wire(link);
  }

  private wire(link: Link): void {
    if (link.outbound || link.inbound.destroyed) return;
    const out = connect({ host: "127.0.0.1", port: this.clusterPorts[link.to - 1]! });
    link.outbound = out;
    out.on("error", () => undefined);
    out.on("close", () => link.inbound.destroy());
    const pipe = (a: Socket, b: Socket) => {
      a.on("data", (d: Buffer) => {
        if (!b.write(d)) a.pause();
      });
      b.on("drain", () => {
        if (!this.frozen(link)) a.resume();
      });
      a.on("end", () => b.end());
    };
    pipe(link.inbound, out);
    pipe(out, link.inbound);
    link.inbound.resume();
  }

  /** Cuts node `index` off from the others: every link it is on stops carrying bytes, both ways. */
  isolate(index: number): void {
    this.cut.add(index);
    for (const l of this.links) {
      if (!this.frozen(l)) continue;
      l.inbound.pause();
      l.outbound?.pause();
    }
  }

  /** Ends the partition of node `index`: held bytes flow on, held connections are put through. */
  heal(index: number): void {
    this.cut.delete(index);
    for (const l of this.links) {
      if (this.frozen(l)) continue;
      if (!l.outbound) this.wire(l);
      else {
        l.inbound.resume();
        l.outbound.resume();
      }
    }
  }

  /** Links open now through the proxies of node `index` (both directions). */
  linksOf(index: number): number {
    return [...this.links].filter((l) => l.from === index || l.to === index).length;
  }

  async close(): Promise<void> {
    for (const l of this.links) {
      l.inbound.destroy();
      l.outbound?.destroy();
    }
    await Promise.all(this.servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
  }
}
