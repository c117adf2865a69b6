// What the command-line entry points share: reading the kubeconfig as kubectl does
// (--kubeconfig, else KUBECONFIG or ~/.kube/config, else in-cluster credentials; --context).
// Arguments are checked before this is called: no usage error depends on the kubeconfig, except
// an unknown --context.
import { ContextNotFoundError, loadKubeconfig, type LoadedKubeconfig } from "../kube/kubeconfig.js";
import { UsageError } from "./exit-codes.js";

export { UsageError };

export async function loadKubeConfig(flags: { kubeconfig?: string | undefined; context?: string | undefined }, env: NodeJS.ProcessEnv = process.env): Promise<LoadedKubeconfig> {
  try {
    return await loadKubeconfig({ file: flags.kubeconfig, context: flags.context, env });
  } catch (err) {
    if (err instanceof ContextNotFoundError && err.fromFlag) throw new UsageError(err.message);
    throw err;
  }
}
