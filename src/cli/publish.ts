// `hookline publish`: fans one event out to every matching subscription of a namespace, with
// the caller's kubeconfig, and prints what it created; with --nats URL (stream mode) it writes
// the event once to JetStream instead. Exit 0 on success (also when nothing matched), 2 for a
// usage or input problem, 1 when the cluster (or NATS) refused or failed.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { MAX_PAYLOAD_BYTES } from "../api/names.js";
import { PublishFailedError, PublishInputError } from "../publish/errors.js";
import type { PublishResult } from "../publish/result.js";
import { validateEvent, validateTraceContext } from "../publish/input.js";
import type { StreamPublishResult } from "../publish/stream.js";
import type { TraceContext } from "../jetstream/message.js";
import { NatsUrlError, parseNatsUrl } from "../jetstream/url.js";
import { USER_AGENT } from "../version.js";
import { UsageError } from "./exit-codes.js";

const USAGE = `usage: hookline publish --namespace NS --type TYPE [--id ID] --data JSON|@FILE|@- [--traceparent TP [--tracestate TS]] [--kubeconfig PATH] [--context NAME] [--nats URL] [-o table|json|yaml]

Publishes one event: creates one WebhookDelivery for every subscription of the namespace whose
eventTypes match TYPE (and that is not paused). The delivery names derive from the event id, so
publishing the same --id again creates nothing new: retrying is safe. Without --id a random id
is generated and printed.

  -n, --namespace NS     namespace of the subscriptions (required)
  -t, --type TYPE        event type, e.g. order.paid (required)
      --id ID            event id, the idempotency key (default: a random UUID)
  -d, --data JSON        the event data: inline JSON, @FILE, or @- for stdin (required;
                         at most ${MAX_PAYLOAD_BYTES} bytes serialized)
      --traceparent TP   the W3C traceparent of the trace this event belongs to
                         (00-<32 hex trace id>-<16 hex parent id>-<flags>); every attempt
                         is sent in that trace. Default: the TRACEPARENT environment
                         variable (the OpenTelemetry convention), if set
      --tracestate TS    the W3C tracestate that goes with it (default: TRACESTATE)
      --kubeconfig PATH  default: KUBECONFIG, ~/.kube/config, or in-cluster credentials
      --context NAME     kubeconfig context (default: the current context)
      --nats URL         stream mode: write the event once to NATS JetStream at URL
                         (nats://HOST:PORT or tls://..., credentials as nats://USER:PASS@HOST)
                         and return once JetStream stored it; no kubeconfig is used. The same
                         --id again within the stream's duplicate window is stored once.
  -o, --output FORMAT    table (default), json or yaml

Your credentials need list on webhooksubscriptions and create on webhookdeliveries in NS
(with --nats: permission to publish on hookline.NS.> on the NATS server).

examples:
  hookline publish -n shop -t order.paid --id evt-1001 -d '{"order": 1001, "total": "42.00"}'
  hookline publish -n shop -t invoice.paid -d @invoice.json -o json
`;

const FLAG: Record<string, string> = {
  namespace: "--namespace",
  type: "--type",
  id: "--id",
  data: "--data",
  event: "--data",
  "traceContext.traceparent": "--traceparent",
  "traceContext.tracestate": "--tracestate",
};

/**
 * --traceparent/--tracestate, else TRACEPARENT/TRACESTATE from the environment (OpenTelemetry's
 * environment carrier). A bad flag is a usage error; a bad environment value (set by some other
 * tool) is reported and left out.
 */
function traceContextOf(values: { traceparent?: string | undefined; tracestate?: string | undefined }): TraceContext | undefined {
  if (values.traceparent !== undefined || values.tracestate !== undefined) {
    if (values.traceparent === undefined) throw new UsageError("--tracestate needs --traceparent");
    return validateTraceContext({ traceparent: values.traceparent, ...(values.tracestate !== undefined ? { tracestate: values.tracestate } : {}) });
  }
  const traceparent = process.env.TRACEPARENT?.trim();
  if (!traceparent) return undefined;
  const tracestate = process.env.TRACESTATE;
  try {
    return validateTraceContext({ traceparent, ...(tracestate !== undefined ? { tracestate } : {}) });
  } catch (err) {
    if (!(err instanceof PublishInputError)) throw err;
    process.stderr.write(`hookline publish: warning: ${err.field === "traceContext.tracestate" ? "TRACESTATE" : "TRACEPARENT"} from the environment is ignored: ${err.message}\n`);
    return undefined;
  }
}


function readData(arg: string): unknown {
  let text = arg;
  let source = "--data";
  if (arg.startsWith("@")) {
    const file = arg.slice(1);
    source = file === "-" ? "stdin" : file;
    try {
      text = readFileSync(file === "-" ? 0 : file, "utf8");
    } catch (err) {
      throw new UsageError(`cannot read --data ${arg}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new UsageError(`${source} is not valid JSON (${(err as Error).message}); quote strings as JSON, e.g. --data '"hello"', or use @FILE`);
  }
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]! + 3))).join("")).join("\n") + "\n";
}

/** JSON or YAML text of `data`; the YAML library is loaded only for -o yaml. */
async function structured(data: unknown, output: "json" | "yaml"): Promise<string> {
  return output === "json" ? JSON.stringify(data, null, 2) + "\n" : (await import("yaml")).stringify(data);
}

async function printStreamResult(result: StreamPublishResult, output: string): Promise<void> {
  if (output === "json" || output === "yaml") {
    process.stdout.write(await structured(result, output));
    return;
  }
  process.stdout.write(table([["EVENT", "STREAM", "SEQ", "RESULT"], [result.id, result.stream, String(result.seq), result.result]]));
  const what = result.result === "duplicate" ? `already published within the duplicate window (stored once, as sequence ${result.seq})` : `stored in stream ${result.stream} as sequence ${result.seq}`;
  process.stderr.write(`event ${result.id} (${result.type}) in namespace ${result.namespace}: ${what}\n`);
}

/** --nats: connect once, publish, close (the URL and the event were checked before). */
async function publishStream(url: string, input: { namespace: string; type: string; id: string; data: unknown }, output: string, traceContext: TraceContext | undefined): Promise<number> {
  const [{ StreamConnection }, { publishToStream }] = await Promise.all([import("../jetstream/jetstream.js"), import("../publish/stream.js")]);
  const connection = await StreamConnection.connect({ url, source: "--nats", name: "hookline publish" });
  try {
    await printStreamResult(await publishToStream(connection, input, traceContext ? { traceContext } : {}), output);
    return 0;
  } finally {
    await connection.close();
  }
}

async function printResult(result: PublishResult, output: string, failures: Array<{ subscription: string; name: string; message: string }> = []): Promise<void> {
  if (output === "json" || output === "yaml") {
    const data = failures.length ? { ...result, failures } : result;
    process.stdout.write(await structured(data, output));
    return;
  }
  const rows = [
    ["SUBSCRIPTION", "DELIVERY", "RESULT"],
    ...result.deliveries.map((d) => [d.subscription, d.name, d.result]),
    ...failures.map((f) => [f.subscription, f.name, `failed: ${f.message}`]),
    ...result.skipped.map((s) => [s.subscription, "-", `skipped (${s.reason}${s.message ? `: ${s.message}` : ""})`]),
  ];
  const created = result.deliveries.filter((d) => d.result === "created").length;
  if (rows.length > 1) process.stdout.write(table(rows));
  const summary =
    result.deliveries.length === 0 && failures.length === 0 ?
      `no subscription in namespace ${result.namespace} takes ${result.type} events: nothing to deliver (kubectl get whsub -n ${result.namespace})`
    : `event ${result.id} (${result.type}) in namespace ${result.namespace}: ${created} created, ${result.deliveries.length - created} existing` +
      (failures.length ? `, ${failures.length} failed` : "");
  process.stderr.write(`${summary}\n`);
}

/** Options of `kubectl hookline publish`, which resolves the namespace like kubectl. */
export interface PublishCommandOptions {
  /** The namespace when -n is not given; called once every other argument has been checked. */
  defaultNamespace?: (flags: { kubeconfig?: string | undefined; context?: string | undefined }) => Promise<string>;
  /** What --help prints (default: hookline publish's usage). */
  help?: string;
}

/** A PublishInputError as the usage error it is on the command line, naming the flag. */
const usageOf = (err: PublishInputError) => new UsageError(`${FLAG[err.field] ?? err.field}: ${err.message}`);

/** Runs `check`, turning a PublishInputError into a usage error. */
function asUsage<T>(check: () => T): T {
  try {
    return check();
  } catch (err) {
    throw err instanceof PublishInputError ? usageOf(err) : err;
  }
}

const OPTIONS = {
  namespace: { type: "string", short: "n" },
  type: { type: "string", short: "t" },
  id: { type: "string" },
  data: { type: "string", short: "d" },
  kubeconfig: { type: "string" },
  context: { type: "string" },
  output: { type: "string", short: "o", default: "table" },
  nats: { type: "string" },
  traceparent: { type: "string" },
  tracestate: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

const parse = (args: string[]) => parseArgs({ args, options: OPTIONS, allowPositionals: false });
type Values = ReturnType<typeof parse>["values"];
type Output = "table" | "json" | "yaml";
interface Checked {
  output: Output;
  /** The event with its id settled; the namespace is "" when it is to come from opts.defaultNamespace. */
  input: { namespace: string; type: string; id: string; data: unknown };
  traceContext: TraceContext | undefined;
}

/** Every argument, before the kubeconfig is read or anything is sent: UsageError otherwise. */
function check(values: Values, opts: PublishCommandOptions): Checked {
  const output = values.output;
  if (values.namespace === undefined && !opts.defaultNamespace) throw new UsageError("--namespace is required");
  for (const flag of ["type", "data"] as const) if (values[flag] === undefined) throw new UsageError(`--${flag} is required`);
  if (output !== "table" && output !== "json" && output !== "yaml") throw new UsageError(`--output must be table, json or yaml, got "${output}"`);
  if (values.nats !== undefined) {
    if (values.kubeconfig !== undefined || values.context !== undefined) throw new UsageError("--nats publishes to NATS JetStream: --kubeconfig and --context do not apply");
    try {
      parseNatsUrl(values.nats);
    } catch (err) {
      if (err instanceof NatsUrlError) throw new UsageError(`--nats: ${err.message}`);
      throw err;
    }
  }
  const data = readData(values.data!);
  const traceContext = asUsage(() => traceContextOf(values));
  // The event as a whole (type, id, data; the namespace when given), before the kubeconfig is
  // read for the default namespace; the id is settled here, once.
  const { id } = asUsage(() => validateEvent({ namespace: values.namespace ?? "default", type: values.type, ...(values.id !== undefined ? { id: values.id } : {}), data }));
  return { output, input: { namespace: values.namespace ?? "", type: values.type!, id, data }, traceContext };
}

/**
 * What the cluster or NATS answered badly (unreachable, refused, an id reused for another event,
 * a fan-out cut short), as exit code 1. An input problem found late is still a usage error.
 */
async function failed(err: unknown, output: Output, namespace: string): Promise<number> {
  if (err instanceof UsageError) throw err;
  if (err instanceof PublishInputError) throw usageOf(err);
  if (err instanceof PublishFailedError) await printResult(err.result, output, err.failures);
  let hint = "";
  const { ApiError } = await import("../kube/client.js");
  if (err instanceof ApiError && (err.status === 401 || err.status === 403)) {
    hint = `\n(publishing needs list on webhooksubscriptions and create on webhookdeliveries in namespace ${namespace}; see docs/publishing.md)`;
  }
  process.stderr.write(`hookline publish: ${(err as Error).message}${hint}\n`);
  return 1;
}

/**
 * `hookline publish` (and `kubectl hookline publish`). Every argument is checked before the
 * kubeconfig is read or anything is sent; usage errors are thrown (parseArgs's, UsageError) and
 * the caller turns them into exit code 2.
 */
export async function publishCommand(args: string[], opts: PublishCommandOptions = {}): Promise<number> {
  const { values } = parse(args);
  if (values.help) {
    process.stdout.write(opts.help ?? USAGE);
    return 0;
  }
  const { output, input, traceContext } = check(values, opts);
  try {
    if (values.namespace === undefined) {
      input.namespace = await opts.defaultNamespace!({ kubeconfig: values.kubeconfig, context: values.context });
      asUsage(() => validateEvent(input));
    }
    if (values.nats !== undefined) return await publishStream(values.nats, input, output, traceContext);
    // Imported when needed (after every usage check): --help or a usage error needs none of the clients.
    const [{ loadKubeConfig }, { KubeClient }, { publish }] = await Promise.all([import("./kubeconfig.js"), import("../kube/client.js"), import("../publish/fanout.js")]);
    const { credentials } = await loadKubeConfig(values);
    const client = await KubeClient.create(credentials, { userAgent: USER_AGENT, connections: 8 });
    try {
      const result = await publish(client, input, traceContext ? { traceContext } : {});
      await printResult(result, output);
      return 0;
    } finally {
      await client.close();
    }
  } catch (err) {
    return await failed(err, output, input.namespace);
  }
}
