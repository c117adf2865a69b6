// `hookline cluster up --nats` as a user runs it: the built CLI starts nats-server with JetStream
// beside the control plane, a real JetStream publish and acknowledgement work against the URL it
// prints, `cluster down` leaves no process, a second `up --nats` beside a plain `up` keeps the
// store, and a killed parent takes nats-server with it (the reaper).
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { deleteConsumer, ensureConsumer } from "../../src/stream/consumers.js";
import { STREAM_NAME } from "../../src/stream/jetstream.js";
import { namespaceStreamName } from "../../src/stream/layout.js";
import { decodeMessage, encodeMessage } from "../../src/stream/message.js";
import { waitFor } from "../helpers/cluster.js";
import { exec, type ExecResult } from "../helpers/exec.js";
import { connectStream } from "../helpers/nats.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

function hookline(args: string[]): Promise<ExecResult> {
  return exec(process.execPath, [join(ROOT, "bin/hookline.js"), ...args], { env: process.env, cwd: ROOT, timeoutMs: 170_000 });
}

/** Processes whose command line mentions `pattern` (pgrep -f), pgrep itself excluded. */
async function pgrep(pattern: string): Promise<string> {
  const r = await exec("pgrep", ["-fa", pattern]);
  return r.code === 0 ? r.stdout.trim() : "";
}

interface State {
  pgids: Record<string, number>;
  nats?: { url: string; ports: { client: number; monitor: number } };
}
const readState = (dir: string): State => JSON.parse(readFileSync(join(dir, "state.json"), "utf8")) as State;
const exported = (stdout: string) => /^export HOOKLINE_NATS_URL=(nats:\/\/127\.0\.0\.1:\d+)$/m.exec(stdout)?.[1];

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) {
    if (existsSync(join(d, "state.json"))) await hookline(["cluster", "down", "--dir", d]);
    await rm(d, { recursive: true, force: true });
  }
});

describe("hookline cluster up --nats (CLI)", () => {
  it("starts nats-server with JetStream beside the control plane; publish and acknowledge work; down leaves no process", async () => {
    const dir = await mkdtemp(join(tmpdir(), "hookline-cli-nats-"));
    dirs.push(dir);
    const up = await hookline(["cluster", "up", "--dir", dir, "--nats", "--attach-to-pid", String(process.pid)]);
    expect(up.code, up.stderr).toBe(0);
    const url = exported(up.stdout);
    expect(url, up.stdout).toBeDefined();
    expect(up.stdout).toMatch(/nats-server: +nats:\/\/127\.0\.0\.1:\d+ \(JetStream, nats-server 2\.15\.2\)/);
    expect(readState(dir).nats?.url).toBe(url);
    expect(existsSync(join(dir, "nats", "jetstream"))).toBe(true);

    // A real JetStream round trip: the namespace's stream, consumer, publish (acknowledged), fetch, ack.
    const SHOP = namespaceStreamName(STREAM_NAME, "shop");
    const conn = await connectStream(url!);
    try {
      await conn.ensureStream("shop");
      const jsm = await conn.jetstreamManager();
      const { name } = await ensureConsumer(jsm, SHOP, { namespace: "shop", name: "acme", uid: "u-1" }, { eventTypes: ["order.*"], maxInFlight: 10, timeoutMs: 10_000 });
      const ack = await conn.publish(encodeMessage({ id: "evt-1", type: "order.paid", namespace: "shop", timestamp: new Date().toISOString(), data: { order: 1 } }));
      expect(ack).toMatchObject({ stream: SHOP, duplicate: false });
      const m = await (await conn.js.consumers.get(SHOP, name)).next({ expires: 5_000 });
      expect(m && decodeMessage(m).id).toBe("evt-1");
      expect(await m!.ackAck()).toBe(true);
      await deleteConsumer(jsm, SHOP, name);
      // Left behind on purpose, unacknowledged, to be found after down and up again.
      await ensureConsumer(jsm, SHOP, { namespace: "shop", name: "keeper", uid: "u-2" }, { eventTypes: ["order.*"], maxInFlight: 10, timeoutMs: 10_000 });
      await conn.publish(encodeMessage({ id: "evt-kept", type: "order.paid", namespace: "shop", timestamp: new Date().toISOString(), data: { kept: true } }));
    } finally {
      await conn.close();
    }

    const again = await hookline(["cluster", "up", "--dir", dir, "--nats"]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain("already running");
    expect(exported(again.stdout)).toBe(url);

    const down = await hookline(["cluster", "down", "--dir", dir]);
    expect(down.code, down.stderr).toBe(0);
    expect(await pgrep(dir)).toBe("");
  });

  it("cluster up --nats beside a running control plane keeps the JetStream store; a killed parent takes everything with it", async () => {
    const dir = dirs[0]!;
    // The parent the control plane is attached to, killed with SIGKILL below.
    const parent = spawn("sleep", ["600"], { stdio: "ignore" });
    try {
      const up = await hookline(["cluster", "up", "--dir", dir, "--attach-to-pid", String(parent.pid)]);
      expect(up.code, up.stderr).toBe(0);
      expect(exported(up.stdout)).toBeUndefined();
      const beside = await hookline(["cluster", "up", "--dir", dir, "--nats"]);
      expect(beside.code, beside.stderr).toBe(0);
      expect(beside.stdout).toContain("nats-server started beside the running control plane");
      const url = exported(beside.stdout)!;
      expect(readState(dir).pgids["nats-server"]).toBeGreaterThan(1);

      const conn = await connectStream(url);
      try {
        const jsm = await conn.jetstreamManager();
        // The unacknowledged message of the first run survived down and up.
        const info = await jsm.streams.info(namespaceStreamName(STREAM_NAME, "shop"));
        expect(info.state.messages).toBe(1);
      } finally {
        await conn.close();
      }
      expect(await pgrep(join(dir, "nats"))).toContain("nats-server");
    } finally {
      parent.kill("SIGKILL");
    }
    // The reaper re-reads state.json: nats-server, started after it, goes too.
    await waitFor(async () => (await pgrep(dir)) === "", { description: `no process of ${dir} after its parent was killed`, timeoutMs: 30_000 });
  });

  it("refuses --nats on cluster down", async () => {
    const r = await hookline(["cluster", "down", "--dir", join(tmpdir(), "nope"), "--nats"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--nats is an option of cluster up");
  });
});
