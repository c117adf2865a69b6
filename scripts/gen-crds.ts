// Writes crds/*.yaml and docs/api.md from the zod schemas in src/api. `--check` fails when the files are stale.
import { readFileSync, writeFileSync, existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { deliveryCrd, subscriptionCrd } from "../src/api/crd.js";
import { apiReference } from "./api-doc.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const header = "# Generated from src/api by `npm run gen`. Do not edit by hand.\n";
const files: Record<string, string> = {
  "crds/hookline.dev_webhooksubscriptions.yaml": header + stringify(subscriptionCrd(), { lineWidth: 0 }),
  "crds/hookline.dev_webhookdeliveries.yaml": header + stringify(deliveryCrd(), { lineWidth: 0 }),
};
files["docs/api.md"] = await apiReference();
// The chart ships the same files (Helm installs crds/ before templates).
for (const [path, text] of Object.entries(files)) {
  if (!path.startsWith("crds/")) continue;
  if (existsSync(join(root, "charts/hookline"))) files[path.replace(/^crds\//, "charts/hookline/crds/")] = text;
}

const check = process.argv.includes("--check");
const stale: string[] = [];
for (const [path, text] of Object.entries(files)) {
  const full = join(root, path);
  const current = existsSync(full) ? readFileSync(full, "utf8") : undefined;
  if (current === text) continue;
  if (check) stale.push(path);
  else {
    mkdirSync(dirname(full), { recursive: true });
    writeFileSync(full, text);
    console.log(`wrote ${path}`);
  }
}
if (stale.length) {
  console.error(`generated files are stale: ${stale.join(", ")}\nrun \`npm run gen\` and commit the result`);
  process.exit(1);
}
if (check) console.log("generated files are up to date");
