// The krew packaging of `kubectl hookline`: scripts/release-plugin.ts builds the release archive
// (the shim, the npm package, LICENSE) and writes the manifest; its sha256 is the archive's, its
// uri the GitHub release download of that file, the checked-in manifest is what the script
// writes (its sha256 aside, which changes with every commit and is set at release), and the archive installed as krew does it (per the
// manifest's `files` and `bin`) runs as `kubectl hookline` with real kubectl.
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { exec } from "../helpers/exec.js";
import { releaseOnce } from "../helpers/release.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const { version } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
const ARTIFACT = `kubectl-hookline-${version}.tar.gz`;

interface Platform {
  selector: { matchLabels: { os: string } };
  sha256: string;
  uri: string;
  files: Array<{ from: string; to: string }>;
  bin: string;
}
interface Manifest {
  metadata: { name: string };
  spec: { version: string; homepage: string; platforms: Platform[] };
}

const sha256 = (file: string) => createHash("sha256").update(readFileSync(file)).digest("hex");

let dir = "";
let out = "";
let generated = "";

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "krew-"));
  // The release script's output, made once for this file and package.test.ts.
  ({ out, manifest: generated } = await releaseOnce());
}, 600_000);

// The plugin's runtime takes about 100 MB.
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("krew", () => {
  it("the release script's manifest names its archive: the GitHub release URL and the archive's sha256", async () => {
    const manifest = parse(readFileSync(generated, "utf8")) as Manifest;
    expect(manifest.metadata.name).toBe("hookline");
    expect(manifest.spec.version).toBe(`v${version}`);
    expect(manifest.spec.homepage).toBe("https://github.com/hookline/hookline");
    expect(manifest.spec.platforms.map((p) => p.selector.matchLabels.os)).toEqual(["linux", "darwin"]);
    const sha = sha256(join(out, ARTIFACT));
    for (const p of manifest.spec.platforms) {
      expect(p).toEqual({
        selector: p.selector,
        uri: `https://github.com/hookline/hookline/releases/download/v${version}/${ARTIFACT}`,
        sha256: sha,
        files: [
          { from: "kubectl-hookline", to: "." },
          { from: `hookline-${version}.tgz`, to: "." },
          { from: "LICENSE", to: "." },
        ],
        bin: "kubectl-hookline",
      });
    }
    const listing = await exec("tar", ["-tvzf", join(out, ARTIFACT)]);
    expect(listing.code, listing.stderr).toBe(0);
    // Fixed owners and mtimes (reproducible), the shim executable.
    expect(listing.stdout.trim().split("\n").map((l) => l.split(/\s+/).filter((_, i) => i !== 2).join(" "))).toEqual([
      `-rwxr-xr-x 0/0 1970-01-01 00:00 kubectl-hookline`,
      `-rw-r--r-- 0/0 1970-01-01 00:00 hookline-${version}.tgz`,
      `-rw-r--r-- 0/0 1970-01-01 00:00 LICENSE`,
    ]);
  });

  it("the checked-in plugins/krew/hookline.yaml is the one the release script writes, but for the sha256 it sets at release", () => {
    // The archive holds the whole npm package (README included), so its checksum changes with
    // every commit; `npm run release:plugin` writes it when a release is cut, and
    // `npm run release:plugin -- --check` verifies it then. Everything else must match now.
    const withoutSha = (text: string) => text.replace(/sha256: [0-9a-f]{64}/g, "sha256: <release>");
    const checkedIn = readFileSync(join(ROOT, "plugins/krew/hookline.yaml"), "utf8");
    expect(withoutSha(checkedIn), "plugins/krew/hookline.yaml is stale: run `npm run release:plugin` and commit it").toBe(withoutSha(readFileSync(generated, "utf8")));
    expect(checkedIn).toMatch(/sha256: [0-9a-f]{64}/);
  });

  it("installed from the local archive as krew does, kubectl runs it as `kubectl hookline`", async () => {
    const manifest = parse(readFileSync(generated, "utf8")) as Manifest;
    const platform = manifest.spec.platforms.find((p) => p.selector.matchLabels.os === "linux")!;
    // What `kubectl krew install --manifest=... --archive=FILE` does: check the sha256, unpack,
    // move each `files` match of `from` under `to` in the store, link `bin` into krew's bin.
    const archive = join(out, ARTIFACT);
    expect(sha256(archive)).toBe(platform.sha256);
    const unpacked = join(dir, "unpacked");
    mkdirSync(unpacked);
    expect((await exec("tar", ["-xzf", archive, "-C", unpacked])).code).toBe(0);
    const store = join(dir, "store/hookline", manifest.spec.version);
    mkdirSync(store, { recursive: true });
    for (const op of platform.files) {
      const matches = glob(unpacked, op.from);
      expect(matches, `files: ${op.from}`).not.toEqual([]);
      for (const m of matches) cpSync(m, join(store, op.to, basename(m)), { recursive: true });
    }
    const bin = join(dir, "bin");
    mkdirSync(bin);
    symlinkSync(join(store, platform.bin), join(bin, "kubectl-hookline"));

    // The first run installs the package from the archive and its dependencies (from the npm
    // cache, else the registry) into the store; later runs use them.
    const env = { ...process.env, PATH: `${bin}:${process.env.PATH ?? ""}`, npm_config_prefer_offline: "true" };
    const listed = await exec("kubectl", ["plugin", "list"], { env });
    expect(listed.stdout).toContain(join(bin, "kubectl-hookline"));
    const first = await exec("kubectl", ["hookline", "--version"], { env, timeoutMs: 300_000 });
    expect(first, first.stderr).toMatchObject({ code: 0, stdout: `kubectl-hookline ${version}\n` });
    expect(first.stderr).toMatch(/first run: installing hookline-.*\.tgz/);
    expect(existsSync(join(store, "runtime/lib/node_modules/hookline/dist/cli/kubectl-hookline.js"))).toBe(true);
    const again = await exec("kubectl", ["hookline", "--version"], { env });
    expect(again).toMatchObject({ code: 0, stdout: `kubectl-hookline ${version}\n`, stderr: "" });
    const missing = await exec("kubectl", ["hookline", "--kubeconfig", inject("kubeconfig"), "-n", "default", "status", "no-such-subscription"], { env });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/NotFound/);
  }, 600_000);
});

/** krew's `from`: a path in the unpacked archive, `*` matching within one path segment. */
function glob(base: string, pattern: string): string[] {
  const parent = join(base, dirname(pattern));
  if (!existsSync(parent)) return [];
  const re = new RegExp(`^${basename(pattern).replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*")}$`);
  return readdirSync(parent)
    .filter((n) => re.test(n))
    .map((n) => join(parent, n));
}
