// `kubectl hookline`: the on-call console. One screen per question (how is this subscription,
// what happened to this delivery, what is dead-lettered), and the levers (replay, reset, ping,
// publish) with their outcome followed to the end. Namespace and context come from the
// kubeconfig like kubectl. Exit 0 ok, 1 failed, 2 usage (src/cli/exit-codes.ts): every command
// checks its arguments before the kubeconfig is read, so a usage error never reaches a cluster.
import { randomBytes } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import { parseArgs } from "node:util";
import type { ClusterCredentials } from "../kube/kubeconfig.js";
import type { DeliveryStatus } from "../api/delivery.js";
import { ANNOTATIONS, API_VERSION, CATEGORY, DELIVERY, LABELS, PING_EVENT_TYPE, REPLAY_CONCURRENCY, REPLAY_REASON_MAX_LENGTH, REPLAY_REASON_MIN_LENGTH } from "../api/names.js";
import type { SubscriptionStatus } from "../api/subscription.js";
import type * as KubeModule from "../kube/client.js";
import type { KubeClient } from "../kube/client.js";
import { CORE, collectionPath, objectPath, type KubeObject } from "../kube/types.js";
import { DELIVERIES, SUBSCRIPTIONS } from "../delivery/objects.js";
import { USER_AGENT, VERSION } from "../version.js";
import { ago, age, fields, inFuture, oneLine, parseSince, render, table, type Output } from "./console-format.js";
import { EXIT, UsageError, usageMessage } from "./exit-codes.js";
import { PLUGIN_COMMANDS, PLUGIN_GLOBAL_FLAGS } from "./plugin-commands.js";

const FLAGS = `flags:
${PLUGIN_GLOBAL_FLAGS.map((f) => `  ${f.flag.padEnd(32)} ${f.what}`).join("\n")}
`;

const USAGE = `usage: kubectl hookline <command> [options]

The on-call console of Hookline (${CATEGORY}).

commands:
${PLUGIN_COMMANDS.map((c) => `  ${c.usage}\n      ${c.what}`).join("\n")}

${FLAGS}
kubectl hookline <command> --help shows one command.
exit codes: 0 ok, 1 failed, 2 usage.
`;

const rowsOf = (command: string | undefined) => PLUGIN_COMMANDS.filter((c) => c.usage.split(" ")[0] === command);

/** The usage lines of one command ("usage: kubectl hookline replay DELIVERY ...", then its other forms). */
function usageLines(command: string | undefined): string {
  const rows = rowsOf(command);
  if (!rows.length) return "usage: kubectl hookline <command> [options]\n(see kubectl hookline --help)";
  return `${rows.map((c, i) => `${i === 0 ? "usage:" : "      "} kubectl hookline ${c.usage}`).join("\n")}\n(see kubectl hookline ${command} --help)`;
}

/** `kubectl hookline COMMAND --help`: that command's forms, what they do, and the flags. */
function helpOf(command: string | undefined): string {
  const rows = rowsOf(command);
  if (!rows.length) return USAGE;
  const same = command === "publish" ? "\nThe same as hookline publish (see hookline publish --help), with the namespace of the kubeconfig context\nwhen -n is not given.\n" : "";
  return `${rows.map((c, i) => `${i === 0 ? "usage:" : "      "} kubectl hookline ${c.usage}`).join("\n")}\n\n${rows.map((c) => `  ${c.what}`).join("\n")}\n${same}\n${FLAGS}\nexit codes: 0 ok, 1 failed, 2 usage.\n`;
}

/** What was followed ended badly: the message is the last line the user reads; exit 1. */
class Failed extends Error {}

type Sub = KubeObject<{ url?: string; paused?: boolean; eventTypes?: string[] }, SubscriptionStatus>;
type Del = KubeObject<{ subscriptionRef?: { name: string }; eventType?: string; eventId?: string }, DeliveryStatus>;
interface KEvent {
  type?: string;
  reason?: string;
  message?: string;
  count?: number;
  lastTimestamp?: string;
  eventTime?: string;
  series?: { lastObservedTime?: string };
  metadata: { creationTimestamp?: string; namespace?: string };
}

interface Ctx {
  client: KubeClient;
  namespace: string;
  all: boolean;
  output: Output;
  flags: Flags;
  now: () => number;
  out: (text: string) => void;
  err: (text: string) => void;
}

const OPTIONS = {
  namespace: { type: "string", short: "n" },
  "all-namespaces": { type: "boolean", short: "A" },
  context: { type: "string" },
  kubeconfig: { type: "string" },
  output: { type: "string", short: "o" },
  version: { type: "boolean" },
  help: { type: "boolean", short: "h" },
  subscription: { type: "string" },
  reason: { type: "string" },
  since: { type: "string" },
  concurrency: { type: "string" },
  wait: { type: "boolean" },
  timeout: { type: "string" },
} as const;
/** The options of `publish` (hookline publish's), known here only to find the command among the arguments. */
const PUBLISH_OPTIONS = {
  type: { type: "string", short: "t" },
  id: { type: "string" },
  data: { type: "string", short: "d" },
  nats: { type: "string" },
  traceparent: { type: "string" },
  tracestate: { type: "string" },
} as const;
type Flags = ReturnType<typeof parse>["values"];

/** The options of every command but publish, for tests and docs: each is in PLUGIN_COMMANDS or PLUGIN_GLOBAL_FLAGS. */
export const PLUGIN_OPTIONS: Record<string, { type: string; short?: string }> = { ...OPTIONS, ...PUBLISH_OPTIONS };

function parse(args: string[]) {
  return parseArgs({ args, options: OPTIONS, allowPositionals: true, strict: true });
}

/** The command and where it is in argv, read leniently (also when an option is unknown). */
function commandOf(argv: string[]): { name: string; index: number } | undefined {
  const { tokens } = parseArgs({ args: argv, options: { ...OPTIONS, ...PUBLISH_OPTIONS }, allowPositionals: true, strict: false, tokens: true });
  const first = tokens.find((t) => t.kind === "positional");
  return first ? { name: first.value, index: first.index } : undefined;
}

const NAMESPACE_NAME = /^(?=.{1,63}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

type Run = (ctx: Ctx) => Promise<number>;
/** A command checks its arguments (throwing UsageError) and returns what it does with the cluster. */
type Command = (args: string[], flags: Flags) => Run;

export async function kubectlHookline(argv: string[]): Promise<number> {
  const out = (t: string) => void process.stdout.write(t);
  const err = (t: string) => void process.stderr.write(t);
  const command = commandOf(argv);
  let client: KubeClient | undefined;
  /** The API client's module, loaded once every argument is checked (a usage error needs none of it). */
  let kube: typeof KubeModule | undefined;
  try {
    if (command?.name === "publish") {
      return await publishPassThrough(argv.filter((_, i) => i !== command.index));
    }
    const { values, positionals } = parse(argv);
    if (values.version) return out(`kubectl-hookline ${VERSION}\n`), EXIT.ok;
    const [name, ...rest] = positionals;
    if (name === "help") return out(helpOf(rest[0])), EXIT.ok;
    if (values.help) return out(helpOf(name)), EXIT.ok;
    if (name === undefined) return err(USAGE), EXIT.usage;
    const prepare = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
    if (!prepare) return err(`error: unknown command "${name}"\n\n${USAGE}`), EXIT.usage;
    // Every argument is checked before the kubeconfig is read.
    if (values.namespace !== undefined && !NAMESPACE_NAME.test(values.namespace)) throw new UsageError(`--namespace must be a namespace name (a lowercase RFC 1123 label), got "${values.namespace}"`);
    const output = outputOf(values.output);
    const run = prepare(rest, values);
    const { kc, namespace } = await loadKubeConfig(values);
    kube = await import("../kube/client.js");
    client = await kube.KubeClient.create(kc, { userAgent: `${USER_AGENT} (kubectl-hookline)`, connections: 4 });
    return await run({ client, namespace, all: values["all-namespaces"] ?? false, output, flags: values, now: Date.now, out, err });
  } catch (e) {
    const usage = usageMessage(e);
    if (usage !== undefined) return err(`error: ${usage}\n${usageLines(command?.name)}\n`), EXIT.usage;
    if (e instanceof Failed) return err(`${e.message}\n`), EXIT.failed;
    if (kube && e instanceof kube.ApiError) return err(`Error from server (${e.reason || e.status}): ${e.message}\n`), EXIT.failed;
    return err(`error: ${(e as Error).message}\n`), EXIT.failed;
  } finally {
    await client?.close();
  }
}

function outputOf(o: string | undefined): Output {
  if (o === undefined) return "table";
  if (o === "table" || o === "json" || o === "yaml") return o;
  throw new UsageError(`--output must be table, json or yaml, got "${o}"`);
}

/** The kubeconfig as kubectl reads it: --kubeconfig, else KUBECONFIG or ~/.kube/config; --context; the context's namespace. */
async function loadKubeConfig(values: { kubeconfig?: string | undefined; context?: string | undefined; namespace?: string | undefined }): Promise<{ kc: ClusterCredentials; namespace: string }> {
  // Imported when needed: --help, --version and usage errors do without.
  const loaded = await (await import("./kubeconfig.js")).loadKubeConfig(values);
  return { kc: loaded.credentials, namespace: values.namespace ?? loaded.namespace ?? "default" };
}

/**
 * `kubectl hookline publish` is `hookline publish` with the namespace resolved like kubectl (-n,
 * else the kubeconfig context's), read only once every other argument has been checked.
 */
async function publishPassThrough(args: string[]): Promise<number> {
  const { publishCommand } = await import("./publish.js");
  return publishCommand(args, { defaultNamespace: async (flags) => (await loadKubeConfig(flags)).namespace, help: helpOf("publish") });
}

const COMMANDS: Record<string, Command> = {
  status: (args) => {
    const name = one(args, "SUB (a WebhookSubscription)");
    return (ctx) => status(ctx, name);
  },
  attempts: (args) => {
    const name = one(args, "DELIVERY (a WebhookDelivery)");
    return (ctx) => attempts(ctx, name);
  },
  dlq: (args, flags) => {
    if (args.length) throw new UsageError(`dlq takes no arguments (got ${args.join(" ")}); use --subscription`);
    if (flags.subscription === "") throw new UsageError("--subscription must name a WebhookSubscription");
    const sinceMs = flags.since === undefined ? undefined : durationFlag(flags.since, "--since", 0);
    return (ctx) => dlq(ctx, sinceMs);
  },
  replay: (args, flags) => {
    if (flags.subscription !== undefined) {
      if (args.length) throw new UsageError("give either DELIVERY or --subscription S, not both");
      if (!flags.subscription) throw new UsageError("--subscription must name a WebhookSubscription");
      const sub = flags.subscription;
      const reason = reasonOf(flags, ANNOTATIONS.replayDeadLetters);
      const concurrency = concurrencyOf(flags.concurrency);
      const timeoutMs = durationFlag(flags.timeout, "--timeout", 600_000);
      return (ctx) => replaySubscription(ctx, sub, reason, concurrency, timeoutMs);
    }
    const name = one(args, "DELIVERY (or --subscription S)");
    const reason = reasonOf(flags, ANNOTATIONS.replay);
    if (flags.concurrency !== undefined) throw new UsageError("--concurrency applies to replay --subscription S only");
    const timeoutMs = durationFlag(flags.timeout, "--timeout", 120_000);
    return (ctx) => replay(ctx, name, reason, timeoutMs);
  },
  reset: (args, flags) => {
    const name = one(args, "SUB (a WebhookSubscription)");
    const reason = reasonOf(flags, ANNOTATIONS.resetEndpoint);
    const timeoutMs = durationFlag(flags.timeout, "--timeout", 60_000);
    return (ctx) => reset(ctx, name, reason, timeoutMs);
  },
  ping: (args, flags) => {
    const sub = one(args, "SUB (a WebhookSubscription)");
    const timeoutMs = durationFlag(flags.timeout, "--timeout", 60_000);
    return (ctx) => ping(ctx, sub, timeoutMs);
  },
};

function one(args: string[], what: string): string {
  if (args.length !== 1) throw new UsageError(args.length ? `one ${what} only, got ${args.join(" ")}` : `${what} is required`);
  if (!args[0]) throw new UsageError(`${what} must not be empty`);
  return args[0];
}

function concurrencyOf(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const concurrency = Number(text);
  if (!/^\d+$/.test(text) || concurrency < REPLAY_CONCURRENCY.min || concurrency > REPLAY_CONCURRENCY.max) {
    throw new UsageError(`--concurrency must be an integer from ${REPLAY_CONCURRENCY.min} to ${REPLAY_CONCURRENCY.max} (default ${REPLAY_CONCURRENCY.default})`);
  }
  return concurrency;
}

function reasonOf(flags: Flags, annotation: string): string {
  const reason = flags.reason;
  if (reason === undefined) throw new UsageError(`--reason is required (it is recorded in ${annotation}, status and an Event)`);
  if (reason.trim().length < REPLAY_REASON_MIN_LENGTH || reason.length > REPLAY_REASON_MAX_LENGTH) {
    throw new UsageError(`--reason must have ${REPLAY_REASON_MIN_LENGTH} to ${REPLAY_REASON_MAX_LENGTH} characters, e.g. --reason "endpoint fixed, INC-42"`);
  }
  return reason;
}

function durationFlag(text: string | undefined, flag: string, fallbackMs: number): number {
  if (text === undefined) return fallbackMs;
  const ms = parseSince(text);
  if (ms === undefined || ms <= 0) throw new UsageError(`${flag} must be a duration such as 90s, 15m or 1h, got "${text}"`);
  return ms;
}

const get = <T>(ctx: Ctx, type: typeof SUBSCRIPTIONS, namespace: string, name: string) => ctx.client.request<T>({ method: "GET", path: objectPath(type, namespace, name) });

async function list<T>(ctx: Ctx, type: typeof SUBSCRIPTIONS, namespace: string | undefined, query: Record<string, string | number>, max = Infinity): Promise<T[]> {
  const items: T[] = [];
  let cont: string | undefined;
  do {
    const page = await ctx.client.request<{ items?: T[] | null; metadata?: { continue?: string } }>({ method: "GET", path: collectionPath(type, namespace), query: { limit: 250, ...query, ...(cont ? { continue: cont } : {}) } });
    items.push(...(page.items ?? []));
    cont = page.metadata?.continue || undefined;
  } while (cont && items.length < max);
  return items;
}

/** Polls `check` until it returns a value, or fails with `timeoutText` after `timeoutMs`. */
async function follow<T>(timeoutMs: number, check: () => Promise<T | undefined>, timeoutText: () => Promise<string> | string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() >= deadline) throw new Failed(await timeoutText());
    await delay(250);
  }
}

const cond = (conditions: Array<{ type: string; status: string; reason: string; message?: string; lastTransitionTime: string }> | undefined, type: string) => conditions?.find((c) => c.type === type);

// ---- status ----------------------------------------------------------------------------

const ACTIVE_SELECTOR = (sub: string) => `spec.subscriptionRef.name=${sub},status.phase!=Succeeded,status.phase!=DeadLettered,status.phase!=Discarded`;

async function status(ctx: Ctx, name: string): Promise<number> {
  const sub = await get<Sub>(ctx, SUBSCRIPTIONS, ctx.namespace, name);
  const now = ctx.now();
  // Metadata only: the backlog and the dead letters may be many and their payloads are not
  // needed. Both are counted now, not read from the status rollup, which lags by up to 5 s.
  const metadataOf = (fieldSelector: string) =>
    ctx.client.request<{ items?: Array<{ metadata: { creationTimestamp?: string } }> }>({
      method: "GET",
      path: collectionPath(DELIVERIES, ctx.namespace),
      query: { fieldSelector },
      accept: "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
    });
  const pendingItems = (await metadataOf(ACTIVE_SELECTOR(name))).items ?? [];
  const deadLetters = ((await metadataOf(`spec.subscriptionRef.name=${name},status.phase=DeadLettered`)).items ?? []).length;
  const oldest = pendingItems.map((d) => Date.parse(d.metadata.creationTimestamp ?? "")).filter(Number.isFinite).sort((a, b) => a - b)[0];
  const errors = await lastErrors(ctx, name);
  const events = await recentEvents(ctx, "WebhookSubscription", name);
  const s = sub.status ?? {};
  const data = {
    subscription: `${ctx.namespace}/${name}`,
    url: sub.spec?.url,
    paused: sub.spec?.paused ?? false,
    conditions: s.conditions ?? [],
    breaker: s.breaker,
    health: s.health,
    backlog: { pending: pendingItems.length, oldestPendingSince: oldest === undefined ? null : new Date(oldest).toISOString(), oldestPendingAgeSeconds: oldest === undefined ? 0 : Math.floor((now - oldest) / 1000) },
    deliveries: s.deliveries,
    deadLetters,
    lastReplay: s.lastReplay,
    lastReset: s.lastReset,
    lastErrors: errors,
    events,
  };
  ctx.out(render(ctx.output, data, () => statusScreen(data, s, now)));
  return EXIT.ok;
}

function statusScreen(data: { subscription: string; url?: string | undefined; paused: boolean; backlog: { pending: number; oldestPendingSince: string | null }; deadLetters: number; lastErrors: LastError[]; events: EventRow[] }, s: SubscriptionStatus, now: number): string {
  const ready = cond(s.conditions, "Ready");
  const healthy = cond(s.conditions, "EndpointHealthy");
  const b = s.breaker;
  const h = s.health;
  const line = (c: typeof ready) => (c ? `${c.status} ${c.reason} (since ${ago(c.lastTransitionTime, now)}): ${c.message ?? ""}` : "-");
  const rows: Array<[string, string]> = [
    ["Subscription", data.subscription],
    ["URL", data.url ?? "-"],
    ["Ready", line(ready)],
    ["EndpointHealthy", line(healthy)],
    ["Breaker", b ? `${b.state}${b.state !== "Closed" && b.openedAt ? ` since ${ago(b.openedAt, now)}` : ""}, ${b.consecutiveFailures} failures in a row${b.state === "Open" ? `, next probe in ${inFuture(b.nextProbeAt, now)}` : ""}` : "-"],
    ["Health", h ? `${h.state}${h.reason ? ` (${h.reason})` : ""}${healthy ? ` since ${ago(healthy.lastTransitionTime, now)}` : ""}, last success ${h.lastSuccessAt ? `${ago(h.lastSuccessAt, now)} ago` : "never"}, last failure ${h.lastFailureAt ? `${ago(h.lastFailureAt, now)} ago` : "never"}, ${h.totalFailures}/${h.totalAttempts} attempts failed` : "-"],
    ["Backlog", `${data.backlog.pending} pending${data.backlog.oldestPendingSince ? `, oldest ${ago(data.backlog.oldestPendingSince, now)}` : ""}`],
    ["Dead letters", `${data.deadLetters} (kubectl hookline dlq --subscription ${data.subscription.split("/")[1]})`],
    ["Paused", String(data.paused)],
  ];
  const advice = cond(s.conditions, "ConfigurationAdvice");
  if (advice?.status === "True") rows.splice(4, 0, ["Advice", `${advice.reason}: ${advice.message ?? ""}`]);
  if (s.lastReset) rows.push(["Last reset", `${ago(s.lastReset.at, now)} ago (was ${s.lastReset.breaker}/${s.lastReset.health}): ${s.lastReset.reason}`]);
  if (s.lastReplay) {
    const r = s.lastReplay;
    rows.push(["Last replay", `${r.finishedAt ? `finished ${ago(r.finishedAt, now)} ago` : "running"}: ${r.attempted} attempted, ${r.succeeded} succeeded, ${r.failed} failed, ${r.deduped} deduped: ${r.reason}`]);
  }
  let text = fields(rows);
  text += "\nLast errors:\n" + (data.lastErrors.length ? table(["AGE", "DELIVERY", "PHASE", "STATUS", "REASON", "ERROR"], data.lastErrors.map((e) => [ago(e.at, now), e.delivery, e.phase, e.status, e.reason, oneLine(e.error, 60)])) : "  none\n");
  text += "\nEvents:\n" + (data.events.length ? table(["AGE", "TYPE", "REASON", "MESSAGE"], data.events.map((e) => [ago(e.at, now), e.type, e.reason, oneLine(e.message, 100)])) : "  none\n");
  return text;
}

interface LastError {
  at: string;
  delivery: string;
  phase: string;
  status: string;
  reason: string;
  error: string;
}

/** The latest failed attempts of the subscription's retrying and dead-lettered deliveries (a bounded sample). */
async function lastErrors(ctx: Ctx, sub: string): Promise<LastError[]> {
  const sample: Del[] = [];
  for (const phase of ["Retrying", "DeadLettered"]) {
    const page = await ctx.client.request<{ items?: Del[] | null }>({ method: "GET", path: collectionPath(DELIVERIES, ctx.namespace), query: { fieldSelector: `spec.subscriptionRef.name=${sub},status.phase=${phase}`, limit: 50 } });
    sample.push(...(page.items ?? []));
  }
  return sample
    .filter((d) => d.status?.lastAttempt && d.status.lastAttempt.outcome !== "Succeeded")
    .map((d) => {
      const a = d.status!.lastAttempt!;
      return { at: a.startedAt, delivery: d.metadata.name, phase: d.status!.phase ?? "", status: a.responseStatus ? String(a.responseStatus) : "-", reason: a.reason ?? a.outcome, error: a.error ?? "" };
    })
    .sort((a, b) => Date.parse(b.at) - Date.parse(a.at))
    .slice(0, 5);
}

interface EventRow {
  at: string;
  type: string;
  reason: string;
  message: string;
  count: number;
}

async function recentEvents(ctx: Ctx, kind: string, name: string, limit = 10): Promise<EventRow[]> {
  const items = await list<KEvent>(ctx, CORE.events, ctx.namespace, { fieldSelector: `involvedObject.kind=${kind},involvedObject.name=${name}` }, 500);
  return items
    .map((e) => ({ at: e.series?.lastObservedTime ?? e.lastTimestamp ?? e.eventTime ?? e.metadata.creationTimestamp ?? "", type: e.type ?? "", reason: e.reason ?? "", message: e.message ?? "", count: e.count ?? 1 }))
    .sort((a, b) => Date.parse(b.at) - Date.parse(a.at))
    .slice(0, limit);
}

// ---- attempts --------------------------------------------------------------------------

async function attempts(ctx: Ctx, name: string): Promise<number> {
  const d = await get<Del>(ctx, DELIVERIES, ctx.namespace, name);
  const s = d.status ?? {};
  const history = s.history?.length ? s.history : s.lastAttempt ? [s.lastAttempt] : [];
  const data = { delivery: `${ctx.namespace}/${name}`, subscription: d.spec?.subscriptionRef?.name, eventType: d.spec?.eventType, phase: s.phase ?? "Pending", attempts: s.attempts ?? 0, nextAttemptAt: s.nextAttemptAt, succeeded: cond(s.conditions, "Succeeded"), history };
  ctx.out(
    render(ctx.output, data, () => {
      const now = ctx.now();
      const c = data.succeeded;
      const head = fields([
        ["Delivery", `${data.delivery} (subscription ${data.subscription ?? "-"}, ${data.eventType ?? "-"})`],
        ["Phase", `${data.phase}${c ? `: ${c.reason}${c.message ? `: ${oneLine(c.message, 120)}` : ""}` : ""}`],
        ["Attempts", `${data.attempts}${s.nextAttemptAt ? `, next in ${inFuture(s.nextAttemptAt, now)}` : ""}${s.replays ? `, ${s.replays} failed replays` : ""}`],
      ]);
      const rows = history.map((a) => [String(a.number) + (a.replay ? " (replay)" : ""), ago(a.startedAt, now), a.responseStatus ? String(a.responseStatus) : "-", a.reason ?? "-", `${a.durationMs}ms`, a.outcome, oneLine(a.error, 60)]);
      return head + "\n" + (rows.length ? table(["#", "AGE", "STATUS", "REASON", "DURATION", "OUTCOME", "ERROR"], rows) : "no attempts yet\n");
    }),
  );
  return EXIT.ok;
}

// ---- dlq -------------------------------------------------------------------------------

async function dlq(ctx: Ctx, sinceMs: number | undefined): Promise<number> {
  const selector = ["status.phase=DeadLettered", ...(ctx.flags.subscription ? [`spec.subscriptionRef.name=${ctx.flags.subscription}`] : [])].join(",");
  const now = ctx.now();
  const items = (await list<Del>(ctx, DELIVERIES, ctx.all ? undefined : ctx.namespace, { fieldSelector: selector }))
    .filter((d) => !ctx.flags.reason || d.status?.deadLetter?.reason === ctx.flags.reason)
    .filter((d) => sinceMs === undefined || now - Date.parse(d.status?.deadLetter?.at ?? d.status?.finishedAt ?? "") <= sinceMs)
    .sort((a, b) => Date.parse(b.status?.deadLetter?.at ?? "") - Date.parse(a.status?.deadLetter?.at ?? ""));
  const rows = items.map((d) => ({
    namespace: d.metadata.namespace!,
    name: d.metadata.name,
    subscription: d.spec?.subscriptionRef?.name ?? "",
    eventType: d.spec?.eventType ?? "",
    reason: d.status?.deadLetter?.reason ?? "",
    deadLetteredAt: d.status?.deadLetter?.at ?? "",
    attempts: d.status?.attempts ?? 0,
    lastStatus: d.status?.lastAttempt?.responseStatus ?? null,
    replays: d.status?.replays ?? 0,
    message: d.status?.deadLetter?.message ?? "",
  }));
  ctx.out(
    render(ctx.output, { items: rows }, () => {
      if (!rows.length) return `no dead letters${ctx.all ? "" : ` in namespace ${ctx.namespace}`}${ctx.flags.subscription ? ` for subscription ${ctx.flags.subscription}` : ""}${ctx.flags.reason ? ` with reason ${ctx.flags.reason}` : ""}${ctx.flags.since ? ` in the last ${ctx.flags.since}` : ""}\n`;
      const header = [...(ctx.all ? ["NAMESPACE"] : []), "NAME", "SUBSCRIPTION", "EVENT TYPE", "REASON", "AGE", "ATTEMPTS", "LAST STATUS", "REPLAYS", "MESSAGE"];
      return table(header, rows.map((r) => [...(ctx.all ? [r.namespace] : []), r.name, r.subscription, r.eventType, r.reason, ago(r.deadLetteredAt, now), String(r.attempts), r.lastStatus === null ? "-" : String(r.lastStatus), String(r.replays), oneLine(r.message, 60)]));
    }),
  );
  return EXIT.ok;
}

// ---- replay ----------------------------------------------------------------------------

async function annotate(ctx: Ctx, type: typeof SUBSCRIPTIONS, name: string, annotations: Record<string, string>): Promise<void> {
  await ctx.client.request({ method: "PATCH", path: objectPath(type, ctx.namespace, name), contentType: "application/merge-patch+json", body: { metadata: { annotations } } });
}

/** The operator's newest refusal (a ReplayRefused Warning Event) about `name` since `since`. */
async function refusal(ctx: Ctx, kind: string, name: string, since: number): Promise<string | undefined> {
  const e = (await recentEvents(ctx, kind, name, 20)).find((ev) => ev.type === "Warning" && ev.reason === "ReplayRefused" && Date.parse(ev.at) >= since - 2_000);
  return e ? `${e.reason}: ${e.message}` : undefined;
}

async function replay(ctx: Ctx, name: string, reason: string, timeoutMs: number): Promise<number> {
  const before = await get<Del>(ctx, DELIVERIES, ctx.namespace, name);
  // The API server's clock decides: status times are the operator's, the request time is ours.
  const requestedAt = ctx.now();
  await annotate(ctx, DELIVERIES, name, { [ANNOTATIONS.replay]: reason });
  if (!ctx.flags.wait) {
    ctx.err(`replay of ${ctx.namespace}/${name} requested (${before.status?.phase ?? "Pending"}); follow it with: kubectl hookline attempts ${name}\n`);
    ctx.out(render(ctx.output, { delivery: `${ctx.namespace}/${name}`, requested: true }, () => `whdel/${name} annotated ${ANNOTATIONS.replay}\n`));
    return EXIT.ok;
  }
  const d = await follow(
    timeoutMs,
    async () => {
      const cur = await get<Del>(ctx, DELIVERIES, ctx.namespace, name);
      return cur.metadata.annotations?.[ANNOTATIONS.replay] === undefined ? cur : undefined;
    },
    () => `timed out after ${age(timeoutMs)}: the operator has not handled the replay of ${name} (is it running? kubectl get whsub,whdel -n ${ctx.namespace})`,
  );
  const result = d.status?.lastReplay && d.status.lastReplay.reason === reason ? d.status.lastReplay.result ?? (d.status.phase === "Succeeded" ? "Succeeded" : "Failed") : undefined;
  if (!result) throw new Failed(`replay of ${name} refused: ${(await refusal(ctx, DELIVERY.kind, name, requestedAt)) ?? "see kubectl describe whdel " + name}`);
  const data = { delivery: `${ctx.namespace}/${name}`, result, phase: d.status?.phase, lastAttempt: d.status?.lastAttempt };
  const a = d.status?.lastAttempt;
  ctx.out(render(ctx.output, data, () => `replay of ${name}: ${result}${a ? ` (HTTP ${a.responseStatus ?? "-"}, ${a.reason ?? a.outcome}, ${a.durationMs}ms${a.error ? `: ${oneLine(a.error)}` : ""})` : ""}; phase ${d.status?.phase ?? "-"}\n`));
  return result === "Failed" ? EXIT.failed : EXIT.ok;
}

async function replaySubscription(ctx: Ctx, name: string, reason: string, concurrency: number | undefined, timeoutMs: number): Promise<number> {
  const before = await get<Sub>(ctx, SUBSCRIPTIONS, ctx.namespace, name);
  const previousId = before.status?.lastReplay?.requestedAt;
  const requestedAt = ctx.now();
  await annotate(ctx, SUBSCRIPTIONS, name, { [ANNOTATIONS.replayDeadLetters]: reason, ...(concurrency ? { [ANNOTATIONS.replayConcurrency]: String(concurrency) } : {}) });
  if (!ctx.flags.wait) {
    ctx.out(render(ctx.output, { subscription: `${ctx.namespace}/${name}`, requested: true }, () => `replay of the dead letters of whsub/${name} requested (${before.status?.deliveries?.deadLettered ?? 0} held); follow it with: kubectl hookline status ${name}\n`));
    return EXIT.ok;
  }
  const r = await follow(
    timeoutMs,
    async () => {
      const cur = await get<Sub>(ctx, SUBSCRIPTIONS, ctx.namespace, name);
      const lr = cur.status?.lastReplay;
      if (lr && lr.reason === reason && lr.requestedAt !== previousId && lr.finishedAt) return lr;
      if (cur.metadata.annotations?.[ANNOTATIONS.replayDeadLetters] === undefined && (!lr || lr.requestedAt === previousId)) {
        const why = await refusal(ctx, "WebhookSubscription", name, requestedAt);
        if (why) throw new Failed(`replay of the dead letters of ${name} refused: ${why}`);
      }
      return undefined;
    },
    () => `timed out after ${age(timeoutMs)} following the replay of ${name}'s dead letters: kubectl hookline status ${name}`,
  );
  ctx.out(render(ctx.output, { subscription: `${ctx.namespace}/${name}`, ...r }, () => `replay of ${name}'s dead letters finished: ${r.attempted} attempted, ${r.succeeded} succeeded, ${r.failed} failed, ${r.deduped} deduped\n`));
  return r.failed > 0 ? EXIT.failed : EXIT.ok;
}

// ---- reset -----------------------------------------------------------------------------

async function reset(ctx: Ctx, name: string, reason: string, timeoutMs: number): Promise<number> {
  const before = await get<Sub>(ctx, SUBSCRIPTIONS, ctx.namespace, name);
  const previous = before.status?.lastReset?.at;
  await annotate(ctx, SUBSCRIPTIONS, name, { [ANNOTATIONS.resetEndpoint]: reason });
  const r = await follow(
    timeoutMs,
    async () => {
      const cur = await get<Sub>(ctx, SUBSCRIPTIONS, ctx.namespace, name);
      const lr = cur.status?.lastReset;
      return lr && lr.reason === reason && lr.at !== previous ? { lastReset: lr, breaker: cur.status?.breaker?.state, health: cur.status?.health?.state } : undefined;
    },
    () => `timed out after ${age(timeoutMs)}: the operator has not reset ${name} (is it running? kubectl get events -n ${ctx.namespace})`,
  );
  ctx.out(render(ctx.output, { subscription: `${ctx.namespace}/${name}`, ...r }, () => `whsub/${name} reset: breaker ${r.breaker ?? "Closed"} (was ${r.lastReset.breaker}), health ${r.health ?? "Healthy"} (was ${r.lastReset.health})\n`));
  return EXIT.ok;
}

// ---- ping ------------------------------------------------------------------------------

async function ping(ctx: Ctx, sub: string, timeoutMs: number): Promise<number> {
  const s = await get<Sub>(ctx, SUBSCRIPTIONS, ctx.namespace, sub);
  const name = `ping-${sub.slice(0, 200)}-${randomBytes(4).toString("hex")}`;
  const sentAt = new Date(ctx.now()).toISOString();
  await ctx.client.request({
    method: "POST",
    path: collectionPath(DELIVERIES, ctx.namespace),
    body: {
      apiVersion: API_VERSION,
      kind: DELIVERY.kind,
      metadata: { name, namespace: ctx.namespace, labels: { [LABELS.subscription]: sub } },
      spec: { subscriptionRef: { name: sub }, eventType: PING_EVENT_TYPE, payload: { ping: true, subscription: sub, sentAt, from: "kubectl hookline ping" } },
    },
  });
  ctx.err(`ping ${name} sent to ${s.spec?.url ?? sub}, waiting for the answer...\n`);
  const d = await follow(
    timeoutMs,
    async () => {
      const cur = await get<Del>(ctx, DELIVERIES, ctx.namespace, name);
      return cur.status?.lastAttempt || ["Succeeded", "DeadLettered", "Discarded"].includes(cur.status?.phase ?? "") ? cur : undefined;
    },
    async () => {
      const cur = await get<Del>(ctx, DELIVERIES, ctx.namespace, name).catch(() => undefined);
      const c = cond(cur?.status?.conditions, "Succeeded");
      return `no answer within ${age(timeoutMs)}: ${c ? `${c.reason}: ${c.message ?? ""}` : "the operator has not picked it up (is it running?)"} (kubectl hookline attempts ${name})`;
    },
  );
  const a = d.status?.lastAttempt;
  const ok = d.status?.phase === "Succeeded";
  const data = { delivery: `${ctx.namespace}/${name}`, url: s.spec?.url, phase: d.status?.phase, ok, attempt: a, deadLetter: d.status?.deadLetter };
  ctx.out(
    render(ctx.output, data, () =>
      a ? `${ok ? "ok" : "failed"}: HTTP ${a.responseStatus ?? "-"} (${a.reason ?? a.outcome}) from ${s.spec?.url ?? "-"} in ${a.durationMs}ms${a.error ? `: ${oneLine(a.error, 200)}` : ""}\n`
      : `failed: ${d.status?.phase}: ${d.status?.deadLetter?.reason ?? d.status?.discard?.reason ?? ""} ${d.status?.deadLetter?.message ?? d.status?.discard?.message ?? ""}\n`,
    ),
  );
  if (!ok && d.status?.phase === "Retrying") {
    // A ping is one question, not an event to insist on: no retries against the endpoint.
    const deleted = await ctx.client.request({ method: "DELETE", path: objectPath(DELIVERIES, ctx.namespace, name) }).then(
      () => `${name} deleted`,
      (err: Error) => `could not delete ${name}: ${oneLine(err.message, 200)}; delete it with kubectl delete whdel ${name} -n ${ctx.namespace}`,
    );
    ctx.err(`the ping is not retried (${deleted}); the endpoint's history: kubectl hookline status ${sub}\n`);
  }
  return ok ? EXIT.ok : EXIT.failed;
}
