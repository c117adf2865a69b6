// The `provider` label of the per-subscription metrics the specification groups by provider
// (webhook_delivery_attempts_total, webhook_breaker_state): the subscription's
// hookline.dev/provider label, kept only when it is in the operator's allow-list
// (HOOKLINE_METRIC_PROVIDERS), so a user cannot grow the label's values past that list.

/** The value for a subscription without the label, or with one not in the list. */
export const GENERIC_PROVIDER = "generic";

/** The specification's allow-list, the default of HOOKLINE_METRIC_PROVIDERS. */
export const DEFAULT_PROVIDERS = ["stripe", "github", "slack", "sendgrid", "generic"] as const;

/** What one allow-list entry may be: a short lower-case token (a Prometheus label value that reads well). */
export const PROVIDER_PATTERN = /^[a-z0-9][a-z0-9_-]{0,31}$/;
export const MAX_PROVIDERS = 50;

/** The provider label for a subscription label value: the value (lower-case, trimmed) when allowed, else generic. */
export function providerLabel(value: string | undefined, allowed: ReadonlySet<string>): string {
  if (value === undefined) return GENERIC_PROVIDER;
  const v = value.trim().toLowerCase();
  return allowed.has(v) ? v : GENERIC_PROVIDER;
}

/** Parses HOOKLINE_METRIC_PROVIDERS (comma-separated); a problem names the entry. */
export function parseProviders(text: string): { ok: true; providers: string[] } | { ok: false; problem: string } {
  const entries = text.split(",").map((e) => e.trim().toLowerCase()).filter((e) => e !== "");
  if (entries.length > MAX_PROVIDERS) return { ok: false, problem: `has ${entries.length} entries; at most ${MAX_PROVIDERS}` };
  const bad = entries.find((e) => !PROVIDER_PATTERN.test(e));
  if (bad !== undefined) return { ok: false, problem: `entry ${JSON.stringify(bad.slice(0, 40))} is not 1-32 of a-z, 0-9, _ and - (starting with a letter or digit)` };
  return { ok: true, providers: [...new Set([...entries, GENERIC_PROVIDER])] };
}
