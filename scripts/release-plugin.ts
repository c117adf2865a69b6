// Builds the release artifact of `kubectl hookline` and writes its krew manifest:
//
//   dist-release/hookline-VERSION.tgz              the npm package (npm pack of a clean build)
//   dist-release/kubectl-hookline-VERSION.tar.gz   the krew entry point (plugins/krew/kubectl-hookline),
//                                                  hookline-VERSION.tgz and LICENSE
//   plugins/krew/hookline.yaml                     uri: the .tar.gz on the GitHub release vVERSION,
//                                                  sha256: its checksum
//
// The release uploads the .tar.gz to the GitHub release vVERSION. Before that, krew installs it
// from the file: kubectl krew install --manifest=plugins/krew/hookline.yaml
// --archive=dist-release/kubectl-hookline-VERSION.tar.gz
//
// The build is reproducible, so the checked-in manifest's sha256 can be checked: dist/ is built
// from scratch in a copy of the checkout (scripts/stage-package.ts), and both archives are
// written by GNU tar and gzip with fixed order, mtimes, owners and modes (npm pack's own
// tarball is unpacked and archived again: its gzip is Node's zlib, whose output may change with
// the Node version, and its order is the file system's).
//
//   npm run release:plugin                 build into dist-release/, write plugins/krew/hookline.yaml
//   npm run release:plugin -- --check      build in a temporary directory; fail when the manifest is stale
//   tsx scripts/release-plugin.ts --out DIR --manifest PATH
//
// Needs GNU tar (>= 1.28) and gzip on PATH, and the checkout's node_modules (npm ci).
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { stringify } from "yaml";
import { npmPack, stagePackage } from "./stage-package.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const MANIFEST = join(root, "plugins/krew/hookline.yaml");
const SHIM = join(root, "plugins/krew/kubectl-hookline");

const { values: opts } = parseArgs({
  options: { out: { type: "string" }, manifest: { type: "string" }, check: { type: "boolean" } },
  allowPositionals: false,
});

const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  version: string;
  description: string;
  homepage: string;
  repository: { url: string };
};
const { version } = pkg;
/** https://github.com/OWNER/NAME, from package.json "repository". */
const repo = pkg.repository.url.replace(/^git\+/, "").replace(/\.git$/, "");
const artifactName = `kubectl-hookline-${version}.tar.gz`;
const packageName = `hookline-${version}.tgz`;

// Same bytes whatever the caller's locale, umask or tar/gzip defaults.
process.umask(0o022);
const toolEnv: NodeJS.ProcessEnv = { ...process.env, LC_ALL: "C", TZ: "UTC" };
delete toolEnv.TAR_OPTIONS;
delete toolEnv.GZIP;
const tarVersion = execFileSync("tar", ["--version"], { encoding: "utf8", env: toolEnv });
if (!/GNU tar/.test(tarVersion)) {
  console.error("release-plugin: needs GNU tar on PATH as `tar` (macOS: brew install gnu-tar, then put its gnubin first on PATH)");
  process.exit(2);
}
const TAR = ["--sort=name", "--mtime=@0", "--owner=0", "--group=0", "--numeric-owner", "--format=gnu", "--mode=go-w,a+rX"];

/** tar TAR_OPTIONS -cf OUT -C DIR ENTRIES..., then gzip -n -9: OUT.gz renamed to `out`. */
function archive(out: string, dir: string, entries: string[]): void {
  const tar = out.replace(/\.(tgz|tar\.gz)$/, ".tar");
  rmSync(tar, { force: true });
  rmSync(`${tar}.gz`, { force: true });
  execFileSync("tar", [...TAR, "-cf", tar, "-C", dir, ...entries], { env: toolEnv, stdio: "inherit" });
  execFileSync("gzip", ["-n", "-9", tar], { env: toolEnv, stdio: "inherit" });
  renameSync(`${tar}.gz`, out);
}

function build(outDir: string, manifestPath: string): { artifact: string; sha256: string } {
  const work = mkdtempSync(join(tmpdir(), "hookline-release-"));
  try {
    const stage = join(work, "stage");
    mkdirSync(stage);
    stagePackage(root, stage);
    const packed = npmPack(stage, work);

    const unpacked = join(work, "unpacked");
    mkdirSync(unpacked);
    execFileSync("tar", ["-xzf", packed, "-C", unpacked], { env: toolEnv, stdio: "inherit" });
    const plugin = join(work, "plugin");
    mkdirSync(plugin);
    archive(join(plugin, packageName), unpacked, ["package"]);
    copyFileSync(SHIM, join(plugin, "kubectl-hookline"));
    chmodSync(join(plugin, "kubectl-hookline"), 0o755);
    copyFileSync(join(root, "LICENSE"), join(plugin, "LICENSE"));
    chmodSync(join(plugin, "LICENSE"), 0o644);

    mkdirSync(outDir, { recursive: true });
    const artifact = join(outDir, artifactName);
    archive(artifact, plugin, ["kubectl-hookline", packageName, "LICENSE"]);
    copyFileSync(join(plugin, packageName), join(outDir, packageName));
    const sha256 = createHash("sha256").update(readFileSync(artifact)).digest("hex");
    writeFileSync(manifestPath, manifestText(sha256));
    return { artifact, sha256 };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function manifestText(sha256: string): string {
  const platform = (os: string) => ({
    selector: { matchLabels: { os } },
    uri: `${repo}/releases/download/v${version}/${artifactName}`,
    sha256,
    // The archive holds these three files at its top; the shim installs the package on first run.
    files: [
      { from: "kubectl-hookline", to: "." },
      { from: packageName, to: "." },
      { from: "LICENSE", to: "." },
    ],
    bin: "kubectl-hookline",
  });
  const manifest = {
    apiVersion: "krew.googlecontainertools.github.com/v1alpha2",
    kind: "Plugin",
    metadata: { name: "hookline" },
    spec: {
      version: `v${version}`,
      homepage: pkg.homepage,
      shortDescription: "On-call console for Hookline webhook deliveries",
      description:
        `${pkg.description}\n` +
        "kubectl hookline status|attempts|dlq|replay|reset|ping|publish: the state of a subscription on one screen, attempt histories, dead letters, replays followed to their result, breaker resets and test pings.\n" +
        `Needs Node.js >= 20.18 and npm on PATH; the first run installs the hookline npm package (${packageName}, in the archive) and its dependencies next to it.\n`,
      caveats: "Needs Node.js >= 20.18 and npm on PATH. The first run installs the package's dependencies from the npm registry.\n",
      platforms: [platform("linux"), platform("darwin")],
    },
  };
  return (
    `# Written by scripts/release-plugin.ts (npm run release:plugin) for ${artifactName}. Do not edit by hand:\n` +
    `# the sha256 is the checksum of that reproducible build of this checkout.\n` +
    stringify(manifest, { lineWidth: 0 })
  );
}

if (opts.check) {
  const tmp = mkdtempSync(join(tmpdir(), "hookline-release-check-"));
  try {
    const generated = join(tmp, "hookline.yaml");
    const { sha256 } = build(tmp, generated);
    const current = existsSync(MANIFEST) ? readFileSync(MANIFEST, "utf8") : "";
    if (current !== readFileSync(generated, "utf8")) {
      console.error(
        `${relative(root, MANIFEST)} is stale (the artifact of this checkout has sha256 ${sha256})\n` +
          "run `npm run release:plugin` and commit the result",
      );
      process.exitCode = 1;
    } else console.log(`${relative(root, MANIFEST)} is up to date (sha256 ${sha256})`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
} else {
  const outDir = resolve(opts.out ?? join(root, "dist-release"));
  const manifestPath = resolve(opts.manifest ?? MANIFEST);
  const { artifact, sha256 } = build(outDir, manifestPath);
  console.log(`wrote ${artifact} (sha256 ${sha256})\nwrote ${join(outDir, packageName)}\nwrote ${manifestPath}`);
}
