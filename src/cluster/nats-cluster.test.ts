import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { parseNatsUrl } from "../jetstream/url.js";
import { urlWithCredentials } from "./nats-auth.js";
import { assignNodePorts, natsClusterUrl, natsNodeIndex, natsNodeName, otherLayoutStore, renderNodeConfig, storedNatsNodes, streamReplicasFor, type NatsNodePorts } from "./nats-cluster.js";

const PORTS: NatsNodePorts[] = [
  { client: 4001, monitor: 8001, cluster: 6001 },
  { client: 4002, monitor: 8002, cluster: 6002 },
  { client: 4003, monitor: 8003, cluster: 6003 },
];
const ROUTE = { user: "hookline-route", password: "pw/with:odd@chars" };
const config = (index: number, extra: Partial<Parameters<typeof renderNodeConfig>[0]> = {}) =>
  renderNodeConfig({ index, ports: PORTS, route: ROUTE, accountsFile: "/d/nats-auth/accounts.conf", configFile: `/d/nats-${index}/nats-server.conf`, ...extra });

describe("a local JetStream cluster's node config", () => {
  it("names the node, listens on its cluster port, routes to every other node with the route user, includes the accounts", () => {
    const text = config(2);
    expect(text).toContain('server_name: "hookline-local-2"');
    expect(text).toContain('name: "hookline-local"');
    expect(text).toContain('listen: "127.0.0.1:6002"');
    expect(text).toContain('authorization: { user: "hookline-route", password: "pw/with:odd@chars" }');
    const routes = [...text.matchAll(/"(nats-route:\/\/[^"]+)"/g)].map((m) => m[1]);
    expect(routes).toEqual(["nats-route://hookline-route:pw%2Fwith%3Aodd%40chars@127.0.0.1:6001", "nats-route://hookline-route:pw%2Fwith%3Aodd%40chars@127.0.0.1:6003"]);
    // Relative to the config's directory, as nats-server resolves an include.
    expect(text).toContain('include "../nats-auth/accounts.conf"');
    expect(text).not.toContain("advertise");
  });

  it("routes through the ports the caller names and advertises what it is told (the soak's proxies)", () => {
    const text = config(1, { routePort: (from, to) => 7000 + from * 10 + to, advertise: () => "127.0.0.1:1" });
    expect(text).toContain("@127.0.0.1:7012");
    expect(text).toContain("@127.0.0.1:7013");
    expect(text).not.toContain("@127.0.0.1:6002");
    expect(text).toContain('advertise: "127.0.0.1:1"');
  });

  it("refuses a node that is not one of them", () => {
    expect(() => config(4)).toThrow(/node 4 is not one of the 3 nodes/);
  });
});

describe("names, URLs, ports and replicas", () => {
  it("a node's name and index go both ways; other names are no node's", () => {
    for (const i of [1, 3, 5, 12]) expect(natsNodeIndex(natsNodeName(i))).toBe(i);
    for (const other of ["hookline-local", "hookline-local-0", "nats-1", "hookline-local-1x", ""]) expect(natsNodeIndex(other)).toBeUndefined();
  });

  it("the URL lists every node's client port, and carries credentials in each URL that parseNatsUrl accepts", () => {
    const url = natsClusterUrl(PORTS);
    expect(url).toBe("nats://127.0.0.1:4001,nats://127.0.0.1:4002,nats://127.0.0.1:4003");
    const withCreds = urlWithCredentials(url, { user: "publisher-shop", password: "a,b@c" });
    expect(parseNatsUrl(withCreds)).toEqual({ servers: ["127.0.0.1:4001", "127.0.0.1:4002", "127.0.0.1:4003"], tls: false, user: "publisher-shop", pass: "a,b@c" });
    expect(urlWithCredentials("nats://127.0.0.1:4001", { user: "u", password: "p" })).toBe("nats://u:p@127.0.0.1:4001");
  });

  it("ports: three distinct ones per node, in order; too few is an error", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.uniqueArray(fc.integer({ min: 1024, max: 65535 }), { minLength: 15, maxLength: 20 }), (nodes, pool) => {
        const ports = assignNodePorts(nodes, pool);
        const all = ports.flatMap((p) => [p.client, p.monitor, p.cluster]);
        expect(ports).toHaveLength(nodes);
        expect(new Set(all).size).toBe(nodes * 3);
        expect(all).toEqual(pool.slice(0, nodes * 3));
      }),
    );
    expect(() => assignNodePorts(3, [1, 2, 3, 4, 5, 6, 7, 8, 8])).toThrow(/need 9 distinct ports, got 8/);
  });

  it("the stream's replicas: 1 on one node, 3 from three nodes on", () => {
    expect([1, 3, 5].map(streamReplicasFor)).toEqual([1, 3, 3]);
  });
});

describe("the store layout in DIR", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const dirWith = (...stores: string[]) => {
    const d = mkdtempSync(join(tmpdir(), "hookline-layout-"));
    dirs.push(d);
    for (const s of stores) mkdirSync(join(d, s, "jetstream"), { recursive: true });
    return d;
  };

  it("no store: any node count, none recorded", () => {
    const d = dirWith();
    expect(storedNatsNodes(d)).toBeUndefined();
    for (const n of [1, 3, 5]) expect(otherLayoutStore(d, n)).toBeUndefined();
  });

  it("the single server's store refuses a cluster; a cluster's store refuses one server and another size", () => {
    const single = dirWith("nats");
    expect(storedNatsNodes(single)).toBe(1);
    expect(otherLayoutStore(single, 1)).toBeUndefined();
    expect(otherLayoutStore(single, 3)).toBe(join(single, "nats", "jetstream"));
    const three = dirWith("nats-1", "nats-2", "nats-3");
    expect(storedNatsNodes(three)).toBe(3);
    expect(otherLayoutStore(three, 3)).toBeUndefined();
    expect(otherLayoutStore(three, 1)).toBe(join(three, "nats-1", "jetstream"));
    expect(otherLayoutStore(three, 5)).toBe(join(three, "nats-1", "jetstream"));
  });
});
