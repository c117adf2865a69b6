#!/usr/bin/env node
// `kubectl hookline`: kubectl finds this as the plugin `kubectl-hookline` on PATH. Compiled code
// lives in dist/ (npm run build).
import { kubectlHookline } from "../dist/cli/kubectl-hookline.js";

kubectlHookline(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`kubectl-hookline: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
