// Writes plugins/krew/hookline.yaml, the krew manifest of `kubectl hookline`, for the npm
// tarball of this version: `npm pack`, then `tsx scripts/krew-manifest.ts hookline-X.tgz` (the
// release does this after publishing; the sha256 must be the published tarball's).
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const [tarball, out = join(root, "plugins/krew/hookline.yaml")] = process.argv.slice(2);
if (!tarball) {
  console.error("usage: tsx scripts/krew-manifest.ts hookline-VERSION.tgz [OUT]");
  process.exit(2);
}
const { version, description } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string; description: string };
const sha256 = createHash("sha256").update(readFileSync(tarball)).digest("hex");
const platform = (os: string) => ({
  selector: { matchLabels: { os } },
  uri: `https://registry.npmjs.org/hookline/-/hookline-${version}.tgz`,
  sha256,
  // npm tarballs hold everything under package/; the shim finds package.json two levels up.
  files: [{ from: "package/*", to: "." }],
  bin: "plugins/krew/kubectl-hookline",
});
const manifest = {
  apiVersion: "krew.googlecontainertools.github.com/v1alpha2",
  kind: "Plugin",
  metadata: { name: "hookline" },
  spec: {
    version: `v${version}`,
    shortDescription: "On-call console for Hookline webhook deliveries",
    description: `${description}\nkubectl hookline status|attempts|dlq|replay|reset|ping|publish: the state of a subscription on one screen, attempt histories, dead letters, replays followed to their result, breaker resets and test pings.\nNeeds Node.js >= 20.18 and npm on PATH; the first run installs the package's dependencies next to it.\n`,
    caveats: "Needs Node.js >= 20.18 and npm on PATH. The first run installs dependencies from the npm registry.\n",
    platforms: [platform("linux"), platform("darwin")],
  },
};
writeFileSync(out, `# Written by scripts/krew-manifest.ts from the npm tarball of hookline ${version}.\n` + stringify(manifest, { lineWidth: 0 }));
console.log(`wrote ${out} (sha256 ${sha256})`);
