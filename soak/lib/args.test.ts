import { describe, expect, it } from "vitest";
import { parseArgs } from "./args.js";

describe("soak arguments: --nats-nodes", () => {
  it("stream mode on one server by default, on a three-node cluster with --nats-nodes 3 (a longer quick run)", () => {
    expect(parseArgs(["--mode", "stream", "--quick", "--seed", "1"])).toMatchObject({ natsNodes: 1, durationMs: 40_000 });
    expect(parseArgs(["--mode", "stream", "--quick", "--nats-nodes", "3", "--seed", "1"])).toMatchObject({ natsNodes: 3, durationMs: 60_000 });
    expect(parseArgs(["--mode=stream", "--nats-nodes=3", "--duration", "30m"])).toMatchObject({ natsNodes: 3, durationMs: 30 * 60_000 });
  });

  it("refuses another node count, and --nats-nodes without stream mode", () => {
    expect(() => parseArgs(["--mode", "stream", "--nats-nodes", "2"])).toThrow("--nats-nodes 2: expected 1 or 3");
    expect(() => parseArgs(["--nats-nodes", "3"])).toThrow("--nats-nodes is an option of --mode stream");
  });
});
