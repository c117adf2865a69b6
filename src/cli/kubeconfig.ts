// What the command-line entry points share: the usage error (exit code 2) and reading the
// kubeconfig as kubectl does (--kubeconfig, else KUBECONFIG or ~/.kube/config; --context).
import { KubeConfig } from "@kubernetes/client-node";

/** A mistake in how the command was called: exit code 2, with the message. */
export class UsageError extends Error {}

export function loadKubeConfig(flags: { kubeconfig?: string; context?: string }): KubeConfig {
  const kc = new KubeConfig();
  if (flags.kubeconfig) kc.loadFromFile(flags.kubeconfig);
  else kc.loadFromDefault();
  if (flags.context !== undefined) {
    if (!kc.getContexts().some((c) => c.name === flags.context)) throw new UsageError(`context "${flags.context}" does not exist in the kubeconfig`);
    kc.setCurrentContext(flags.context);
  }
  return kc;
}
