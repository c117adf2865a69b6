// `hookline demo` end to end: its own control plane, operator and receivers, in a child process,
// playing the three-customer case study (statuses, doubling gaps, end state, a replay).
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

  it("plays the case study: acme 503, 503, 200; globex 410; initech 500 six times with doubling gaps; the end state; a replay; then cleans up", async () => {
    const r = await exec(process.execPath, [BIN, "demo"], { cwd, timeoutMs: 110_000 });
    expect(r.code, r.stderr).toBe(0);
    const out = r.stdout;

    // Each customer's requests, as the operator recorded them: number, time, gap, scheduled backoff, answer.
    const blocks = new Map<string, Array<{ n: number; at: number; gap?: number; backoff?: number; replay: boolean; status: number }>>();
    let current = "";
    for (const line of out.split("\n")) {
      const head = /^(evt-1001\.\w+):$/.exec(line);
      if (head) current = head[1]!;
      const m = /^ {2}\/\S+ +request (\d+) for evt-1001 at +\+(\d+\.\d{3})s {2}(?:gap +(\d+)ms >= +(\d+)ms|(replay)|) +-> (\d{3}) /.exec(line);
      if (!m) continue;
      const who = m[5] ? "replay" : current;
      blocks.set(who, [...(blocks.get(who) ?? []), { n: Number(m[1]), at: Number(m[2]), ...(m[3] ? { gap: Number(m[3]), backoff: Number(m[4]) } : {}), replay: !!m[5], status: Number(m[6]) }]);
    }
    const statuses = (who: string) => blocks.get(who)?.map((b) => b.status);
    expect(statuses("evt-1001.acme")).toEqual([503, 503, 200]);
    expect(statuses("evt-1001.globex")).toEqual([410]);
    expect(statuses("evt-1001.initech")).toEqual([500, 500, 500, 500, 500, 500]);
    expect(statuses("replay")).toEqual([200]);
    expect(out).toMatch(/request 1 for evt-1001 at +\+0\.000s +-> 503 Service Unavailable/);
    expect(out).toMatch(/-> 410 Gone/);
    expect(out).toMatch(/-> 500 Internal Server Error/);

    // The gaps double: the schedule says 50, 100, 200, 400, 800 ms, and every gap is at least its
    // scheduled backoff (the next attempt is due that long after the previous one ended; how much
    // longer depends on the machine, so there is no upper bound here).
    for (const who of ["evt-1001.acme", "evt-1001.globex", "evt-1001.initech"]) {
      const mine = blocks.get(who)!;
      expect(mine.map((b) => b.n)).toEqual(mine.map((_, i) => i + 1));
      expect(mine[0]!.at).toBe(0);
      expect(mine[0]!.gap).toBeUndefined();
      for (const [i, b] of mine.slice(1).entries()) {
        expect(b.backoff, `${who} request ${b.n}`).toBe(50 * 2 ** i);
        expect(b.gap!, `${who} request ${b.n}: gap ${b.gap}ms`).toBeGreaterThanOrEqual(b.backoff!);
        // The printed time is the sum of the gaps (both from the same status history).
        expect(Math.round(b.at * 1000) - Math.round(mine[i]!.at * 1000)).toBe(b.gap);
      }
    }
    expect(blocks.get("evt-1001.initech")!.slice(1).map((b) => b.backoff)).toEqual([50, 100, 200, 400, 800]);
    // The replay is request 7 of initech's delivery, after the six.
    expect(blocks.get("replay")![0]).toMatchObject({ n: 7, replay: true });
    expect(blocks.get("replay")![0]!.at).toBeGreaterThan(blocks.get("evt-1001.initech")!.at(-1)!.at);
    expect(out).toMatch(/All 10 requests carried webhook-id evt-1001 \(the same on every attempt\) and a signature each receiver verified\./);
    expect(out).not.toMatch(/BAD SIGNATURE/);

    // Each block's outcome, and the end state.
    expect(out).toMatch(/evt-1001\.acme:\n(.*\n){3} {2}=> Succeeded after 3 attempts\n/);
    expect(out).toMatch(/evt-1001\.globex:\n.*\n {2}=> DeadLettered \(Gone\) after 1 attempt; the endpoint is Disabled \(reason Gone\)\n/);
    expect(out).toMatch(/evt-1001\.initech:\n(.*\n){6} {2}=> DeadLettered \(Exhausted\) after 6 attempts\n/);
    expect(out).toMatch(/acme {5}evt-1001\.acme +Succeeded +after 3 attempts/);
    expect(out).toMatch(/globex {3}evt-1001\.globex +DeadLettered +Gone after 1 attempt/);
    expect(out).toMatch(/initech {2}evt-1001\.initech +DeadLettered +Exhausted after 6 attempts/);
    expect(out).toMatch(/globex {3}Disabled +reason Gone/);
    expect(out).toMatch(/initech {2}Degraded +6 consecutive failures/);
    // The replay, in the order the story tells it: after the end state.
    expect(out.indexOf("Initech is back")).toBeGreaterThan(out.indexOf("Endpoints (kubectl get whsub"));
    expect(out).toMatch(/\$ kubectl annotate whdel -n shop evt-1001\.initech hookline\.dev\/replay="initech is back, INC-42"\n.*request 7 .*-> 200 OK\n {2}=> Succeeded by the replay/);

    // What to do next, with the right namespace and kubeconfig.
    expect(out).toMatch(/export KUBECONFIG=\.hookline\/demo\/kubeconfig/);
    expect(out).toMatch(/kubectl describe whdel -n shop evt-1001\.initech/);
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
    // initech's dead letter was replayed; globex's (Gone) stays.
    expect(dead.stdout.trim().split("\n").sort()).toEqual(["webhookdelivery.hookline.dev/evt-1001.globex"]);
    const initech = JSON.parse((await execKubectl(join(dir, "kubeconfig"), ["get", "whdel", "-n", "shop", "evt-1001.initech", "-o", "json"])).stdout) as { status: { phase: string; history: Array<{ responseStatus: number; replay?: boolean }> } };
    expect(initech.status.phase).toBe("Succeeded");
    expect(initech.status.history.map((h) => h.responseStatus)).toEqual([500, 500, 500, 500, 500, 500, 200]);
    expect(initech.status.history.at(-1)!.replay).toBe(true);

    const again = await exec(process.execPath, [BIN, "demo", "--keep", "--dir", dir], { cwd });
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already running in .*kept.*hookline cluster down --dir/);

    const down = await exec(process.execPath, [BIN, "cluster", "down", "--dir", dir]);
    expect(down.code, down.stderr).toBe(0);
  });
});
