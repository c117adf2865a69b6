// A tenant's own process, as a producing service and its webhook endpoint are in production:
// started by test/helpers/tenant.ts with an IPC channel. It sends the tenant's events on a
// schedule (published to stream mode, or created as WebhookDelivery objects with the tenant's
// own credentials) and receives their webhooks, and it stamps both ends itself, on the one wall
// clock every process here shares (Date.now()). A test process that also hosts another tenant's
// receivers and producer would stamp late whenever that work holds its event loop, and charge
// the delay to the tenant it measures.
//
// It loads only what it uses (the operator's own kubeconfig reader and API client, the stream
// publisher), not @kubernetes/client-node: a small heap, so its own garbage collections do not
// stamp late either.
//
// IPC requests (each with an `id`, answered with the same `id`):
//   {cmd:"publish", nats, namespace, type, prefix, n, perSecond}
//       -> {sent: [[id, at]]}: `at` is when JetStream acknowledged the publish
//   {cmd:"create", kubeconfig, token, objects, perSecond}
//       -> {sent: [[name, at, answeredMs]], tooMany}: `at` is when the create was answered
//   {cmd:"arrivals", prefix} -> {arrivals: [[webhookId, at]]}: the first arrival of each id
//   {cmd:"stats"} -> {eventLoopDelayMs: {p99, max}} since the previous stats
// The receiver answers 200 to everything. The process exits when its parent goes away.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { StreamConnection } from "../../src/jetstream/jetstream.js";
import { publishToStream } from "../../src/publish/stream.js";
import { KubeClient } from "../../src/kube/client.js";
import { loadKubeconfig, type ClusterCredentials } from "../../src/kube/kubeconfig.js";
import { collectionPath } from "../../src/kube/types.js";
import { DELIVERIES } from "../../src/delivery/objects.js";
import { paced } from "./paced.js";

const loopDelay = monitorEventLoopDelay({ resolution: 5 });
loopDelay.enable();
const arrivals = new Map<string, number>();

const server = createServer((req, res) => {
  const at = Date.now();
  const id = req.headers["webhook-id"];
  if (typeof id === "string" && !arrivals.has(id)) arrivals.set(id, at);
  req.resume();
  req.on("end", () => res.writeHead(200, { "content-length": "0" }).end());
});
server.keepAliveTimeout = 65_000;

const publishers = new Map<string, Promise<StreamConnection>>();
const clients = new Map<string, Promise<KubeClient>>();

function client(kubeconfig: string, token: string): Promise<KubeClient> {
  const key = `${kubeconfig}\n${token}`;
  let c = clients.get(key);
  if (!c) {
    c = (async () => {
      // The admin kubeconfig's cluster (server, CA), and the tenant's token instead of its user.
      const { credentials: admin } = await loadKubeconfig({ file: kubeconfig, env: {} });
      const tenant: ClusterCredentials = {
        getCurrentCluster: () => admin.getCurrentCluster(),
        async applyToHTTPSOptions(opts) {
          await admin.applyToHTTPSOptions(opts);
          delete opts.cert;
          delete opts.key;
          opts.headers = { ...opts.headers, Authorization: `Bearer ${token}` };
        },
      };
      return KubeClient.create(tenant, { connections: 8 });
    })();
    clients.set(key, c);
  }
  return c;
}

type Message =
  | { cmd: "publish"; nats: string; namespace: string; type: string; prefix: string; n: number; perSecond: number }
  | { cmd: "create"; kubeconfig: string; token: string; objects: Array<{ metadata: { name: string; namespace: string } }>; perSecond: number }
  | { cmd: "arrivals"; prefix: string }
  | { cmd: "stats" };

async function handle(msg: Message): Promise<object> {
  switch (msg.cmd) {
    case "publish": {
      let p = publishers.get(msg.nats);
      if (!p) publishers.set(msg.nats, (p = StreamConnection.connect({ url: msg.nats, source: "the tenant's NATS URL", name: "tenant" })));
      const connection = await p;
      const sent: Array<[string, number]> = [];
      await paced(msg.n, msg.perSecond, async (i) => {
        const id = `${msg.prefix}${i}`;
        await publishToStream(connection, { namespace: msg.namespace, type: msg.type, id, data: { i } });
        sent.push([id, Date.now()]);
      });
      return { sent };
    }
    case "create": {
      const kube = await client(msg.kubeconfig, msg.token);
      const sent: Array<[string, number, number]> = [];
      let tooMany = 0;
      await paced(msg.objects.length, msg.perSecond, async (i) => {
        const obj = msg.objects[i]!;
        const t0 = Date.now();
        // 429 (API Priority and Fairness's queues full) is retried, as client-go does.
        for (;;) {
          try {
            await kube.request({ method: "POST", path: collectionPath(DELIVERIES, obj.metadata.namespace), body: obj });
            break;
          } catch (err) {
            if ((err as { status?: number }).status !== 429) throw err;
            tooMany++;
            await new Promise((r) => setTimeout(r, 100));
          }
        }
        const at = Date.now();
        sent.push([obj.metadata.name, at, at - t0]);
      });
      return { sent, tooMany };
    }
    case "arrivals":
      return { arrivals: [...arrivals].filter(([id]) => id.startsWith(msg.prefix)) };
    case "stats": {
      const out = { eventLoopDelayMs: { p99: loopDelay.percentile(99) / 1e6, max: loopDelay.max / 1e6 } };
      loopDelay.reset();
      return out;
    }
  }
}

process.on("message", (msg: Message & { id: number }) => {
  handle(msg).then(
    (body) => process.send?.({ id: msg.id, ...body }),
    (err: unknown) => process.send?.({ id: msg.id, error: err instanceof Error ? err.message : String(err) }),
  );
});
process.on("disconnect", () => process.exit(0));

server.listen(0, "127.0.0.1", () => process.send?.({ ready: true, port: (server.address() as AddressInfo).port }));
