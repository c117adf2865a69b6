import { defineConfig } from "vitest/config";

// Two projects: fast pure unit tests colocated with the code, and integration tests that share
// one real control plane started by the global setup (test/helpers/global-setup.ts).
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          include: ["src/**/*.test.ts", "bench/**/*.test.ts"],
          environment: "node",
        },
      },
      {
        test: {
          name: "integration",
          include: ["test/**/*.test.ts"],
          environment: "node",
          globalSetup: ["test/helpers/global-setup.ts"],
          testTimeout: 120_000,
          hookTimeout: 300_000,
          fileParallelism: true,
          maxWorkers: 2,
          // vitest 4.1 wants projects with different maxWorkers in different groups.
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
