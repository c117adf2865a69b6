// Writes the status subresource with a JSON merge patch that carries the resourceVersion it was
// planned from, so a write based on a stale read fails with 409 Conflict instead of clobbering.
import { ACCEPT, CONTENT_TYPE, type KubeClient } from "./client.js";
import { objectPath, type KubeObject, type ResourceType } from "./types.js";

/** Makes a status (or a merge patch of one) acceptable to the API server: see api/fit.ts. */
export type StatusFitter = (status: unknown) => unknown;

export class StatusWriter {
  /** @param fitters by resource plural: applied to every status this writer sends. */
  constructor(
    private readonly client: KubeClient,
    private readonly fitters: Readonly<Record<string, StatusFitter>> = {},
  ) {}

  /** The status as it will be stored: every string and list within its schema's limits. */
  fit<S>(type: ResourceType, status: S): S {
    const f = this.fitters[type.plural];
    return f ? (f(status) as S) : status;
  }

  /**
   * Merge-patches `status` like patchStatus, answered with the object's metadata only (PartialObjectMetadata): the caller
   * knows the status it wrote and needs only the new resourceVersion, so the API server need
   * not send, nor we parse, the payload and the status back on every write.
   */
  async patchStatusMetadataOnly(type: ResourceType, namespace: string, name: string, status: unknown, resourceVersion?: string): Promise<Pick<KubeObject, "metadata">> {
    return this.client.request<Pick<KubeObject, "metadata">>({
      method: "PATCH",
      path: objectPath(type, namespace, name, "status"),
      query: { fieldManager: "hookline" },
      contentType: CONTENT_TYPE.merge,
      accept: ACCEPT.objectMetadata,
      body: { metadata: resourceVersion ? { resourceVersion } : {}, status: this.fit(type, status) },
    });
  }

  /**
   * Merge-patches `status` (null deletes a field). With `resourceVersion`, the write is refused
   * with a Conflict ApiError when the object changed since. Returns the updated object.
   */
  async patchStatus<S>(type: ResourceType, namespace: string, name: string, status: S, resourceVersion?: string): Promise<KubeObject<unknown, S>> {
    return this.client.request<KubeObject<unknown, S>>({
      method: "PATCH",
      path: objectPath(type, namespace, name, "status"),
      query: { fieldManager: "hookline" },
      contentType: CONTENT_TYPE.merge,
      body: { metadata: resourceVersion ? { resourceVersion } : {}, status: this.fit(type, status) },
    });
  }

  /** Merge-patches metadata (annotations, labels) on the main resource. */
  async patchMetadata(type: ResourceType, namespace: string, name: string, metadata: { annotations?: Record<string, string | null>; labels?: Record<string, string | null> }, resourceVersion?: string): Promise<KubeObject> {
    return this.client.request<KubeObject>({
      method: "PATCH",
      path: objectPath(type, namespace, name),
      query: { fieldManager: "hookline" },
      contentType: CONTENT_TYPE.merge,
      body: { metadata: { ...metadata, ...(resourceVersion ? { resourceVersion } : {}) } },
    });
  }
}
