// Exit codes of every `hookline` and `kubectl hookline` command.
export const EXIT = {
  /** The command did what was asked. */
  ok: 0,
  /** The cluster refused or failed, or what was followed ended badly (a failed replay or ping). */
  failed: 1,
  /** A usage or input problem: nothing was sent to the cluster. */
  usage: 2,
  /** `hookline operator`/`dev` only: the environment is invalid (EX_CONFIG). */
  config: 78,
} as const;

export const EXIT_DOCS: Array<{ code: number; meaning: string }> = [
  { code: EXIT.ok, meaning: "ok: the command did what was asked (`--help` and `--version` too)" },
  { code: EXIT.failed, meaning: "failed: the cluster refused or failed, or what was followed ended badly (a replay that failed, a ping that was not delivered, a wait that timed out)" },
  { code: EXIT.usage, meaning: "usage: an unknown command or flag, a missing or invalid argument; nothing was sent" },
  { code: EXIT.config, meaning: "`hookline operator` and `hookline dev` only: an invalid environment variable (EX_CONFIG), named on stderr" },
];

/** A mistake in how the command was called: exit code 2, with the message and a usage line. */
export class UsageError extends Error {}

/**
 * The message of a usage error: a UsageError, or what node:util parseArgs throws for an unknown
 * option, a missing option value or an unexpected argument (trimmed to its first sentence: the
 * hint about "--" that follows helps nobody who mistyped a flag). Undefined for anything else.
 */
export function usageMessage(err: unknown): string | undefined {
  if (err instanceof UsageError) return err.message;
  const code = (err as { code?: unknown } | null)?.code;
  if (err instanceof Error && typeof code === "string" && code.startsWith("ERR_PARSE_ARGS_")) {
    return code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" ? err.message.replace(/\. To specify a positional argument .*$/s, "") : err.message;
  }
  return undefined;
}
