// docs/nats-values.yaml, the official NATS chart's values for stream mode: the file
// docs/stream-mode.md shows (block for block), setting the chart's keys (config.cluster,
// config.jetstream.fileStore, config.merge, container.env, as chart nats 2.14.2's values.yaml
// names them: a key the chart does not know would be ignored silently), a cluster of three with a
// file store each and authenticated routes, every password from a Secret through an environment
// variable the container gets, and an account block nats-server itself accepts (`nats-server -t`).
// The chart is on GitHub pages, which CI cannot reach: `helm template` against it is run by hand
// (docs/stream-mode.md says how and with which chart version).
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { operatorPermissions, publisherPermissions } from "../../src/jetstream/permissions.js";
import { exec } from "../helpers/exec.js";
import { ROOT } from "../helpers/helm.js";
import { readBlocks } from "../helpers/markdown.js";
import { testTools } from "../helpers/tools.js";

const FILE = join(ROOT, "docs", "nats-values.yaml");
const text = readFileSync(FILE, "utf8");
const values = parse(text) as Record<string, any>;

/** Every leaf key path of a YAML value ("config.cluster.replicas"); config.merge and container.env are free-form, named as a whole. */
function leaves(v: unknown, path: string[] = []): string[] {
  const p = path.join(".");
  if (p === "config.merge" || p === "container.env" || v === null || typeof v !== "object" || Array.isArray(v)) return [p];
  return Object.entries(v).flatMap(([k, x]) => leaves(x, [...path, k]));
}

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe("docs/nats-values.yaml (the official NATS chart's values)", () => {
  it("is what docs/stream-mode.md shows", () => {
    const shown = readBlocks(join(ROOT, "docs", "stream-mode.md")).filter((b) => b.lang === "yaml" && b.text.includes("accounts:"));
    expect(shown.map((b) => `${b.text}\n`)).toEqual([text]);
  });

  it("sets only keys chart nats 2.14.2 has: a cluster of three, a file store per node, authenticated routes", () => {
    expect(leaves(values).sort()).toEqual(
      [
        "config.cluster.enabled",
        "config.cluster.replicas",
        "config.cluster.routeURLs.user",
        "config.jetstream.enabled",
        "config.jetstream.fileStore.enabled",
        "config.jetstream.fileStore.dir",
        "config.jetstream.fileStore.pvc.enabled",
        "config.jetstream.fileStore.pvc.size",
        "config.jetstream.memoryStore.enabled",
        "config.merge",
        "container.env",
      ].sort(),
    );
    expect(values.config.cluster).toMatchObject({ enabled: true, replicas: 3, routeURLs: { user: "hookline-route" } });
    // The route password is given at install (--set), never in the file.
    expect(values.config.cluster.routeURLs.password).toBeUndefined();
    expect(values.config.jetstream).toMatchObject({ enabled: true, fileStore: { enabled: true, pvc: { enabled: true } }, memoryStore: { enabled: false } });
  });

  it("one account with JetStream; the operator's and shop's publisher's permissions; every password from a Secret through the container's environment; no user without one", () => {
    const account = values.config.merge.accounts.HOOKLINE;
    expect(Object.keys(values.config.merge)).toEqual(["accounts"]);
    expect(account.jetstream).toBe("enabled");
    expect(account.no_auth_user).toBeUndefined();
    const users = account.users as Array<{ user: string; password: string; permissions: { publish: { allow: string[] }; subscribe: { allow: string[] } } }>;
    expect(users.map((u) => u.user)).toEqual(["hookline-operator", "publisher-shop"]);
    const perms = (name: string) => {
      const u = users.find((x) => x.user === name)!;
      return { publish: u.permissions.publish.allow, subscribe: u.permissions.subscribe.allow };
    };
    expect(perms("hookline-operator")).toEqual(operatorPermissions());
    expect(perms("publisher-shop")).toEqual(publisherPermissions(["shop"]));
    for (const u of users) {
      const variable = /^<< \$([A-Z_]+) >>$/.exec(u.password)?.[1];
      expect(variable, `${u.user}'s password`).toBeDefined();
      expect(values.container.env[variable!], variable).toEqual({ valueFrom: { secretKeyRef: { name: "nats-users", key: u.user } } });
    }
  });

  it("nats-server accepts the account block with the passwords from its environment", async () => {
    const dir = await mkdtemp(join(tmpdir(), "hookline-nats-values-"));
    dirs.push(dir);
    // What the chart writes: the merge block as JSON, each << $VAR >> as $VAR unquoted.
    const conf = `server_name: values-check\njetstream: { store_dir: ${JSON.stringify(join(dir, "js"))} }\n${JSON.stringify(values.config.merge, null, 2).replace(/"<< (\$[A-Z_]+) >>"/g, "$1")}\n`;
    expect(conf).toContain("$HOOKLINE_OPERATOR_PASSWORD");
    await writeFile(join(dir, "nats.conf"), conf);
    const env = Object.fromEntries(Object.keys(values.container.env).map((k) => [k, `secret-${k}`]));
    const ok = await exec(testTools().natsServer, ["-t", "-c", join(dir, "nats.conf")], { env: { ...process.env, ...env } });
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);
    expect(ok.stdout + ok.stderr).toContain("is valid");
    // Without the environment the chart's container gives it, the same file is refused.
    const missing = await exec(testTools().natsServer, ["-t", "-c", join(dir, "nats.conf")], { env: { PATH: process.env.PATH } });
    expect(missing.code).not.toBe(0);
    expect(missing.stdout + missing.stderr).toMatch(/HOOKLINE_OPERATOR_PASSWORD/);
  });
});
