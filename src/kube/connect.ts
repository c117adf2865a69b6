// Connecting to the API server: the client from a kubeconfig, every answer counted (the caller's
// observer, e.g. request metrics) and watched for readiness (ApiHealth), and the start's check
// that the CRDs are installed, which names the fix when they are not.
import type { Logger } from "pino";
import type { Part } from "../runtime/manager.js";
import { ApiHealth } from "./api-health.js";
import { ApiError, KubeClient, type RequestObserver } from "./client.js";
import { loadKubeconfig } from "./kubeconfig.js";

export interface Connection {
  client: KubeClient;
  /** Whether the API server answers, from the requests made anyway (readiness). */
  health: ApiHealth;
}

export async function connectApi(o: { kubeconfig?: string | undefined; env: NodeJS.ProcessEnv; userAgent: string; observer: RequestObserver }): Promise<Connection> {
  const { credentials } = await loadKubeconfig({ file: o.kubeconfig, env: o.env });
  // The check runs only after requests failed, so after the client exists.
  const health = new ApiHealth({ graceMs: 2_000, check: () => client.request({ method: "GET", path: "/version", timeoutMs: 5_000 }) });
  const client = await KubeClient.create(credentials, {
    userAgent: o.userAgent,
    observer: {
      observe: (verb, resource, code, seconds) => {
        o.observer.observe(verb, resource, code, seconds);
        health.observe(code);
      },
    },
  });
  return { client, health };
}

/**
 * A server-group part: at start, a clear message when the CRDs of `group/version` are missing
 * (the watches keep retrying meanwhile); while running, not ready when the API server is unreachable.
 */
export function crdCheck(conn: Connection, group: string, version: string, log: Logger): Part {
  return {
    name: "crd check",
    start: async () => {
      try {
        await conn.client.request({ method: "GET", path: `/apis/${group}/${version}` });
      } catch (err) {
        if (err instanceof ApiError && err.isNotFound) {
          log.error(`the ${group} CRDs are not installed: run \`kubectl apply -f crds/\` (or install the Helm chart); waiting for them`);
        } else log.warn({ err: (err as Error).message }, "could not check the CRDs");
      }
    },
    notReady: () => (conn.health.reachable() ? undefined : "the API server cannot be reached"),
  };
}
