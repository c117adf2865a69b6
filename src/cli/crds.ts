// Installs (server-side applies) the CRDs built from src/api and waits until they are
// served: what `hookline dev` and `hookline demo` do instead of `kubectl apply -f crds/`.
import { deliveryCrd, replayCrd, subscriptionCrd } from "../api/crd.js";
import { CONTENT_TYPE, type KubeClient } from "../kube/client.js";

const CRD_TYPE_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

export async function installCrds(client: KubeClient, timeoutMs = 60_000): Promise<void> {
  // Every kind the operator watches: it waits for each cache to sync before it starts.
  const crds = [subscriptionCrd(), deliveryCrd(), replayCrd()] as Array<{ metadata: { name: string }; spec: { group: string; names: { plural: string }; versions: Array<{ name: string }> } }>;
  for (const crd of crds) {
    await client.request({
      method: "PATCH",
      path: `${CRD_TYPE_PATH}/${crd.metadata.name}`,
      query: { fieldManager: "hookline", force: true },
      contentType: CONTENT_TYPE.apply,
      body: crd,
    });
  }
  const deadline = Date.now() + timeoutMs;
  for (const crd of crds) {
    for (;;) {
      const got = await client.request<{ status?: { conditions?: Array<{ type: string; status: string }> } }>({ method: "GET", path: `${CRD_TYPE_PATH}/${crd.metadata.name}` });
      const established = got.status?.conditions?.some((c) => c.type === "Established" && c.status === "True");
      if (established) {
        const disc = await client
          .request<{ resources?: Array<{ name: string }> }>({ method: "GET", path: `/apis/${crd.spec.group}/${crd.spec.versions[0]!.name}` })
          .catch(() => undefined);
        if (disc?.resources?.some((r) => r.name === crd.spec.names.plural)) break;
      }
      if (Date.now() > deadline) throw new Error(`CRD ${crd.metadata.name} was not established within ${timeoutMs / 1000}s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
