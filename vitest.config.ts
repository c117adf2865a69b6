import { configDefaults, defineConfig } from "vitest/config";

// Three projects, one after another: fast pure unit tests colocated with the code; integration
// tests that share one real control plane started by the global setup
// (test/helpers/global-setup.ts); and the files that must run alone (ALONE), on the same control plane.
/**
 * Files that compare latencies measured in the same run (a tenant alone, then with another
 * flooding): they run after every other file, one at a time, so that other files sharing the two
 * cores load neither measurement. Run among them, noisy-neighbour's "alone" and "flooded" phases
 * each saw whatever other files ran then: one CI run measured a p99 of 226 ms alone and 1,557 ms
 * flooded, almost all of it load from elsewhere (the median was 255 ms).
 */
const ALONE = ["test/integration/noisy-neighbour.test.ts"];

/**
 * What the two projects on the control plane share: the global setup that starts it once (the
 * `alone` project reuses it, it is not started twice) and timeouts for tests that wait on real
 * servers.
 */
const ON_THE_CONTROL_PLANE = {
  environment: "node",
  globalSetup: ["test/helpers/global-setup.ts"],
  testTimeout: 120_000,
  hookTimeout: 300_000,
};

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
          exclude: [...configDefaults.exclude, ...ALONE],
          ...ON_THE_CONTROL_PLANE,
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
      {
        test: {
          name: "alone",
          include: [...ALONE],
          ...ON_THE_CONTROL_PLANE,
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 2 },
        },
      },
    ],
  },
});
