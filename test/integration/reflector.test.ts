// The reflector against the real API server, reached through a TCP relay on 127.0.0.1 that the
// test can cut: what the operator's readiness hears when the network (or the API server) goes
// away and comes back.
import { createServer, connect, type Server, type Socket } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, describe, expect, inject, it } from "vitest";
import { KubeClient } from "../../src/kube/client.js";
import { Reflector } from "../../src/kube/reflector.js";
import { createLogger } from "../../src/observability/logger.js";
import { createNamespace, deleteNamespace, kubectlOk, waitFor } from "../helpers/cluster.js";

/** Forwards 127.0.0.1:port to the API server; `cut()` drops every connection and refuses new ones until `restore()`. */
class Relay {
  private readonly sockets = new Set<Socket>();
  private refusing = false;
  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(target: URL): Promise<Relay> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const relay = new Relay(server, (server.address() as { port: number }).port);
    server.on("connection", (inbound) => relay.accept(inbound, target));
    return relay;
  }

  private accept(inbound: Socket, target: URL) {
    if (this.refusing) {
      inbound.destroy();
      return;
    }
    const outbound = connect(Number(target.port), target.hostname);
    for (const s of [inbound, outbound]) {
      this.sockets.add(s);
      s.on("error", () => undefined);
      s.on("close", () => {
        this.sockets.delete(s);
        inbound.destroy();
        outbound.destroy();
      });
    }
    inbound.pipe(outbound).pipe(inbound);
  }

  cut() {
    this.refusing = true;
    for (const s of this.sockets) s.destroy();
  }

  restore() {
    this.refusing = false;
  }

  close(): Promise<void> {
    this.cut();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

describe("Reflector (real API server)", () => {
  it.each(["json", "metadata"] as const)("%s: reports healthy again as soon as its watch resumes from its resourceVersion, not when that watch ends", async (representation) => {
    const ns = await createNamespace(`reflector-${representation}`);
    cleanups.push(() => deleteNamespace(ns));
    const kc = new KubeConfig();
    kc.loadFromFile(inject("kubeconfig"));
    const relay = await Relay.start(new URL(kc.getCurrentCluster()!.server));
    cleanups.push(() => relay.close());
    const cluster = kc.getCurrentCluster()!;
    kc.clusters = kc.clusters.map((c) => (c.name === cluster.name ? { ...c, server: `https://127.0.0.1:${relay.port}` } : c));
    const client = await KubeClient.create(kc);
    cleanups.push(() => client.destroy());

    const health: boolean[] = [];
    let lists = 0;
    const names = new Set<string>();
    const reflector = new Reflector<{ metadata: { name: string; namespace?: string; resourceVersion?: string } }>({
      client,
      name: "configmaps",
      path: `/api/v1/namespaces/${ns}/configmaps`,
      representation,
      transform: (item) => ({ metadata: item.metadata }),
      handler: {
        add: (o) => names.add(o.metadata.name),
        update: () => undefined,
        delete: (o) => names.delete(o.metadata.name),
        listed: () => lists++,
      },
      log: createLogger({ level: process.env.DEBUG_REFLECTOR ? "debug" : "silent" }),
      // Watches last 5-10 minutes: far longer than this test may wait.
      minWatchTimeoutSeconds: 300,
      backoff: { initialMs: 100, maxMs: 500 },
      onHealth: (h) => health.push(h),
    });
    reflector.start();
    cleanups.push(() => reflector.stop());
    await reflector.waitForSync();
    expect(lists).toBe(1);

    relay.cut();
    await waitFor(() => health.at(-1) === false, { description: "unhealthy while the API server cannot be reached" });
    relay.restore();
    await waitFor(() => health.at(-1) === true, { description: "healthy again once the watch is back", timeoutMs: 15_000 });
    // The watch resumed where it stopped: no relist, and it sees what happens next.
    await kubectlOk(["create", "configmap", "after-cut", "-n", ns]);
    await waitFor(() => names.has("after-cut"), { description: "the resumed watch delivers new objects" });
    expect(lists).toBe(1);
    expect(health).toEqual([false, true]);
  });
});
