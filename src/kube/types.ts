// The few Kubernetes object shapes Hookline reads and writes, and the paths to them.

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }>;
  managedFields?: unknown[];
}

export interface KubeObject<Spec = unknown, Status = unknown> {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec?: Spec;
  status?: Status;
}

/** The work-queue key of a namespaced object: "namespace/name" (or "name" when cluster-scoped). */
export function objectKey(meta: Pick<ObjectMeta, "namespace" | "name">): string {
  return meta.namespace ? `${meta.namespace}/${meta.name}` : meta.name;
}

/** The namespace and name of an "namespace/name" key. */
export function splitKey(key: string): { namespace: string; name: string } {
  const slash = key.indexOf("/");
  return slash < 0 ? { namespace: "", name: key } : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

/** The namespace of a "namespace/name" key ("" for a cluster-scoped one): a queue's tenant. */
export function namespaceOfKey(key: string): string {
  const slash = key.indexOf("/");
  return slash < 0 ? "" : key.slice(0, slash);
}

export interface ObjectRef {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid?: string;
  resourceVersion?: string;
}

export interface ResourceType {
  group: string; // "" for core
  version: string;
  plural: string;
}

export function collectionPath(type: ResourceType, namespace?: string): string {
  const base = type.group ? `/apis/${type.group}/${type.version}` : `/api/${type.version}`;
  return namespace ? `${base}/namespaces/${encodeURIComponent(namespace)}/${type.plural}` : `${base}/${type.plural}`;
}

export function objectPath(type: ResourceType, namespace: string | undefined, name: string, subresource?: string): string {
  return `${collectionPath(type, namespace)}/${encodeURIComponent(name)}${subresource ? `/${subresource}` : ""}`;
}

export const CORE = {
  secrets: { group: "", version: "v1", plural: "secrets" },
  events: { group: "", version: "v1", plural: "events" },
  namespaces: { group: "", version: "v1", plural: "namespaces" },
  leases: { group: "coordination.k8s.io", version: "v1", plural: "leases" },
  tokenReviews: { group: "authentication.k8s.io", version: "v1", plural: "tokenreviews" },
  subjectAccessReviews: { group: "authorization.k8s.io", version: "v1", plural: "subjectaccessreviews" },
} as const satisfies Record<string, ResourceType>;
