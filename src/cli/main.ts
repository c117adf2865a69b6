// The `hookline` command line: dispatches to one module per command.
// Commands are imported when used, so `hookline publish` does not load the operator.
// A usage error of any command (node:util parseArgs's, or a UsageError) is turned into exit
// code 2 here, in one place, with the problem and the command's usage line on stderr.
import { VERSION } from "../version.js";
import { EXIT, usageMessage } from "./exit-codes.js";

/** The commands, for the usage text and docs/api.md. The first word names the command. */
export const COMMANDS = [
  { usage: "operator [--kubeconfig PATH] [--leader-elect=false]", what: "run the controller against the current kubeconfig (in-cluster in a pod)" },
  {
    usage: "dev [--dir DIR] [--keep-cluster] [--nats [--nats-nodes N]]",
    what: "cluster up + CRDs + operator in DIR (default .hookline/dev), for a first run with no cluster; Ctrl-C stops both (--keep-cluster: the control plane stays up; --nats: with nats-server, stream mode; --nats-nodes 3: a JetStream cluster of three, the stream at R3)",
  },
  { usage: "cluster up [--dir DIR] [--nats [--nats-nodes N]]", what: "start a local etcd + kube-apiserver + kube-controller-manager in DIR (default .hookline/cluster) in the background (--nats: and nats-server with JetStream, which lets in only its users: the operator's, and publishers; --nats-nodes 3: a JetStream cluster of three nodes, the stream at R3)" },
  { usage: "cluster down [--dir DIR]", what: "stop what cluster up started in DIR, nats-server too (every node; the data is kept)" },
  { usage: "cluster nats-publisher [--dir DIR] NAMESPACE...", what: "print the URL of a NATS user of cluster up --nats that may publish the events of these namespaces and nothing else (for publish --nats)" },
  {
    usage: "publish -n NS -t TYPE [--id ID] -d JSON|@FILE|@- [--traceparent TP [--tracestate TS]] [--kubeconfig PATH] [--context NAME] [-o table|json|yaml] [--nats URL]",
    what: "fan one event out to every matching subscription (--nats: one JetStream message, stream mode)",
  },
  { usage: "demo [--keep] [--dir DIR]", what: "show the whole product on the embedded control plane (--keep: leave it running in DIR, default .hookline/demo)" },
] as const;

const USAGE = `usage: hookline <command> [options]

commands:
${COMMANDS.map((c) => `  ${c.usage}\n      ${c.what}`).join("\n")}
  --version
      print the version

hookline <command> --help shows one command's options.
exit codes: 0 ok, 1 failed, 2 usage, 78 config (operator and dev). kubectl hookline (kubectl-hookline) is the on-call console.
`;

/** The usage lines of one command ("usage: hookline cluster up ...", then "       hookline cluster down ..."). */
export function usageLines(command: string): string {
  return COMMANDS.filter((c) => c.usage.split(" ")[0] === command)
    .map((c, i) => `${i === 0 ? "usage:" : "      "} hookline ${c.usage}`)
    .join("\n");
}

type Command = (args: string[]) => Promise<number>;

const DISPATCH: Record<string, () => Promise<Command>> = {
  cluster: async () => (await import("./cluster.js")).clusterCommand,
  operator: async () => (await import("./run-operator.js")).operatorCommand,
  dev: async () => (await import("./run-operator.js")).devCommand,
  publish: async () => (await import("./publish.js")).publishCommand,
  demo: async () => (await import("./demo-command.js")).demoCommand,
};

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "--version":
    case "version":
      process.stdout.write(`hookline ${VERSION}\n`);
      return EXIT.ok;
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(USAGE);
      return EXIT.ok;
    case undefined:
      process.stderr.write(USAGE);
      return EXIT.usage;
  }
  const load = Object.hasOwn(DISPATCH, command) ? DISPATCH[command] : undefined;
  if (!load) {
    process.stderr.write(`hookline: unknown command "${command}"\n${USAGE}`);
    return EXIT.usage;
  }
  const run = await load();
  try {
    return await run(rest);
  } catch (err) {
    const message = usageMessage(err);
    if (message === undefined) throw err;
    process.stderr.write(`hookline ${command}: ${message}\n${usageLines(command)}\n(see hookline ${command} --help)\n`);
    return EXIT.usage;
  }
}
