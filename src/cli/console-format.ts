// Formatting for `kubectl hookline`: kubectl-style ages, aligned tables, and the three outputs.
import { stringify } from "yaml";

export type Output = "table" | "json" | "yaml";

/** An age as kubectl prints it: 45s, 3m12s, 2h5m, 3d4h. */
export function age(ms: number): string {
  if (!Number.isFinite(ms)) return "-";
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m}m${s % 60}s` : `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 ? `${h}h${m % 60}m` : `${h}h`;
  const d = Math.floor(h / 24);
  return h % 24 ? `${d}d${h % 24}h` : `${d}d`;
}

/** How long ago an RFC 3339 time was ("-" when absent). */
export function ago(at: string | undefined, now: number): string {
  return at ? age(now - Date.parse(at)) : "-";
}

/** How far in the future ("now" when past, "-" when absent). */
export function inFuture(at: string | undefined, now: number): string {
  if (!at) return "-";
  const ms = Date.parse(at) - now;
  return ms <= 0 ? "now" : age(ms);
}

/** Aligned columns, the header first, like kubectl get. */
export function table(header: string[], rows: string[][]): string {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? "").length)));
  return all.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]! + 3))).join("").trimEnd()).join("\n") + "\n";
}

/** Two columns, label and value, for one object. */
export function fields(rows: Array<[string, string]>): string {
  const width = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${`${k}:`.padEnd(width + 3)}${v}`).join("\n") + "\n";
}

export function render(output: Output, data: unknown, human: () => string): string {
  if (output === "json") return JSON.stringify(data, null, 2) + "\n";
  if (output === "yaml") return stringify(data, { lineWidth: 0 });
  return human();
}

/** One line of at most `max` characters (errors and messages in tables). */
export function oneLine(text: string | undefined, max = 80): string {
  if (!text) return "";
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** A Kubernetes-style duration for --since and --timeout: 90s, 15m, 1h30m, 2d. */
export function parseSince(text: string): number | undefined {
  const m = /^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/.exec(text.trim());
  if (!m || text.trim() === "") return undefined;
  const [, d = "0", h = "0", min = "0", s = "0"] = m;
  return ((Number(d) * 24 + Number(h)) * 60 + Number(min)) * 60_000 + Number(s) * 1000;
}
