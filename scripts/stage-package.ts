// A copy of the checkout to run `npm pack` in: what npm packs (the top-level entries of
// package.json "files", package.json, README.md, LICENSE) and what the prepack build reads
// (tsconfig.json, src/), with node_modules linked to the checkout's. Packing there builds dist/
// from scratch (no stale file of an earlier build is packed) and leaves the checkout's dist/
// alone, which other tests run from meanwhile. File modes are normalized (0644, 0755 when
// executable) so that the packed bytes do not depend on the umask of the checkout.
import { execFileSync } from "node:child_process";
import { chmodSync, cpSync, existsSync, lstatSync, readdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";

const BUILD_INPUTS = ["package.json", "README.md", "LICENSE", "tsconfig.json", "src"];

/** Copies the checkout at `root` into the empty directory `stage`. */
export function stagePackage(root: string, stage: string): void {
  const { files = [] } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { files?: string[] };
  // Whole top-level entries: npm applies "files" (globs, negations) itself when it packs.
  const top = new Set([...BUILD_INPUTS, ...files.filter((f) => !f.startsWith("!")).map((f) => f.split("/")[0]!)]);
  top.delete("dist"); // built by prepack
  top.delete("node_modules");
  for (const entry of [...top].sort()) {
    if (existsSync(join(root, entry))) cpSync(join(root, entry), join(stage, entry), { recursive: true });
  }
  normalizeModes(stage);
  symlinkSync(join(root, "node_modules"), join(stage, "node_modules"), "dir");
}

function normalizeModes(dir: string): void {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const st = lstatSync(path);
    if (st.isDirectory()) {
      chmodSync(path, 0o755);
      normalizeModes(path);
    } else if (st.isFile()) {
      chmodSync(path, st.mode & 0o100 ? 0o755 : 0o644);
    }
  }
}

/**
 * `npm pack` in `stage` (its prepack script builds dist/), the tarball written to `dest`.
 * Returns the tarball's path. Throws with npm's output when it fails.
 */
export function npmPack(stage: string, dest: string): string {
  const out = execFileSync("npm", ["pack", "--pack-destination", dest, "--json", "--loglevel=error"], {
    cwd: stage,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
    maxBuffer: 64 * 1024 * 1024,
  });
  // Lifecycle scripts print on stderr; stdout holds the --json array alone.
  const [result] = JSON.parse(out) as Array<{ filename: string }>;
  if (!result) throw new Error(`npm pack printed no result:\n${out}`);
  return join(dest, result.filename);
}
