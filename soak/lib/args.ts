// Command line of `npm run soak`: --seed N, --duration 30m (s/m/h), --quick, --no-faults, --keep,
// --mode cr|stream, --nats-nodes 1|3 (stream mode: a JetStream cluster of three).
import { randomInt } from "node:crypto";

export interface SoakArgs {
  seed: number;
  /** Workload + fault phase, before the settle phase. */
  durationMs: number;
  quick: boolean;
  faults: boolean;
  keep: boolean;
  /** cr (default): deliveries as custom resources; stream: events through JetStream (soak/stream.ts). */
  mode: "cr" | "stream";
  /** Whether --seed was given (else it was drawn at random). */
  seedGiven: boolean;
  /** Stream mode: nats-server nodes (3: a JetStream cluster, the stream at R3, and its faults). */
  natsNodes: number;
}

export function parseDuration(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(s|m|h)$/.exec(text.trim());
  if (!m) throw new Error(`--duration ${text}: expected a number followed by s, m or h (e.g. 30m)`);
  return Math.round(Number(m[1]) * { s: 1_000, m: 60_000, h: 3_600_000 }[m[2] as "s" | "m" | "h"]);
}

export function parseArgs(argv: string[]): SoakArgs {
  let seed: number | undefined;
  let duration: number | undefined;
  let quick = false;
  let faults = true;
  let keep = false;
  let mode: "cr" | "stream" = "cr";
  let natsNodes = 1;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === "--seed") {
      const v = value();
      if (!/^\d+$/.test(v) || Number(v) > 0xffffffff) throw new Error(`--seed ${v}: expected an integer from 0 to 4294967295`);
      seed = Number(v);
    } else if (a.startsWith("--seed=")) return parseArgs([...argv.slice(0, i), "--seed", a.slice(7), ...argv.slice(i + 1)]);
    else if (a === "--duration") duration = parseDuration(value());
    else if (a.startsWith("--duration=")) duration = parseDuration(a.slice(11));
    else if (a === "--quick") quick = true;
    else if (a === "--no-faults") faults = false;
    else if (a === "--keep") keep = true;
    else if (a === "--mode" || a.startsWith("--mode=")) {
      const v = a === "--mode" ? value() : a.slice(7);
      if (v !== "cr" && v !== "stream") throw new Error(`--mode ${v}: expected cr or stream`);
      mode = v;
    } else if (a === "--nats-nodes" || a.startsWith("--nats-nodes=")) {
      const v = a === "--nats-nodes" ? value() : a.slice(13);
      if (v !== "1" && v !== "3") throw new Error(`--nats-nodes ${v}: expected 1 or 3`);
      natsNodes = Number(v);
    } else throw new Error(`unknown option ${a} (options: --seed N, --duration 30m, --quick, --no-faults, --keep, --mode cr|stream, --nats-nodes 1|3)`);
  }
  if (natsNodes !== 1 && mode !== "stream") throw new Error("--nats-nodes is an option of --mode stream");
  const seedGiven = seed !== undefined;
  // Quick: 40 s of stream workload, 60 s on a cluster (its four faults take longer).
  const quickMs = mode === "stream" ? (natsNodes > 1 ? 60_000 : 40_000) : 110_000;
  return { seed: seed ?? randomInt(0, 0xffffffff), durationMs: duration ?? (quick ? quickMs : 30 * 60_000), quick, faults, keep, mode, seedGiven, natsNodes };
}
