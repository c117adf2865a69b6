import { describe, expect, it } from "vitest";
import { classifyRequest, type RequestOptions, type Verb } from "./client.js";

type Req = Pick<RequestOptions, "method" | "path" | "query">;

describe("classifyRequest", () => {
  const G = "/apis/hookline.dev/v1alpha1";
  const table: Array<[string, Req, Verb, string]> = [
    // core group, namespaced
    ["get a Secret", { method: "GET", path: "/api/v1/namespaces/shop/secrets/acme-signing" }, "get", "secrets"],
    ["list Secrets in a namespace", { method: "GET", path: "/api/v1/namespaces/shop/secrets" }, "list", "secrets"],
    ["create an Event", { method: "POST", path: "/api/v1/namespaces/shop/events" }, "create", "events"],
    ["patch an Event", { method: "PATCH", path: "/api/v1/namespaces/shop/events/evt.123" }, "patch", "events"],
    ["delete a ConfigMap", { method: "DELETE", path: "/api/v1/namespaces/shop/configmaps/x" }, "delete", "configmaps"],
    ["delete every ConfigMap in a namespace", { method: "DELETE", path: "/api/v1/namespaces/shop/configmaps" }, "deletecollection", "configmaps"],
    // core group, cluster-wide
    ["list Namespaces", { method: "GET", path: "/api/v1/namespaces" }, "list", "namespaces"],
    ["get a Namespace", { method: "GET", path: "/api/v1/namespaces/shop" }, "get", "namespaces"],
    ["create a Namespace", { method: "POST", path: "/api/v1/namespaces" }, "create", "namespaces"],
    ["delete a Namespace", { method: "DELETE", path: "/api/v1/namespaces/shop" }, "delete", "namespaces"],
    ["list Secrets in all namespaces", { method: "GET", path: "/api/v1/secrets" }, "list", "secrets"],
    ["get a Node", { method: "GET", path: "/api/v1/nodes/n1" }, "get", "nodes"],
    // named group, namespaced
    ["get a delivery", { method: "GET", path: `${G}/namespaces/shop/webhookdeliveries/evt-1` }, "get", "webhookdeliveries"],
    ["list deliveries in a namespace", { method: "GET", path: `${G}/namespaces/shop/webhookdeliveries` }, "list", "webhookdeliveries"],
    ["create a delivery", { method: "POST", path: `${G}/namespaces/shop/webhookdeliveries` }, "create", "webhookdeliveries"],
    ["update a delivery", { method: "PUT", path: `${G}/namespaces/shop/webhookdeliveries/evt-1` }, "update", "webhookdeliveries"],
    ["patch a delivery", { method: "PATCH", path: `${G}/namespaces/shop/webhookdeliveries/evt-1` }, "patch", "webhookdeliveries"],
    ["delete a delivery", { method: "DELETE", path: `${G}/namespaces/shop/webhookdeliveries/evt-1` }, "delete", "webhookdeliveries"],
    ["delete all deliveries in a namespace", { method: "DELETE", path: `${G}/namespaces/shop/webhookdeliveries` }, "deletecollection", "webhookdeliveries"],
    ["a Lease in another group", { method: "PUT", path: "/apis/coordination.k8s.io/v1/namespaces/hookline/leases/hookline-leader" }, "update", "leases"],
    // named group, cluster-wide
    ["list deliveries in all namespaces", { method: "GET", path: `${G}/webhookdeliveries` }, "list", "webhookdeliveries"],
    ["list subscriptions in all namespaces", { method: "GET", path: `${G}/webhooksubscriptions`, query: { limit: 500 } }, "list", "webhooksubscriptions"],
    ["get a CRD", { method: "GET", path: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/webhookdeliveries.hookline.dev" }, "get", "customresourcedefinitions"],
    ["apply a CRD", { method: "PATCH", path: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/webhooksubscriptions.hookline.dev" }, "patch", "customresourcedefinitions"],
    // non-resource URLs
    ["the API server's version", { method: "GET", path: "/version" }, "get", "/version"],
    // subresources
    ["patch a delivery's status", { method: "PATCH", path: `${G}/namespaces/shop/webhookdeliveries/evt-1/status` }, "patch", "webhookdeliveries/status"],
    ["get a delivery's status", { method: "GET", path: `${G}/namespaces/shop/webhookdeliveries/evt-1/status` }, "get", "webhookdeliveries/status"],
    ["update a subscription's status", { method: "PUT", path: `${G}/namespaces/shop/webhooksubscriptions/acme/status` }, "update", "webhooksubscriptions/status"],
    ["a Pod's log", { method: "GET", path: "/api/v1/namespaces/shop/pods/p1/log" }, "get", "pods/log"],
    ["a cluster-scoped subresource", { method: "PATCH", path: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x.hookline.dev/status" }, "patch", "customresourcedefinitions/status"],
    // watches
    ["watch deliveries in all namespaces", { method: "GET", path: `${G}/webhookdeliveries`, query: { watch: true, resourceVersion: "42" } }, "watch", "webhookdeliveries"],
    ["watch with watch=1", { method: "GET", path: `${G}/namespaces/shop/webhookdeliveries`, query: { watch: 1 } }, "watch", "webhookdeliveries"],
    ["watch Secrets in a namespace", { method: "GET", path: "/api/v1/namespaces/shop/secrets", query: { watch: "true", allowWatchBookmarks: true } }, "watch", "secrets"],
    ["watch: false is a list", { method: "GET", path: `${G}/webhookdeliveries`, query: { watch: false } }, "list", "webhookdeliveries"],
    ["a list with a field selector", { method: "GET", path: `${G}/webhookdeliveries`, query: { fieldSelector: "status.phase!=Succeeded" } }, "list", "webhookdeliveries"],
    // a query string in the path is not part of the resource
    ["query in the path", { method: "GET", path: `${G}/namespaces/shop/webhookdeliveries?limit=10` }, "list", "webhookdeliveries"],
    ["trailing slash", { method: "GET", path: "/api/v1/namespaces/shop/secrets/" }, "list", "secrets"],
  ];

  it.each(table)("%s", (_name, req, verb, resource) => {
    expect(classifyRequest(req)).toEqual({ verb, resource });
  });

  it("a path with no resource is unknown", () => {
    expect(classifyRequest({ method: "GET", path: "/apis/hookline.dev/v1alpha1" })).toEqual({ verb: "list", resource: "unknown" });
  });
});
