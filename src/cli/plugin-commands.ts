// The `kubectl hookline` commands, for the plugin's usage text and docs/api.md. The first word
// names the command; a command with two forms (replay) has two rows.
export const PLUGIN_COMMANDS = [
  { usage: "status SUB", what: "conditions, breaker and health with since-when, backlog and oldest pending age, last errors, recent Events" },
  { usage: "attempts DELIVERY", what: "the attempt history as a table: number, start, status, reason, duration, outcome, error" },
  { usage: "dlq [-A] [--subscription S] [--reason R] [--since 1h]", what: "dead letters, newest first" },
  { usage: 'replay DELIVERY --reason "..." [--wait [--timeout 2m]]', what: "replay one dead letter (annotation hookline.dev/replay); with --wait, follow it to its result (for at most --timeout, default 2m)" },
  {
    usage: 'replay --subscription S --reason "..." [--concurrency N] [--wait [--timeout 10m]]',
    what: "replay every dead letter of a subscription (hookline.dev/replay-dead-letters); with --wait, follow it to the summary (for at most --timeout, default 10m)",
  },
  { usage: 'reset SUB --reason "..." [--timeout 60s]', what: "close the breaker and re-enable the endpoint now (annotation hookline.dev/reset-endpoint); waits until the operator did it" },
  { usage: "ping SUB [--timeout 60s]", what: "send one signed hookline.ping event through the real path to SUB and show the answer" },
  {
    usage: "publish -t TYPE [--id ID] -d JSON|@FILE|@- [--traceparent TP [--tracestate TS]] [--nats URL]",
    what: "the same as hookline publish, in the kubeconfig context's namespace unless -n is given",
  },
] as const;

export const PLUGIN_GLOBAL_FLAGS = [
  { flag: "-n, --namespace NS", what: "namespace (default: the kubeconfig context's namespace, else default)" },
  { flag: "-A, --all-namespaces", what: "every namespace (dlq)" },
  { flag: "--context NAME", what: "kubeconfig context (default: the current context)" },
  { flag: "--kubeconfig PATH", what: "default: KUBECONFIG, ~/.kube/config, or in-cluster credentials" },
  { flag: "-o, --output table|json|yaml", what: "output format (default table)" },
  { flag: "-h, --help", what: "print the usage (of one command: kubectl hookline COMMAND --help)" },
  { flag: "--version", what: "print the version" },
] as const;
