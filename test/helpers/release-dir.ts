import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * Where a test run (known by `run`: its control plane directory, process and start) keeps what
 * test/helpers/release.ts builds; the global setup provides it as `releaseDir` and its teardown
 * removes it. Its own module: the global setup imports it, and must not import vitest's test API.
 */
export function sharedReleaseDir(run: string): string {
  return join(tmpdir(), `hookline-release-${createHash("sha256").update(run).digest("hex").slice(0, 16)}`);
}
