// Timestamps in status: epoch ms <-> RFC 3339 strings, shared by the breaker and health so a
// restarted operator reads back exactly what it wrote.

const rfc3339Re = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/** Epoch ms as RFC 3339 in UTC with millisecond precision ("2025-06-15T12:00:00.250Z"). */
export function toRfc3339(ms: number): string {
  return new Date(ms).toISOString();
}

/**
 * An RFC 3339 timestamp (any offset, any fraction length: Kubernetes writes seconds or
 * microseconds) as epoch ms, truncated to the millisecond; undefined when absent or invalid.
 */
export function fromRfc3339(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const m = rfc3339Re.exec(text);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 60) return undefined;
  const dayStart = new Date(Date.UTC(year, month - 1, day));
  if (dayStart.getUTCFullYear() !== year || dayStart.getUTCMonth() !== month - 1 || dayStart.getUTCDate() !== day) return undefined;
  const fraction = m[7] === undefined ? 0 : Number(m[7].slice(1, 4).padEnd(3, "0"));
  const zone = m[8] ?? "Z";
  let offsetMin = 0;
  if (zone !== "Z" && zone !== "z") {
    const [hh, mm] = zone.slice(1).split(":").map(Number) as [number, number];
    if (hh > 23 || mm > 59) return undefined;
    offsetMin = (zone.startsWith("-") ? -1 : 1) * (hh * 60 + mm);
  }
  return Date.UTC(year, month - 1, day, hour, minute, second) + fraction - offsetMin * 60_000;
}
