// The `hookline` command line: dispatches to one module per command.
// Commands are imported when used, so `hookline publish` does not load the operator.

const USAGE = `usage: hookline <command> [options]

commands:
  operator                 run the controller against the current kubeconfig (in-cluster in a pod)
  dev                      cluster up + CRDs + operator, for a first run with no cluster
  cluster up|down --dir D  start or stop a local etcd + kube-apiserver
  publish                  fan one event out to every matching subscription
  demo                     show the whole product on the embedded control plane
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
    case undefined:
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(USAGE);
      return command === undefined ? 2 : 0;
    default:
      process.stderr.write(`hookline: unknown command "${command}"\n${USAGE}`);
      return 2;
  }
}
