// `hookline cluster up --nats --nats-nodes 3` as a user runs it: the built CLI starts a JetStream
// cluster of three nats-servers (own ports and store each, routes between them, the same users),
// state.json records every node, the operator given the list of all three URLs and
// HOOKLINE_STREAM_REPLICAS=3 makes the stream at R3 (a leader and two current followers), an
// event published through one node is delivered; the stream leader's node is killed (SIGKILL) and
// publishing and delivery go on; `cluster up` starts the killed node again and the stream is back
// to three current replicas; `cluster down` leaves no process.
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { StreamInfo } from "@nats-io/jetstream";
import { afterAll, describe, expect, it } from "vitest";
import { StreamUnavailableError, type StreamConnection } from "../../src/jetstream/jetstream.js";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { exec, type ExecResult } from "../helpers/exec.js";
import { apply, secret, subscription, TEST_SECRET } from "../helpers/kube.js";
import { connectStream } from "../helpers/nats.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";
import { streamOf, waitForConsumer, waitForDrained } from "../helpers/stream.js";
import { Webhook } from "standardwebhooks";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

function hookline(args: string[]): Promise<ExecResult> {
  return exec(process.execPath, [join(ROOT, "bin/hookline.js"), ...args], { env: process.env, cwd: ROOT, timeoutMs: 170_000 });
}

async function pgrep(pattern: string): Promise<string> {
  const r = await exec("pgrep", ["-fa", pattern]);
  return r.code === 0 ? r.stdout.trim() : "";
}

interface NodeState {
  index: number;
  name: string;
  ports: { client: number; monitor: number; cluster: number };
  storeDir: string;
}
interface State {
  pgids: Record<string, number>;
  nats?: { url: string; nodes?: NodeState[]; streamReplicas?: number };
}
const readState = (dir: string): State => JSON.parse(readFileSync(join(dir, "state.json"), "utf8")) as State;
const exported = (stdout: string, name: string) => new RegExp(`^export ${name}=(.+)$`, "m").exec(stdout)?.[1];
const alive = (pgid: number) => {
  try {
    process.kill(-pgid, 0);
    return existsSync(`/proc/${pgid}`) && !/\) [ZX] /.test(readFileSync(`/proc/${pgid}/stat`, "utf8"));
  } catch {
    return false;
  }
};

/** The stream's replicas as stream info shows them: the leader and each follower's state. */
const replicasOf = (info: StreamInfo) => ({
  leader: info.cluster?.leader,
  followers: (info.cluster?.replicas ?? []).map((r) => ({ name: r.name, current: r.current, offline: r.offline === true })),
});

const dirs: string[] = [];
const cleanups: Array<() => Promise<unknown>> = [];
/** `fn` run once, by the test or by afterAll, whichever comes first. */
const once = (fn: () => Promise<unknown>) => {
  let done: Promise<unknown> | undefined;
  return () => (done ??= fn());
};
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
  for (const d of dirs) {
    if (existsSync(join(d, "state.json"))) await hookline(["cluster", "down", "--dir", d]);
    await rm(d, { recursive: true, force: true });
  }
});

describe("hookline cluster up --nats --nats-nodes 3 (CLI)", () => {
  it("a JetStream cluster of three: the namespace's stream at R3, delivery through the URL list, the leader's node killed under load loses nothing, up restarts it, down stops all", async () => {
    const dir = await mkdtemp(join(tmpdir(), "hookline-cli-nats3-"));
    dirs.push(dir);
    const up = await hookline(["cluster", "up", "--dir", dir, "--nats", "--nats-nodes", "3", "--attach-to-pid", String(process.pid)]);
    expect(up.code, up.stderr).toBe(0);
    expect(up.stdout).toMatch(/nats-server: +nats:\/\/127\.0\.0\.1:\d+,nats:\/\/127\.0\.0\.1:\d+,nats:\/\/127\.0\.0\.1:\d+ \(JetStream cluster of 3 nodes, nats-server 2\.15\.2\)/);
    const url = exported(up.stdout, "HOOKLINE_NATS_URL")!;
    expect(exported(up.stdout, "HOOKLINE_STREAM_REPLICAS")).toBe("3");
    const credentials = { user: exported(up.stdout, "HOOKLINE_NATS_USER")!, passwordFile: exported(up.stdout, "HOOKLINE_NATS_PASSWORD_FILE")! };
    expect(credentials.user).toBe("hookline-operator");

    // state.json: each node with its process group, ports and store; the URL lists them all.
    const state = readState(dir);
    const nodes = state.nats!.nodes!;
    expect(nodes.map((n) => n.name)).toEqual(["hookline-local-1", "hookline-local-2", "hookline-local-3"]);
    expect(state.nats!.url).toBe(url);
    expect(url.split(",")).toEqual(nodes.map((n) => `nats://127.0.0.1:${n.ports.client}`));
    expect(new Set(nodes.flatMap((n) => [n.ports.client, n.ports.monitor, n.ports.cluster])).size).toBe(9);
    for (const n of nodes) {
      expect(alive(state.pgids[`nats-server-${n.index}`]!), n.name).toBe(true);
      expect(n.storeDir).toBe(join(dir, `nats-${n.index}`));
      expect(existsSync(join(n.storeDir, "jetstream")), n.name).toBe(true);
    }
    expect(state.nats!.streamReplicas).toBe(3);
    // Every node lets in only its users.
    for (const n of nodes) {
      const anonymous = await connectStream(`nats://127.0.0.1:${n.ports.client}`).catch((e: unknown) => e);
      expect(anonymous, n.name).toBeInstanceOf(StreamUnavailableError);
    }

    // The operator, given the list, makes the namespace's stream (HOOKLINE_<namespace>) at R3.
    const ns = await createNamespace("nats3");
    cleanups.push(() => deleteNamespace(ns));
    await apply(secret(ns, "signing"));
    const receiver = await Receiver.start(() => 200);
    cleanups.push(() => receiver.close());
    const op: TestOperator = await startOperator({
      namespaces: [ns],
      env: { HOOKLINE_NATS_URL: url, HOOKLINE_NATS_USER: credentials.user, HOOKLINE_NATS_PASSWORD_FILE: credentials.passwordFile, HOOKLINE_STREAM_REPLICAS: "3" },
    });
    const stopOperator = once(() => op.stop());
    cleanups.push(stopOperator);
    await apply(subscription(ns, "acme", { url: receiver.url(), eventTypes: ["order.*"], secretRef: { name: "signing" }, retry: { maxAttempts: 10, initialBackoff: "200ms", maxBackoff: "1s" } }));
    const look: StreamConnection = await connectStream(url, { credentials });
    const closeLook = once(() => look.close());
    cleanups.push(closeLook);
    const jsm = await look.jetstreamManager();
    await waitForConsumer(jsm, ns, "acme", 60_000);
    const r3 = await waitFor(
      async () => {
        const info = await jsm.streams.info(streamOf(ns));
        const r = replicasOf(info);
        return info.config.num_replicas === 3 && r.leader && r.followers.length === 2 && r.followers.every((f) => f.current && !f.offline) ? { info, ...r } : undefined;
      },
      { description: "the stream at R3: a leader and two current followers", timeoutMs: 30_000 },
    );
    expect(r3.info.cluster?.name).toBe("hookline-local");
    expect([r3.leader, ...r3.followers.map((f) => f.name)].sort()).toEqual(nodes.map((n) => n.name));

    // Published through one node (a follower's: JetStream forwards to the leader), delivered.
    const pub = await hookline(["cluster", "nats-publisher", "--dir", dir, ns]);
    expect(pub.code, pub.stderr).toBe(0);
    const publisherUrls = pub.stdout.trim().split(",");
    expect(publisherUrls).toHaveLength(3);
    const leaderIndex = nodes.find((n) => n.name === r3.leader)!.index;
    const follower = nodes.find((n) => n.index !== leaderIndex)!;
    const throughFollower = publisherUrls[follower.index - 1]!;
    const publish = async (via: string, id: string) => {
      // What a producer does: the same event again until JetStream acknowledges it (a leader change refuses a write for a moment).
      await waitFor(async () => (await hookline(["publish", "--nats", via, "-n", ns, "-t", "order.paid", "--id", id, "-d", JSON.stringify({ id })])).code === 0, { description: `${id} acknowledged`, timeoutMs: 60_000 });
    };
    await publish(throughFollower, "evt-before");
    await receiver.waitForRequests(1);

    // The stream leader's node dies (SIGKILL) under load: publishing and delivery go on.
    const leaderPgid = state.pgids[`nats-server-${leaderIndex}`]!;
    const burst = Array.from({ length: 10 }, (_, i) => `evt-during-${i}`);
    const during = Promise.all(burst.slice(0, 5).map((id) => publish(throughFollower, id)));
    process.kill(-leaderPgid, "SIGKILL");
    await waitFor(() => !alive(leaderPgid), { description: "the leader's node gone" });
    await during;
    for (const id of burst.slice(5)) await publish(throughFollower, id);
    const after = await waitFor(
      async () => {
        const r = replicasOf(await jsm.streams.info(streamOf(ns)));
        return r.leader && r.leader !== r3.leader ? r : undefined;
      },
      { description: "a new stream leader on a surviving node", timeoutMs: 30_000 },
    );
    expect(after.followers.find((f) => f.name === r3.leader)).toMatchObject({ current: false });
    await waitFor(() => new Set(receiver.requests.map((q) => q.headers["webhook-id"])).size === 11, { description: "all 11 events delivered", timeoutMs: 90_000 });
    const ids = new Set(receiver.requests.map((q) => String(q.headers["webhook-id"])));
    expect([...ids].sort()).toEqual(["evt-before", ...burst].sort());
    // Byte-exact and signed, whichever node carried them.
    const wh = new Webhook(TEST_SECRET);
    for (const q of receiver.requests) {
      const body = JSON.parse(q.body) as { id: string; data: unknown };
      expect(body.data).toEqual({ id: body.id });
      expect(() => wh.verify(q.body, { "webhook-id": String(q.headers["webhook-id"]), "webhook-timestamp": String(q.headers["webhook-timestamp"]), "webhook-signature": String(q.headers["webhook-signature"]) })).not.toThrow();
    }
    await waitForDrained(jsm, ns, "acme", 60_000);

    // up again starts the killed node on its ports and store: three current replicas again.
    const again = await hookline(["cluster", "up", "--dir", dir, "--nats", "--nats-nodes", "3"]);
    expect(again.code, again.stderr).toBe(0);
    expect(exported(again.stdout, "HOOKLINE_NATS_URL")).toBe(url);
    const restarted = readState(dir).pgids[`nats-server-${leaderIndex}`]!;
    expect(restarted).not.toBe(leaderPgid);
    expect(alive(restarted)).toBe(true);
    await waitFor(
      async () => {
        const r = replicasOf(await jsm.streams.info(streamOf(ns)));
        return r.leader && r.followers.length === 2 && r.followers.every((f) => f.current && !f.offline);
      },
      { description: "three current replicas after the restart", timeoutMs: 60_000 },
    );
    // Another node count while it runs is refused, naming what runs.
    const other = await hookline(["cluster", "up", "--dir", dir, "--nats", "--nats-nodes", "1"]);
    expect(other.code).toBe(1);
    expect(other.stderr).toContain("runs 3 node(s), not 1");

    await stopOperator();
    await closeLook();
    const down = await hookline(["cluster", "down", "--dir", dir]);
    expect(down.code, down.stderr).toBe(0);
    expect(await pgrep(dir)).toBe("");
  });
});
