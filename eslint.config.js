// Lint budget: type-aware rules that catch lost promises, plus import boundaries that keep the
// pure core pure (see docs/architecture.md). Only src/config reads the environment.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

const layer = (files, forbidden, message) => ({
  files,
  rules: {
    // An entry is one pattern, or a pattern with its exceptions (["../x/*", "!../x/ok.js"]).
    "no-restricted-imports": ["error", { patterns: forbidden.map((group) => ({ group: Array.isArray(group) ? group : [group], message })) }],
  },
});

/** The webhook features (folders of src/): generic plumbing imports none of them. */
const FEATURES = ["../delivery/*", "../transports/*", "../finished/*", "../replay/*", "../subscriptions/*", "../publish/*", "../cli/*", "../cluster/*"];
/** Everything with I/O or clients: the pure layers import none of it. */
const SHELL = ["../kube/*", "../runtime/*", "../observability/*", "../jetstream/*", ...FEATURES];

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", "coverage/**", "charts/**", "bench/results/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { project: "./tsconfig.check.json", tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
      "@typescript-eslint/switch-exhaustiveness-check": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
      complexity: ["warn", 25],
      "max-depth": ["warn", 4],
      "no-restricted-properties": ["error", { object: "process", property: "env", message: "Only src/config (and the CLI entry) read the environment; take a Config." }],
    },
  },
  { files: ["src/config/**", "src/cli/**", "test/**", "bench/**", "soak/**", "scripts/**", "docs/receivers/**", "vitest.config.ts"], rules: { "no-restricted-properties": "off" } },
  {
    files: ["test/**", "bench/**", "soak/**", "scripts/**", "**/*.test.ts"],
    rules: {
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-return": "off",
      "@typescript-eslint/no-non-null-assertion": "off",
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-redundant-type-constituents": "off",
      complexity: "off",
    },
  },
  { files: ["eslint.config.js", "bin/**/*.js"], ...tseslint.configs.disableTypeChecked },
  { files: ["bin/**/*.js"], languageOptions: { globals: { process: "readonly" } } },
  // Import boundaries. Pure layers import only pure layers.
  layer(["src/api/**"], ["../*", "!../api/*"], "src/api is the schema layer: it imports nothing else from src."),
  layer(["src/lib/**"], ["../*", "!../lib/*"], "src/lib is the leaf of shared helpers (sleep, backoff): it imports nothing else from src."),
  // src/core/ and its subfolders (attempt/, endpoint/, request/): each relative pattern at both depths.
  layer(["src/core/**"], [...SHELL, "../config/*"].flatMap((p) => [p, `../${p}`]).concat(["undici", "@kubernetes/*", "node:http", "node:https", "node:fs", "node:child_process", "pino", "prom-client"]), "src/core is pure: no I/O, no clients, no config reading; inject what it needs."),
  layer(["src/config/**"], [...SHELL.filter((p) => p !== "../jetstream/*"), ["../jetstream/*", "!../jetstream/url.js"]], "src/config only parses the environment (HOOKLINE_NATS_URL with the pure jetstream/url.ts)."),
  layer(["src/jetstream/**"], [...SHELL.filter((p) => p !== "../jetstream/*"), "../config/*", "undici", "@kubernetes/*", "pino", "prom-client"], "src/jetstream is the JetStream layer: NATS, the API schemas and core only; take a logger callback, not pino."),
  layer(["src/kube/**", "src/runtime/**"], FEATURES, "kube and runtime are generic plumbing: they know nothing of delivery."),
  layer(["src/transports/**", "src/finished/**", "src/replay/**", "src/subscriptions/**", "src/publish/**", "src/observability/**", "src/cluster/**"], ["../cli/*", "../../cli/*"], "Only the CLI wires things together."),
  // The delivery engine and what the features share: the features build on it, never the reverse.
  layer(
    ["src/delivery/**"],
    ["cli", "transports", "finished", "replay", "subscriptions", "publish", "cluster"].flatMap((f) => [`../${f}/*`, `../../${f}/*`]),
    "src/delivery is the engine the features build on: it imports no feature (transports, finished, replay, subscriptions, publish) and not the CLI.",
  ),
  // Tracing costs nothing when off: the OpenTelemetry SDK is imported by one module, which
  // src/observability/tracing.ts loads with import() only when OTEL_EXPORTER_OTLP_ENDPOINT is set.
  {
    files: ["src/**/*.ts"],
    ignores: ["src/observability/otel.ts"],
    rules: {
      "no-restricted-syntax": [
        "error",
        { selector: "ImportDeclaration[source.value=/^@opentelemetry\\//]", message: "Only src/observability/otel.ts imports @opentelemetry/* (loaded on demand by tracing.ts)." },
        { selector: "ImportExpression[source.value=/^@opentelemetry\\//]", message: "Only src/observability/otel.ts imports @opentelemetry/* (loaded on demand by tracing.ts)." },
      ],
    },
  },
);
