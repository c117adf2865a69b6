// Helpers for integration tests against the control plane started by global-setup.ts.
// Each test creates its own namespace; nothing here sleeps to synchronize: poll with waitFor.
import { randomBytes } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import { inject } from "vitest";
import { execKubectl } from "./exec.js";
import type { ExecResult } from "./exec.js";

export type KubectlResult = ExecResult;

/** Runs kubectl; uses the admin kubeconfig provided by the global setup unless told otherwise. */
export function kubectl(
  args: string[],
  opts: { input?: string; kubeconfig?: string; timeoutMs?: number } = {},
): Promise<KubectlResult> {
  return execKubectl(opts.kubeconfig ?? inject("kubeconfig"), args, { input: opts.input, timeoutMs: opts.timeoutMs });
}

/** kubectl that throws (with its stderr) unless it exits 0; returns stdout. */
export async function kubectlOk(args: string[], opts: { input?: string; kubeconfig?: string } = {}): Promise<string> {
  const r = await kubectl(args, opts);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")} exited ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

/**
 * Creates a namespace named `<prefix>-<random>` and returns its name. With
 * `waitForServiceAccount`, also waits for its `default` ServiceAccount (needed to create Pods:
 * the ServiceAccount admission plugin is on, and kube-controller-manager creates the SA).
 */
export async function createNamespace(prefix: string, opts: { waitForServiceAccount?: boolean } = {}): Promise<string> {
  const clean =
    prefix
      .toLowerCase()
      .replace(/[^a-z0-9-]+/g, "-")
      .replace(/^-+|-+$/g, "")
      .slice(0, 50) || "test";
  const name = `${clean}-${randomBytes(4).toString("hex")}`;
  await kubectlOk(["create", "namespace", name]);
  if (opts.waitForServiceAccount) {
    await waitFor(async () => (await kubectl(["-n", name, "get", "serviceaccount", "default"])).code === 0, {
      description: `ServiceAccount default in namespace ${name}`,
    });
  }
  return name;
}

/** Starts deleting a namespace and returns without waiting for it to finish. */
export async function deleteNamespace(name: string): Promise<void> {
  await kubectlOk(["delete", "namespace", name, "--wait=false", "--ignore-not-found"]);
}

export interface WaitForOptions {
  /** Default 30 s. */
  timeoutMs?: number;
  /** Default 100 ms. */
  intervalMs?: number;
  /** What we wait for; appears in the timeout error. */
  description: string;
}

/**
 * Polls `fn` until it returns a truthy value and returns that value. Errors thrown by `fn` count
 * as "not yet". On timeout, throws with the description and the last value or error.
 */
export async function waitFor<T>(fn: () => T | Promise<T>, opts: WaitForOptions): Promise<NonNullable<T>> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const intervalMs = opts.intervalMs ?? 100;
  // A monotonic clock: a step of the wall clock (seen in CI: a 15 s wait ended after 3 s) neither ends nor stretches the wait.
  const deadline = performance.now() + timeoutMs;
  let last: string;
  for (;;) {
    try {
      const value = await fn();
      if (value) return value;
      last = `last value: ${show(value)}`;
    } catch (err) {
      last = `last error: ${err instanceof Error ? err.message : String(err)}`;
    }
    if (performance.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${opts.description} (${last})`);
    await delay(Math.min(intervalMs, Math.max(0, deadline - performance.now())));
  }
}

function show(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
