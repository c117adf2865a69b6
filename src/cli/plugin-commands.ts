// The `kubectl hookline` commands, for the plugin's usage text and docs/api.md.
export const PLUGIN_COMMANDS = [
  { usage: "status SUB", what: "conditions, breaker and health with since-when, backlog and oldest pending age, last errors, recent Events" },
  { usage: "attempts DELIVERY", what: "the attempt history as a table: number, start, status, reason, duration, outcome, error" },
  { usage: "dlq [-A] [--subscription S] [--reason R] [--since 1h]", what: "dead letters, newest first" },
  { usage: 'replay DELIVERY --reason "..." [--wait]', what: "replay one dead letter (annotation hookline.dev/replay); with --wait, follow it to its result" },
  { usage: 'replay --subscription S --reason "..." [--concurrency N] [--wait]', what: "replay every dead letter of a subscription (hookline.dev/replay-dead-letters); with --wait, follow it to the summary" },
  { usage: 'reset SUB --reason "..."', what: "close the breaker and re-enable the endpoint now (annotation hookline.dev/reset-endpoint); waits until the operator did it" },
  { usage: "ping SUB [--timeout 60s]", what: "send one signed hookline.ping event through the real path to SUB and show the answer" },
  { usage: "publish -t TYPE [--id ID] -d JSON|@FILE", what: "the same as hookline publish" },
] as const;

export const PLUGIN_GLOBAL_FLAGS = [
  { flag: "-n, --namespace NS", what: "namespace (default: the kubeconfig context's namespace, else default)" },
  { flag: "-A, --all-namespaces", what: "every namespace (dlq)" },
  { flag: "--context NAME", what: "kubeconfig context (default: the current context)" },
  { flag: "--kubeconfig PATH", what: "default: KUBECONFIG, ~/.kube/config, or in-cluster credentials" },
  { flag: "-o, --output table|json|yaml", what: "output format (default table)" },
  { flag: "--version", what: "print the version" },
] as const;
