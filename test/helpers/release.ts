// The release script's output (scripts/release-plugin.ts: the npm package tarball as npm pack
// makes it from a clean build, the krew archive and its manifest), made once per test run and
// shared by the files that need it (package.test.ts, krew.test.ts): each pack builds dist/ from
// scratch in a copy of the checkout, about 15-20 s of a 2-core machine.
//
// The files may run at once in two workers: the first to create the shared directory builds,
// the other waits for its `done.json` (which carries the error when the build failed).
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { inject } from "vitest";
import { waitFor } from "./cluster.js";
import { exec } from "./exec.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const { version } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };

export interface Release {
  /** The release script's --out: the krew archive and the npm package tarball. */
  out: string;
  /** The manifest it wrote. */
  manifest: string;
  /** The npm package tarball (hookline-VERSION.tgz), the same files as `npm pack` of a clean build. */
  tarball: string;
}

export async function releaseOnce(): Promise<Release> {
  const dir = inject("releaseDir");
  const done = join(dir, "done.json");
  const release: Release = { out: join(dir, "out"), manifest: join(dir, "hookline.yaml"), tarball: join(dir, "out", `hookline-${version}.tgz`) };
  try {
    mkdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    await waitFor(() => existsSync(done), { description: "the release another test file is building", timeoutMs: 300_000, intervalMs: 500 });
    const { error } = JSON.parse(readFileSync(done, "utf8")) as { error?: string };
    if (error) throw new Error(`the release script failed (in another test file): ${error}`);
    return release;
  }
  const r = await exec(process.execPath, [join(ROOT, "node_modules/tsx/dist/cli.mjs"), join(ROOT, "scripts/release-plugin.ts"), "--out", release.out, "--manifest", release.manifest], {
    cwd: dir,
    timeoutMs: 300_000,
  });
  const error = r.code === 0 ? undefined : `exit ${r.code}: ${r.stderr.slice(-2000)}`;
  writeFileSync(`${done}.tmp`, JSON.stringify(error ? { error } : {}));
  renameSync(`${done}.tmp`, done);
  if (error) throw new Error(`the release script failed: ${error}`);
  return release;
}
