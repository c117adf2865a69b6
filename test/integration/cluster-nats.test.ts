// `hookline cluster up --nats` as a user runs it: the built CLI starts nats-server with JetStream
// beside the control plane, letting in only its users (the operator's, printed as a user and a
// 0600 password file; publishers from `cluster nats-publisher`), a real JetStream publish and
// acknowledgement work as the operator's user, `cluster down` leaves no process, a second
// `up --nats` beside a plain `up` keeps the store and the users, and a killed parent takes
// nats-server with it (the reaper).
import { spawn } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { deleteConsumer, ensureConsumer } from "../../src/jetstream/consumers.js";
import { STREAM_NAME, StreamUnavailableError } from "../../src/jetstream/jetstream.js";
import { namespaceStreamName } from "../../src/jetstream/layout.js";
import { decodeMessage, encodeMessage } from "../../src/jetstream/message.js";
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
/** The operator's user and password file, as `up --nats` prints them for HOOKLINE_NATS_USER and HOOKLINE_NATS_PASSWORD_FILE. */
const operatorCredentials = (stdout: string) => {
  const user = /^export HOOKLINE_NATS_USER=(.+)$/m.exec(stdout)?.[1];
  const passwordFile = /^export HOOKLINE_NATS_PASSWORD_FILE=(.+)$/m.exec(stdout)?.[1];
  expect(user, stdout).toBe("hookline-operator");
  expect(passwordFile, stdout).toBeDefined();
  return { user: user!, passwordFile: passwordFile! };
};
const mode = (path: string) => (statSync(path).mode & 0o777).toString(8);

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
    const credentials = operatorCredentials(up.stdout);
    expect(credentials.passwordFile).toBe(join(dir, "nats-auth", "operator.password"));
    // The credentials are files only the user reads; no password is printed.
    expect(mode(join(dir, "nats-auth"))).toBe("700");
    for (const f of ["operator.password", "users.json", "nats-server.conf"]) expect(mode(join(dir, "nats-auth", f)), f).toBe("600");
    expect(up.stdout).not.toContain(readFileSync(credentials.passwordFile, "utf8"));
    // Nobody gets in without credentials.
    const anonymous = await connectStream(url!).catch((e: unknown) => e);
    expect(anonymous).toBeInstanceOf(StreamUnavailableError);
    expect((anonymous as Error).message).toContain("refused the credentials");

    // A real JetStream round trip as the operator's user: the namespace's stream, consumer, publish (acknowledged), fetch, ack.
    const SHOP = namespaceStreamName(STREAM_NAME, "shop");
    const conn = await connectStream(url!, { credentials });
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
    } finally {
      await conn.close();
    }

    // A publisher of shop, made by the CLI: its URL is all hookline publish needs; other namespaces are refused.
    const pub = await hookline(["cluster", "nats-publisher", "--dir", dir, "shop"]);
    expect(pub.code, pub.stderr).toBe(0);
    const publisherUrl = pub.stdout.trim();
    expect(publisherUrl).toMatch(/^nats:\/\/publisher-shop:[A-Za-z0-9_-]{32}@127\.0\.0\.1:\d+$/);
    expect((await hookline(["cluster", "nats-publisher", "--dir", dir, "shop"])).stdout.trim()).toBe(publisherUrl);
    const kept = await hookline(["publish", "--nats", publisherUrl, "-n", "shop", "-t", "order.paid", "--id", "evt-kept", "-d", '{"kept": true}']);
    expect(kept.code, kept.stderr).toBe(0);
    const elsewhere = await hookline(["publish", "--nats", publisherUrl, "-n", "billing", "-t", "order.paid", "-d", "1"]);
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.stderr).toContain('Permissions Violation for Publish to "hookline.billing.order.paid"');
    expect(elsewhere.stderr).not.toContain(new URL(publisherUrl).password);
    const bad = await hookline(["cluster", "nats-publisher", "--dir", dir, "Not.A.Namespace"]);
    expect(bad.code).toBe(2);

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

      // The same users as before: the operator's password file still opens it.
      const conn = await connectStream(url, { credentials: operatorCredentials(beside.stdout) });
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
