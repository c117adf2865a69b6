// The root pino logger (JSON to stdout). Created once by the composition root; everything else
// gets a child. Known secret-bearing paths are redacted as a second line of defence: the first
// is that no code logs a secret, a header value, a URL path or a payload.
import { pino, type Logger } from "pino";

export function createLogger(opts: { level?: string; name?: string; destination?: NodeJS.WritableStream } = {}): Logger {
  return pino(
    {
      name: opts.name ?? "hookline",
      level: opts.level ?? "info",
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: {
        paths: ["secret", "*.secret", "headers.authorization", "*.headers.authorization", "token", "*.token", "payload", "*.payload"],
        censor: "[redacted]",
      },
      formatters: { level: (label) => ({ level: label }) },
    },
    opts.destination ?? process.stdout,
  );
}

export type { Logger };
