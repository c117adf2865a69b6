// What the command-line entry points share: reading the kubeconfig as kubectl does
// (--kubeconfig, else KUBECONFIG or ~/.kube/config, else in-cluster credentials; --context).
// Arguments are checked before this is called: no usage error depends on the kubeconfig, except
// an unknown --context.
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { UsageError } from "./exit-codes.js";

export { UsageError };

/** Where a pod's service account token is mounted: in-cluster credentials. */
const SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token";

function readFile(kc: KubeConfig, file: string): void {
  try {
    kc.loadFromFile(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new Error(`cannot read the kubeconfig ${file}: ${code === "ENOENT" ? "no such file" : (err as Error).message}`);
  }
}

export function loadKubeConfig(flags: { kubeconfig?: string | undefined; context?: string | undefined }, env: NodeJS.ProcessEnv = process.env): KubeConfig {
  const kc = new KubeConfig();
  const files = (env.KUBECONFIG ?? "").split(delimiter).filter(Boolean);
  if (flags.kubeconfig) readFile(kc, flags.kubeconfig);
  else if (files.length > 0) {
    // The client merges KUBECONFIG's files as kubectl does; a missing one is named here first.
    for (const file of files) if (!existsSync(file)) throw new Error(`cannot read the kubeconfig ${file} (from KUBECONFIG): no such file`);
    kc.loadFromDefault();
  } else if (existsSync(join(homedir(), ".kube", "config")) || existsSync(SERVICE_ACCOUNT_TOKEN)) kc.loadFromDefault();
  else throw new Error("no kubeconfig: KUBECONFIG is not set, ~/.kube/config does not exist and this is not a pod; pass --kubeconfig PATH or export KUBECONFIG");
  if (flags.context !== undefined) {
    if (!kc.getContexts().some((c) => c.name === flags.context)) throw new UsageError(`--context: context "${flags.context}" does not exist in the kubeconfig`);
    kc.setCurrentContext(flags.context);
  }
  return kc;
}
