// The npm package as a stranger gets it, without a checkout: `npm pack` (its prepack script
// builds dist/), `npm install -g` of the tarball into a fresh prefix, then `hookline`,
// `kubectl-hookline` and `kubectl hookline` from that prefix's bin on PATH, and
// `import { publish } from "hookline"` (JavaScript and TypeScript) in a scratch project that
// installed the tarball. The tarball is the one the release script packs (test/helpers/release.ts,
// shared with krew.test.ts): npm pack in a copy of the checkout (scripts/stage-package.ts), so
// its clean build does not touch the dist/ other tests run from.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exec } from "../helpers/exec.js";
import { releaseOnce } from "../helpers/release.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const { version } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
const NPM = ["--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"];
const SLOW = { timeoutMs: 300_000 };

let tarball = "";
let entries: string[] = [];
let prefix = "";
let project = "";
let env: NodeJS.ProcessEnv = {};
let elsewhere = "";
let dir = "";

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "package-"));
  tarball = (await releaseOnce()).tarball;
  const list = await exec("tar", ["-tzf", tarball]);
  expect(list.code, list.stderr).toBe(0);
  // The files (the release archives npm's tarball again with GNU tar, which lists directories too).
  entries = list.stdout.trim().split("\n").filter((e) => !e.endsWith("/"));

  prefix = join(dir, "prefix");
  project = join(dir, "project");
  mkdirSync(project);
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "scratch", private: true, type: "module" }));
  elsewhere = join(dir, "elsewhere");
  mkdirSync(elsewhere);
  // Both installs at once: the npm cache is shared and safe for that.
  const [global, local] = await Promise.all([
    exec("npm", ["install", "-g", "--prefix", prefix, ...NPM, tarball], { cwd: elsewhere, ...SLOW }),
    exec("npm", ["install", ...NPM, tarball], { cwd: project, ...SLOW }),
  ]);
  expect(global.code, global.stderr).toBe(0);
  expect(local.code, local.stderr).toBe(0);
  // Only the prefix's bin and the system: nothing of the checkout (npx puts its node_modules/.bin on PATH).
  const path = (process.env.PATH ?? "").split(":").filter((p) => p && !p.startsWith(ROOT.replace(/\/$/, "")));
  env = { ...process.env, PATH: [join(prefix, "bin"), ...path].join(":") };
}, 600_000);

// The two installs take about 250 MB.
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("npm package", () => {
  it("packs a built dist/, the runtime files and LICENSE, and no tests, sources or tools", () => {
    for (const f of [
      "package/package.json",
      "package/LICENSE",
      "package/bin/hookline.js",
      "package/bin/kubectl-hookline.js",
      "package/dist/index.js",
      "package/dist/index.d.ts",
      "package/dist/cli/main.js",
      "package/dist/cli/demo.js",
      "package/dist/cli/kubectl-hookline.js",
      // hookline dev / demo / cluster up build the control plane (and nats-server) from these.
      "package/hack/build-control-plane.sh",
      "package/hack/build-nats.sh",
      "package/hack/k8s/go.mod",
      "package/hack/k8s/go.sum",
      "package/hack/etcd/go.mod",
      "package/hack/etcd/go.sum",
      "package/hack/nats/go.mod",
      "package/hack/nats/go.sum",
      "package/crds/hookline.dev_webhooksubscriptions.yaml",
      "package/crds/hookline.dev_webhookdeliveries.yaml",
      "package/crds/hookline.dev_webhookreplays.yaml",
      "package/examples/02-subscription-minimal.yaml",
    ]) {
      expect(entries, f).toContain(f);
    }
    const unwanted = entries.filter((e) => /\.test\.|\.tsbuildinfo$|^package\/(src|test|bench|soak|scripts|docs|charts|plugins|node_modules|dist-release)\//.test(e));
    expect(unwanted).toEqual([]);
    expect(readFileSync(join(prefix, "lib/node_modules/hookline/LICENSE"), "utf8")).toMatch(/Apache License\s+Version 2\.0, January 2004[\s\S]*APPENDIX: How to apply the Apache License/);
  });

  it("installs with npm install -g: hookline, kubectl-hookline and `kubectl hookline` from the prefix's bin", async () => {
    for (const bin of ["hookline", "kubectl-hookline"]) {
      const where = await exec("sh", ["-c", `command -v ${bin}`], { env, cwd: elsewhere });
      expect(where.stdout.trim()).toBe(join(prefix, "bin", bin));
    }
    expect(await exec("hookline", ["--version"], { env, cwd: elsewhere })).toMatchObject({ code: 0, stdout: `hookline ${version}\n` });
    expect(await exec("kubectl-hookline", ["--version"], { env, cwd: elsewhere })).toMatchObject({ code: 0, stdout: `kubectl-hookline ${version}\n` });
    const listed = await exec("kubectl", ["plugin", "list"], { env, cwd: elsewhere });
    expect(listed.stdout).toContain(join(prefix, "bin", "kubectl-hookline"));
    expect(await exec("kubectl", ["hookline", "--version"], { env, cwd: elsewhere })).toMatchObject({ code: 0, stdout: `kubectl-hookline ${version}\n` });
    const demo = await exec("hookline", ["demo", "--help"], { env, cwd: elsewhere });
    expect(demo.code, demo.stderr).toBe(0);
    expect(demo.stdout).toMatch(/^usage: hookline demo \[--keep\] \[--dir DIR\]\n/);
  });

  it("imports { publish } from \"hookline\" in a project that installed the tarball, with its types", async () => {
    const js = await exec(process.execPath, ["--input-type=module", "-e", 'import { publish } from "hookline"; console.log(typeof publish)'], { cwd: project });
    expect(js, js.stderr).toMatchObject({ code: 0, stdout: "function\n" });

    // The types resolve (an `any` would leave the @ts-expect-error unused, which tsc reports).
    writeFileSync(
      join(project, "check.ts"),
      [
        'import { publish } from "hookline";',
        "type Event = Parameters<typeof publish>[0];",
        'const event: Event = { namespace: "shop", type: "order.paid", id: "evt-1001", data: { order: 1001 } };',
        "// @ts-expect-error: an event needs its namespace",
        'const incomplete: Event = { type: "order.paid", data: {} };',
        "export const run = (): Promise<unknown> => publish(event);",
        "export { incomplete };",
        "",
      ].join("\n"),
    );
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          // The scratch project has no @types/node of its own: the checkout's.
          typeRoots: [join(ROOT, "node_modules/@types")],
          types: ["node"],
        },
        files: ["check.ts"],
      }),
    );
    const tsc = await exec(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", project], { cwd: project, ...SLOW });
    expect(tsc, tsc.stdout + tsc.stderr).toMatchObject({ code: 0, stdout: "" });
  });
});
