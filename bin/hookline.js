#!/usr/bin/env node
// The `hookline` command. Compiled code lives in dist/ (npm run build).
import { main } from "../dist/cli/main.js";

main(process.argv.slice(2)).then(
  (code) => {
    if (typeof code === "number") process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`hookline: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
