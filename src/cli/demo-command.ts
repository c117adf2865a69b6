// `hookline demo`'s arguments and usage. The demo itself (src/cli/demo.ts: the control plane,
// the operator, the Kubernetes client) is imported once they are checked, so --help and a usage
// error do not load it. Usage errors are thrown (parseArgs's, UsageError): main() turns them
// into exit code 2.
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { UsageError } from "./exit-codes.js";

const USAGE = `usage: hookline demo [--keep] [--dir DIR]

Shows Hookline end to end in about a minute, with no cluster: starts a local etcd +
kube-apiserver (built once from Go modules and cached), the operator, and three local
receivers, and plays the three-customer case study: acme answers 503, 503, then 200; globex
answers 410 Gone; initech answers 500 six times, the gaps doubling. It prints every request
with its gap, each delivery's outcome, a replay of initech's dead letter once it is back, and
the kubectl commands to look around.

  --keep      leave the control plane running afterwards (in DIR) to try those commands
  --dir DIR   where the kept control plane lives (default .hookline/demo); without --keep
              a temporary directory is used and removed
`;

const DEFAULT_KEEP_DIR = ".hookline/demo";

export async function demoCommand(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { keep: { type: "boolean" }, dir: { type: "string" }, help: { type: "boolean", short: "h" } }, allowPositionals: false });
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  // resolve("") is the working directory: a control plane must not land there by mistake.
  if (values.dir === "") throw new UsageError("--dir must not be empty");
  const { runDemo } = await import("./demo.js");
  return runDemo({ keep: values.keep ?? false, keptDir: resolve(values.dir ?? DEFAULT_KEEP_DIR) });
}
