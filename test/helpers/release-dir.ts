import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * Where a test run (known by its control plane directory) keeps what test/helpers/release.ts
 * builds; the global teardown removes it. Its own module: the global setup imports it, and must
 * not import vitest's test API.
 */
export function sharedReleaseDir(clusterDir: string): string {
  return join(tmpdir(), `hookline-release-${createHash("sha256").update(clusterDir).digest("hex").slice(0, 16)}`);
}
