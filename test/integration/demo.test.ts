// `hookline demo` end to end: its own control plane, operator and receivers, in a child process.
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exec, execKubectl } from "../helpers/exec.js";

const BIN = fileURLToPath(new URL("../../bin/hookline.js", import.meta.url));

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.once("connect", () => (s.destroy(), resolve(true)));
    s.once("error", () => resolve(false));
  });
}

describe("hookline demo", () => {
  let cwd: string;
  beforeAll(async () => {
    cwd = await mkdtemp(join(tmpdir(), "hookline-demo-test-"));
  });
  afterAll(async () => {
    await exec(process.execPath, [BIN, "cluster", "down", "--dir", join(cwd, "kept")]);
    await rm(cwd, { recursive: true, force: true });
  });

  it("runs to completion and shows the three outcomes, live, then cleans up", async () => {
    const r = await exec(process.execPath, [BIN, "demo"], { cwd, timeoutMs: 110_000 });
    expect(r.code, r.stderr).toBe(0);
    const out = r.stdout;

    // Each request as the receivers saw it, and the down one's attempts from its status.
    expect(out).toMatch(/\+\d+\.\d\ds {2}acme {5}attempt 1 {2}-> answered 503 {2}\(signature ok\)/);
    expect(out).toMatch(/acme {5}attempt 2 {2}-> answered 503/);
    expect(out).toMatch(/acme {5}attempt 3 {2}-> answered 200 {2}\(signature ok\)/);
    expect(out).not.toMatch(/acme {5}attempt 4/);
    expect(out).toMatch(/globex {3}attempt 1 {2}-> answered 410/);
    expect(out).not.toMatch(/globex {3}attempt 2/);
    for (const n of [1, 2, 3, 4]) expect(out).toMatch(new RegExp(`initech  attempt ${n}  -> connection refused`));
    expect(out).not.toMatch(/BAD SIGNATURE/);
    // Eight request lines, each customer's attempts in order and later each time.
    const lines = [...out.matchAll(/^ +\+(\d+\.\d\d)s {2}(acme|globex|initech) +attempt (\d)/gm)].map((m) => ({ at: Number(m[1]), who: m[2]!, n: Number(m[3]) }));
    expect(lines).toHaveLength(8);
    for (const who of ["acme", "globex", "initech"]) {
      const mine = lines.filter((l) => l.who === who);
      expect(mine.map((l) => l.n)).toEqual(mine.map((_, i) => i + 1));
      for (let i = 1; i < mine.length; i++) expect(mine[i]!.at).toBeGreaterThan(mine[i - 1]!.at);
    }

    // The outcome of each delivery.
    expect(out).toMatch(/acme {5}evt-1001\.acme +Succeeded +after 3 attempts/);
    expect(out).toMatch(/globex {3}evt-1001\.globex +DeadLettered +Gone after 1 attempt/);
    expect(out).toMatch(/initech {2}evt-1001\.initech +DeadLettered +Exhausted after 4 attempts/);
    expect(out).toMatch(/globex {3}Disabled +reason Gone/);

    // What to do next, with the right namespace and kubeconfig.
    expect(out).toMatch(/export KUBECONFIG=\.hookline\/demo\/kubeconfig/);
    expect(out).toMatch(/kubectl describe whdel -n shop evt-1001\.initech/);
    expect(out).toMatch(/kubectl annotate whdel -n shop evt-1001\.initech hookline\.dev\/replay="endpoint fixed, INC-42"/);
    expect(out).toMatch(/kubectl annotate whsub -n shop globex hookline\.dev\/replay-dead-letters="/);

    // The temporary control plane is gone.
    const dir = /starting a local control plane in (\S+) \.\.\./.exec(r.stderr)?.[1];
    const port = Number(/at https:\/\/127\.0\.0\.1:(\d+)/.exec(r.stderr)?.[1]);
    expect(dir).toBeTruthy();
    expect(existsSync(dir!)).toBe(false);
    expect(await portOpen(port)).toBe(false);
  });

  it("with --keep leaves the control plane up, and the printed commands work", async () => {
    const dir = join(cwd, "kept");
    const r = await exec(process.execPath, [BIN, "demo", "--keep", "--dir", dir], { cwd, timeoutMs: 110_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/The control plane is still running in kept\. Inspect and replay:/);
    expect(r.stdout).toMatch(/export KUBECONFIG=kept\/kubeconfig/);
    const dead = await execKubectl(join(dir, "kubeconfig"), ["get", "whdel", "-n", "shop", "--field-selector", "status.phase=DeadLettered", "-o", "name"]);
    expect(dead.code, dead.stderr).toBe(0);
    expect(dead.stdout.trim().split("\n").sort()).toEqual(["webhookdelivery.hookline.dev/evt-1001.globex", "webhookdelivery.hookline.dev/evt-1001.initech"]);

    const again = await exec(process.execPath, [BIN, "demo", "--keep", "--dir", dir], { cwd });
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already running in .*kept.*hookline cluster down --dir/);

    const down = await exec(process.execPath, [BIN, "cluster", "down", "--dir", dir]);
    expect(down.code, down.stderr).toBe(0);
  });
});
