import { defineConfig } from "vitest/config";

// Two projects: fast pure unit tests colocated with the code, and integration tests that share
// one real control plane started by the global setup (test/helpers/global-setup.ts).
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          include: ["src/**/*.test.ts", "bench/**/*.test.ts", "soak/**/*.test.ts"],
          environment: "node",
          // One process per worker for all unit files, not one per file: forking and importing
          // anew for each of ~100 small files cost 37 s of a 38 s unit run (9 s this way).
          // Unit tests hold no state between files (vi.stubEnv and spies are undone in afterEach).
          isolate: false,
          maxWorkers: 2,
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
          // Three. Many of these tests wait on receivers, timers and the API server, so two left a
          // core idle a fifth of the time: a warm npm test took 9 min 35 s-10 min with two, about
          // 7 min with three. Timing bounds are written for a shared machine (noisy-neighbour's
          // median has a 100 ms slack against a failure of seconds).
          maxWorkers: 3,
          // A worker keeps its process and module cache from file to file (files share no state
          // but the cluster, each in its own namespaces): 62 fresh imports cost ~60 s of worker time.
          // (The stream-jetstream restart case that once failed this way failed isolated too: a
          // consumer's state not yet on disk at nats-server's SIGKILL, not a file's leftovers.)
          isolate: false,
          // Unit files first (their failures show in seconds). In one group with the unit project,
          // vitest ran the unit files last instead, and the whole run was no faster.
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
