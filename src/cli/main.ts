// The `hookline` command line: dispatches to one module per command.
// Commands are imported when used, so `hookline publish` does not load the operator.
import { VERSION } from "../version.js";
import { EXIT } from "./exit-codes.js";

/** The commands, for the usage text and docs/api.md. */
export const COMMANDS = [
  { usage: "operator [--kubeconfig PATH] [--leader-elect=false]", what: "run the controller against the current kubeconfig (in-cluster in a pod)" },
  { usage: "dev [--dir DIR] [--nats]", what: "cluster up + CRDs + operator, for a first run with no cluster (--nats: with nats-server, stream mode)" },
  { usage: "cluster up|down --dir DIR [--nats]", what: "start or stop a local etcd + kube-apiserver (--nats: and nats-server with JetStream)" },
  { usage: "publish -n NS -t TYPE [--id ID] -d JSON|@FILE [--nats URL]", what: "fan one event out to every matching subscription (--nats: one JetStream message, stream mode)" },
  { usage: "demo", what: "show the whole product on the embedded control plane" },
] as const;

const USAGE = `usage: hookline <command> [options]

commands:
${COMMANDS.map((c) => `  ${c.usage.padEnd(52)} ${c.what}`).join("\n")}

  --version                                            print the version
exit codes: 0 ok, 1 failed, 2 usage. kubectl hookline (kubectl-hookline) is the on-call console.
`;

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "cluster":
      return (await import("./cluster.js")).clusterCommand(rest);
    case "operator":
      return (await import("./run-operator.js")).operatorCommand(rest);
    case "dev":
      return (await import("./run-operator.js")).devCommand(rest);
    case "publish":
      return (await import("./publish.js")).publishCommand(rest);
    case "demo":
      return (await import("./demo.js")).demoCommand(rest);
    case "--version":
    case "version":
      process.stdout.write(`hookline ${VERSION}\n`);
      return EXIT.ok;
    case undefined:
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(USAGE);
      return command === undefined ? EXIT.usage : EXIT.ok;
    default:
      process.stderr.write(`hookline: unknown command "${command}"\n${USAGE}`);
      return EXIT.usage;
  }
}
