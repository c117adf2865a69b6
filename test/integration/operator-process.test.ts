// The helper that runs `hookline operator` as a child process (test/helpers/process.ts): an
// operator that cannot start is reported at once, with its exit and its last log lines, and a
// port taken after freePorts chose it is told apart (callers try again with new ports).
import { createServer } from "node:net";
import { expect, it } from "vitest";
import { freePorts } from "../../src/cluster/ports.js";
import { OperatorExitedError, spawnOperator } from "../helpers/process.js";

// Under the helper's own 30 s wait for "caches synced": the exit must end the wait, not the timeout.
it("an operator whose metrics port is taken: OperatorExitedError with its exit, its 'operator failed to start' line, and portTaken", { timeout: 20_000 }, async () => {
  const [taken, health] = await freePorts(2);
  const squatter = createServer();
  await new Promise<void>((r) => squatter.listen(taken, "0.0.0.0", () => r()));
  try {
    const err = await spawnOperator({ name: "taken-port", namespaces: ["default"], metricsPort: taken!, healthPort: health! }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OperatorExitedError);
    const e = err as OperatorExitedError;
    expect(e.message).toMatch(/exited \(code 1, signal null\) before caches synced/);
    expect(e.lines.some((l) => l.msg === "operator failed to start")).toBe(true);
    expect(e.portTaken).toBe(true);
  } finally {
    squatter.close();
  }
});
