// The krew packaging of `kubectl hookline`: the npm tarball unpacked as krew would (manifest
// `files`), the manifest's sha256 the tarball's, and real kubectl finding the plugin on PATH.
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { describe, expect, inject, it } from "vitest";
import { exec } from "../helpers/exec.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const { version } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };

interface Platform {
  sha256: string;
  uri: string;
  files: Array<{ from: string; to: string }>;
  bin: string;
}

describe("krew", () => {
  it("the manifest installs the npm tarball's shim, and kubectl runs it as `kubectl hookline`", async () => {
    const dir = mkdtempSync(join(tmpdir(), "krew-"));
    const pack = await exec("npm", ["pack", "--pack-destination", dir, "--silent"], { cwd: ROOT });
    expect(pack.code, pack.stderr).toBe(0);
    const tarball = join(dir, pack.stdout.trim().split("\n").at(-1)!);
    const manifestPath = join(dir, "hookline.yaml");
    const gen = await exec(process.execPath, [join(ROOT, "node_modules/tsx/dist/cli.mjs"), join(ROOT, "scripts/krew-manifest.ts"), tarball, manifestPath]);
    expect(gen.code, gen.stderr).toBe(0);
    const manifest = parse(readFileSync(manifestPath, "utf8")) as { spec: { version: string; platforms: Platform[] } };
    expect(manifest.spec.version).toBe(`v${version}`);
    const sha = createHash("sha256").update(readFileSync(tarball)).digest("hex");
    for (const p of manifest.spec.platforms) expect(p).toMatchObject({ sha256: sha, uri: `https://registry.npmjs.org/hookline/-/hookline-${version}.tgz`, files: [{ from: "package/*", to: "." }] });

    // What krew does: unpack, keep `from` under `to`, link `bin` into its bin directory.
    const install = join(dir, "install");
    mkdirSync(install);
    expect((await exec("tar", ["xzf", tarball, "-C", install, "--strip-components=1"])).code).toBe(0);
    // Instead of the first run's npm install (network), the checkout's dependencies.
    symlinkSync(join(ROOT, "node_modules"), join(install, "node_modules"));
    const bin = join(dir, "bin");
    mkdirSync(bin);
    symlinkSync(join(install, manifest.spec.platforms[0]!.bin), join(bin, "kubectl-hookline"));

    const env = { ...process.env, PATH: `${bin}:${process.env.PATH ?? ""}` };
    const listed = await exec("kubectl", ["plugin", "list"], { env });
    expect(listed.stdout).toContain(join(bin, "kubectl-hookline"));
    const v = await exec("kubectl", ["hookline", "--version"], { env });
    expect(v).toMatchObject({ code: 0, stdout: `kubectl-hookline ${version}\n` });
    const missing = await exec("kubectl", ["hookline", "--kubeconfig", inject("kubeconfig"), "-n", "default", "status", "no-such-subscription"], { env });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/NotFound/);
  });
});
