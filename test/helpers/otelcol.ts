// A real OpenTelemetry Collector for one test file: the OTLP/HTTP receiver on 127.0.0.1 and the
// file exporter writing every span it receives as OTLP JSON lines, from the project's own build
// (hack/build-otelcol.sh: Go module proxy, cached; built by the global setup). It runs in its own process group, named by
// its directory, and the reaper kills it with the test worker even if that dies by SIGKILL.
import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePorts } from "../../src/cluster/ports.js";
import { spawnReaper } from "../../src/cluster/reaper.js";
import { waitFor } from "./cluster.js";
import { testTools } from "./tools.js";

/** The collector binary the global setup built. */
export function otelcolBinary(): Promise<string> {
  return Promise.resolve(testTools().otelcol);
}

/** One span as the collector received it, attributes as plain values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind: 3 is CLIENT. */
  kind: number;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  statusCode: number;
  attributes: Record<string, unknown>;
  resource: Record<string, unknown>;
  scope: string;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
}

interface OtlpValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
}
type OtlpAttributes = Array<{ key: string; value: OtlpValue }> | undefined;

function plain(attrs: OtlpAttributes): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { key, value } of attrs ?? []) {
    out[key] = value.stringValue ?? value.boolValue ?? (value.intValue !== undefined ? Number(value.intValue) : value.doubleValue);
  }
  return out;
}

export class TestCollector {
  private constructor(
    readonly dir: string,
    /** OTLP/HTTP base endpoint, what OTEL_EXPORTER_OTLP_ENDPOINT takes. */
    readonly endpoint: string,
    private readonly pgid: number,
    private readonly reaperPid: number,
    private readonly exited: Promise<void>,
  ) {}

  static async start(name = "test"): Promise<TestCollector> {
    const bin = await otelcolBinary();
    const dir = await mkdtemp(join(tmpdir(), `hookline-otelcol-${name}-`));
    const [port] = await freePorts(1);
    const spans = join(dir, "spans.jsonl");
    const config = join(dir, "config.yaml");
    writeFileSync(
      config,
      [
        "receivers:",
        "  otlp:",
        "    protocols:",
        "      http:",
        `        endpoint: 127.0.0.1:${port}`,
        "exporters:",
        "  file:",
        `    path: ${spans}`,
        "    flush_interval: 50ms",
        "service:",
        "  telemetry:",
        "    metrics:",
        "      level: none",
        "  pipelines:",
        "    traces:",
        "      receivers: [otlp]",
        "      exporters: [file]",
        "",
      ].join("\n"),
    );
    const log = join(dir, "otelcol.log");
    const child = spawn("/bin/sh", ["-c", `exec "$0" --config "file:$1" >>"$2" 2>&1`, bin, config, log], { detached: true, stdio: "ignore" });
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    if (child.pid === undefined) throw new Error("could not start the OpenTelemetry Collector");
    const state = join(dir, "state.json");
    writeFileSync(state, JSON.stringify({ pgids: { otelcol: child.pid } }));
    const collector = new TestCollector(dir, `http://127.0.0.1:${port}`, child.pid, spawnReaper(process.pid, state), exited);
    let gone = false;
    void exited.then(() => (gone = true));
    await waitFor(
      async () => {
        if (gone) throw new Error(`the collector exited while starting:\n${readFileSync(log, "utf8").slice(-2000)}`);
        try {
          // An empty export: the receiver answers once it listens.
          const res = await fetch(`${collector.endpoint}/v1/traces`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
          return res.status === 200;
        } catch {
          return false;
        }
      },
      { description: "the OpenTelemetry Collector's OTLP/HTTP receiver", timeoutMs: 60_000 },
    );
    return collector;
  }

  /** Every span the collector has written so far. */
  spans(): ReceivedSpan[] {
    const file = join(this.dir, "spans.jsonl");
    if (!existsSync(file)) return [];
    const out: ReceivedSpan[] = [];
    for (const line of readFileSync(file, "utf8").split("\n")) {
      if (!line.trim()) continue;
      const batch = JSON.parse(line) as {
        resourceSpans?: Array<{
          resource?: { attributes?: OtlpAttributes };
          scopeSpans?: Array<{ scope?: { name?: string }; spans?: Array<Omit<ReceivedSpan, "attributes" | "resource" | "scope" | "statusCode"> & { attributes?: OtlpAttributes; status?: { code?: number } }> }>;
        }>;
      };
      for (const rs of batch.resourceSpans ?? []) {
        const resource = plain(rs.resource?.attributes);
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            out.push({
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId ?? "",
              name: s.name,
              kind: s.kind,
              statusCode: s.status?.code ?? 0,
              attributes: plain(s.attributes),
              resource,
              scope: ss.scope?.name ?? "",
              startTimeUnixNano: s.startTimeUnixNano,
              endTimeUnixNano: s.endTimeUnixNano,
            });
          }
        }
      }
    }
    return out;
  }

  async close(): Promise<void> {
    try {
      process.kill(-this.pgid, "SIGTERM");
    } catch {
      // Already gone.
    }
    await Promise.race([this.exited, new Promise((r) => setTimeout(r, 10_000).unref())]);
    try {
      process.kill(-this.pgid, "SIGKILL");
    } catch {
      // Exited.
    }
    try {
      process.kill(this.reaperPid, "SIGKILL");
    } catch {
      // Exited.
    }
    await rm(this.dir, { recursive: true, force: true });
  }
}
