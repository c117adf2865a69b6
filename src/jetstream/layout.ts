// Where stream mode's events are stored: one JetStream stream per namespace
// (docs/adr/0013-one-stream-per-namespace.md), so that JetStream itself enforces each
// namespace's quota, whoever publishes (the doors, or a producer writing to NATS directly).
// Pure: names, configurations and what to make of a stream found on the server.
//
//   stream     <prefix>_<namespace> (HOOKLINE_shop), metadata hookline.dev/namespace and
//              hookline.dev/installation (the installation that claims it: HOOKLINE_INSTALLATION)
//   subjects   hookline.<namespace>.>  (subjects.ts: the contract, unchanged)
//   limits     max_msgs, max_bytes: the namespace's quota, discard new (a full namespace refuses
//              its publishes; nothing stored is dropped); max_age: a backstop above the age at
//              which the operator dead-letters an event (Expired), never the way events end
//   and        interest retention, file storage, the duplicate window, max_msg_size
//
// Earlier versions kept every namespace in one stream named <prefix> (HOOKLINE) on hookline.>.
// Its subjects overlap every namespace's, so JetStream cannot hold both: legacyStreamPlan says
// what to do with one that is found.
import { DiscardPolicy, RetentionPolicy, StorageType, type StreamConfig } from "@nats-io/jetstream";
import { MAX_MESSAGE_BYTES } from "./message.js";
import { ALL_SUBJECTS, namespaceFilter, SubjectError } from "./subjects.js";

/** Metadata key of a namespace's stream: the namespace it holds. */
export const STREAM_NAMESPACE_METADATA = "hookline.dev/namespace";

/** Metadata key of a stream: the installation that claims it (HOOKLINE_INSTALLATION). Another installation refuses the stream and never deletes it. */
export const OWNER_METADATA = "hookline.dev/installation";

const NANOS_PER_MS = 1_000_000;
const DAY_MS = 86_400_000;
const NAMESPACE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** What Hookline decides about every namespace's stream. */
export interface LayoutSettings {
  /** The streams' prefix: HOOKLINE (HOOKLINE_<namespace>). Also the name of the one stream of earlier versions. */
  name: string;
  /** How long a Nats-Msg-Id is remembered (a publish of the same event id in this window is stored once). */
  duplicateWindowMs: number;
  /** Replicas in a NATS cluster (1..5). */
  replicas: number;
  /** Age at which the operator dead-letters an event not yet delivered (Expired). */
  maxAgeMs: number;
  /** Messages one namespace's stream holds at most (not yet acknowledged by every subscription). */
  namespaceMaxMessages: number;
  /** Bytes one namespace's stream holds at most. */
  namespaceMaxBytes: number;
  /** The installation that claims the streams (HOOKLINE_INSTALLATION; metadata OWNER_METADATA); undefined: no claim made or checked. */
  owner?: string;
}

/** Hookline's defaults (the operator's come from its environment, src/config/config.ts). */
export const DEFAULT_LAYOUT: LayoutSettings = {
  name: "HOOKLINE",
  duplicateWindowMs: 120_000,
  replicas: 1,
  maxAgeMs: 7 * DAY_MS,
  namespaceMaxMessages: 1_000_000,
  namespaceMaxBytes: 256 * 1024 * 1024,
};

/** The stream of `namespace`: `<prefix>_<namespace>` (a namespace never holds "_"). Throws SubjectError for a name that is not a namespace. */
export function namespaceStreamName(prefix: string, namespace: string): string {
  if (namespace.length > 63 || !NAMESPACE.test(namespace)) throw new SubjectError("namespace", `namespace ${JSON.stringify(namespace)} is not a namespace name (lowercase RFC 1123 label)`);
  return `${prefix}_${namespace}`;
}

/**
 * The stream's own max_age: the dead-letter age plus as much again (at least a day). The
 * operator dead-letters an event at `maxAgeMs`; JetStream drops it at this age only if no
 * replica ran in between (an outage longer than the margin), so it is a backstop, not a limit
 * anyone should reach.
 */
export function backstopAgeMs(maxAgeMs: number): number {
  return maxAgeMs + Math.max(maxAgeMs, DAY_MS);
}

/** The configuration of `namespace`'s stream. Pure. */
export function namespaceStreamConfig(settings: LayoutSettings, namespace: string): Partial<StreamConfig> & { name: string } {
  return {
    name: namespaceStreamName(settings.name, namespace),
    description: `Hookline stream mode: the events of namespace ${namespace} (docs/stream-mode.md)`,
    subjects: [namespaceFilter(namespace)],
    retention: RetentionPolicy.Interest,
    storage: StorageType.File,
    discard: DiscardPolicy.New,
    duplicate_window: settings.duplicateWindowMs * NANOS_PER_MS,
    max_msg_size: MAX_MESSAGE_BYTES,
    max_age: backstopAgeMs(settings.maxAgeMs) * NANOS_PER_MS,
    max_msgs: settings.namespaceMaxMessages,
    max_bytes: settings.namespaceMaxBytes,
    num_replicas: settings.replicas,
    metadata: { [STREAM_NAMESPACE_METADATA]: namespace, ...(settings.owner !== undefined ? { [OWNER_METADATA]: settings.owner } : {}) },
  };
}

/** Fields of a namespace's stream the operator keeps as configured (an update changes them). */
export const MUTABLE_STREAM_FIELDS = ["subjects", "duplicate_window", "max_msg_size", "max_age", "max_msgs", "max_bytes", "discard", "num_replicas"] as const;

/**
 * Which mutable fields of `have` differ from `wanted`; "metadata" also when `wanted` claims a
 * stream that no installation claimed yet (made by hand, or before installations claimed
 * streams). One claimed by another installation is refused before this (streamOwnerProblem). Pure.
 */
export function streamDifferences(have: Partial<StreamConfig>, wanted: Partial<StreamConfig>): string[] {
  const changed: string[] = MUTABLE_STREAM_FIELDS.filter((k) => JSON.stringify(have[k]) !== JSON.stringify(wanted[k]));
  const claim = wanted.metadata?.[OWNER_METADATA] !== undefined && have.metadata?.[OWNER_METADATA] === undefined;
  if (have.metadata?.[STREAM_NAMESPACE_METADATA] !== wanted.metadata?.[STREAM_NAMESPACE_METADATA] || claim) changed.push("metadata");
  return changed;
}

/** The installation a stream's metadata names; undefined when none claimed it. */
export const streamOwner = (stream: { config: Pick<StreamConfig, "metadata"> }): string | undefined => stream.config.metadata?.[OWNER_METADATA];

/**
 * Whether `installation` may use a stream claimed by `owner`: it claimed it, or nobody claimed
 * anything (no installation configured). A stream no installation claimed is claimed by the
 * next ensureStream, not used before. Pure.
 */
export const ownedBy = (owner: string | undefined, installation: string | undefined): boolean => installation === undefined || owner === installation;

/** Another installation claimed the stream: it must not be used, changed or deleted; undefined when it may. Pure. */
export function streamOwnerProblem(owner: string | undefined, installation: string | undefined): string | undefined {
  if (installation === undefined || owner === undefined || owner === installation) return undefined;
  return (
    `belongs to another Hookline installation, ${JSON.stringify(owner)} (this one is ${JSON.stringify(installation)}, HOOKLINE_INSTALLATION): ` +
    `two installations on one NATS account would take each other's events and delete each other's consumers and streams. Give each installation its own NATS account (docs/stream-mode.md); ` +
    `if ${JSON.stringify(owner)} is this installation under an earlier name, set HOOKLINE_INSTALLATION=${owner}`
  );
}

/** The namespace a stream holds, when it is one of Hookline's namespace streams of `prefix`. */
export function namespaceOfStream(prefix: string, stream: { config: Pick<StreamConfig, "name" | "metadata"> }): string | undefined {
  const ns = stream.config.metadata?.[STREAM_NAMESPACE_METADATA];
  return ns !== undefined && stream.config.name === `${prefix}_${ns}` ? ns : undefined;
}

/**
 * What to do with a stream of the prefix's own name found on the server: the one stream of
 * earlier versions takes hookline.>, which no namespace's stream may then take.
 *   none     no such stream, or one that does not take Hookline's subjects: nothing to do
 *   remove   it holds no message: nothing is lost by deleting it (with its consumers)
 *   refuse   it holds messages not yet delivered: Hookline neither deletes nor moves them
 */
export function legacyStreamPlan(stream: { config: Pick<StreamConfig, "subjects">; state: { messages: number } } | undefined): "none" | "remove" | "refuse" {
  if (!stream) return "none";
  const subjects = stream.config.subjects ?? [];
  if (!subjects.some((s) => s === ALL_SUBJECTS || s === ">" || s.startsWith("hookline."))) return "none";
  return stream.state.messages === 0 ? "remove" : "refuse";
}
