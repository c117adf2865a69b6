// The cache's count of namespaces with subscriptions: what the global request slots ask at every take.
import { describe, expect, it } from "vitest";
import { Caches } from "./caches.js";
import type { KubeClient } from "../kube/client.js";

const silent = { child: () => silent, debug() {}, info() {}, warn() {}, error() {}, isLevelEnabled: () => false } as never;

function caches(namespaces: string[] = []) {
  const c = new Caches({} as KubeClient, namespaces, silent, { subscription: {}, delivery: {} } as never, { deliveryTimeoutMs: 10_000, breaker: { failureThreshold: 5, successThreshold: 1, cooldownMs: 60_000 } });
  const put = (namespace: string, name: string) => {
    const store = c.subscriptions.reflectors.get(namespaces.length ? namespace : "")!.store;
    store.set(`${namespace}/${name}`, { metadata: { namespace, name }, spec: {} });
  };
  const drop = (namespace: string, name: string) => c.subscriptions.reflectors.get(namespaces.length ? namespace : "")!.store.delete(`${namespace}/${name}`);
  return { c, put, drop };
}

describe("Caches.namespacesWithSubscriptions", () => {
  it("counts namespaces, not subscriptions, across every watched namespace", () => {
    const { c, put } = caches(["a", "b", "c"]);
    expect(c.namespacesWithSubscriptions(0)).toBe(0);
    put("a", "s1");
    put("a", "s2");
    put("b", "s1");
    expect(c.namespacesWithSubscriptions(1_000)).toBe(2);
  });

  it("counts again at most once a second, and at once if the clock goes back", () => {
    const { c, put, drop } = caches();
    put("a", "s1");
    expect(c.namespacesWithSubscriptions(10_000)).toBe(1);
    put("b", "s1");
    expect(c.namespacesWithSubscriptions(10_999)).toBe(1);
    expect(c.namespacesWithSubscriptions(11_000)).toBe(2);
    drop("b", "s1");
    expect(c.namespacesWithSubscriptions(5_000)).toBe(1);
  });
});
