// What each NATS user of stream mode may do, as nats-server's `permissions` of a user: the one
// place that lists the subjects the operator uses and the ones a publisher of a namespace may
// use. The local nats-server (`hookline cluster up --nats`, the tests) is configured from it, and
// docs/stream-mode.md shows it for a NATS of one's own. Pure.
//
// Found by running the operator against a nats-server with these permissions (a subject
// missing is a "Permissions Violation" the client reports and the server logs):
//   operator   the namespaces' streams HOOKLINE_<namespace> (list, create, read, update, delete
//              when empty), the one stream of earlier versions (read, retire, delete when empty),
//              the consumers (list, read, create and update, delete, pull), acknowledgements of
//              their messages, the two key-value buckets (create, read by direct get, write, and
//              a watch of hookline-endpoints with its flow control), publishing events (the HTTP
//              door), replies on its own inbox prefix only (the messages it pulls arrive there:
//              no one else may read it). NATS wildcards match whole tokens only and a stream's
//              name is one token, so HOOKLINE_* cannot be written: the stream token is `*`, any
//              stream of the account (one account per installation: the account is the boundary).
//   publisher  publishing events of its namespaces, and replies (JetStream's acknowledgement
//              of each publish) on the default inbox. Nothing else: no stream, consumer,
//              bucket or acknowledgement subject, and no subscription to events. Its subjects go
//              to its namespaces' streams only, so it cannot reach another namespace's stream in
//              any way, its duplicate window included.
import { filterSubjects } from "./subjects.js";

/** The operator's replies (JetStream API answers, pulled messages) come on this prefix, which publishers cannot subscribe to. */
export const OPERATOR_INBOX_PREFIX = "_INBOX_hookline";

/** The key-value buckets of stream mode (transports/stream/attempt-log.ts, shared-endpoints.ts). */
export const KV_BUCKETS = { attempts: "hookline-attempts", endpoints: "hookline-endpoints" } as const;

/** A user's permissions as nats-server's config writes them: subjects it may publish to and subscribe to; nothing else. */
export interface NatsPermissions {
  publish: string[];
  subscribe: string[];
}

/** The subjects the operator publishes to and subscribes to (whatever the streams' prefix: the stream token is a wildcard). */
export function operatorPermissions(): NatsPermissions {
  const api = "$JS.API";
  const attempts = `KV_${KV_BUCKETS.attempts}`;
  const endpoints = `KV_${KV_BUCKETS.endpoints}`;
  return {
    publish: [
      // The HTTP publish door writes events of every namespace it serves.
      "hookline.>",
      // jetstreamManager() asks whether the account has JetStream.
      `${api}.INFO`,
      // The namespaces' streams are listed: usage and age, the sweep of unused ones, another installation's claim.
      `${api}.STREAM.LIST`,
      // Streams: each namespace's made, checked, kept at its settings and claimed (ensureStream), removed once
      // unused; the old single stream retired and removed when empty (prepare); the buckets' made and read.
      `${api}.STREAM.INFO.*`,
      `${api}.STREAM.CREATE.*`,
      `${api}.STREAM.UPDATE.*`,
      `${api}.STREAM.DELETE.*`,
      // One durable consumer per subscription on its namespace's stream: listed (sweep, lag), read, created and updated, deleted, pulled from.
      `${api}.CONSUMER.LIST.*`,
      `${api}.CONSUMER.INFO.*.*`,
      `${api}.CONSUMER.DURABLE.CREATE.*.*`,
      `${api}.CONSUMER.DELETE.*.*`,
      `${api}.CONSUMER.MSG.NEXT.*.*`,
      // ack, nak, working, term of the messages pulled.
      "$JS.ACK.*.>",
      // The buckets (made when missing and read as streams, above): read by direct get, written.
      `${api}.DIRECT.GET.${attempts}.>`,
      `$KV.${KV_BUCKETS.attempts}.>`,
      `${api}.DIRECT.GET.${endpoints}.>`,
      `$KV.${KV_BUCKETS.endpoints}.>`,
      // Every replica watches hookline-endpoints: an ordered consumer (several keys: no filter
      // in the subject; one key: name and filter in it), answers to its flow control, and when it
      // misses a message it is made again and the old one deleted (CONSUMER.DELETE, above).
      `${api}.CONSUMER.CREATE.${endpoints}`,
      `${api}.CONSUMER.CREATE.${endpoints}.>`,
      `$JS.FC.${endpoints}.>`,
    ],
    subscribe: [`${OPERATOR_INBOX_PREFIX}.>`],
  };
}

/** The inbox publishers' replies come on (nats.js, the nats CLI and most clients use it by default). */
export const PUBLISHER_INBOX = "_INBOX.>";

/**
 * A publisher of `namespaces`: their events only (`hookline.<namespace>.>`), and JetStream's
 * acknowledgements on the default inbox. Throws SubjectError for a name that is not a namespace
 * (a wildcard or a dot would give it more than its namespaces).
 */
export function publisherPermissions(namespaces: readonly string[]): NatsPermissions {
  if (namespaces.length === 0) throw new Error("a publisher needs at least one namespace");
  return { publish: [...new Set(namespaces)].sort().flatMap((ns) => filterSubjects(ns, undefined)), subscribe: [PUBLISHER_INBOX] };
}

/** Both, as a local nats-server's users are configured (cluster/nats-auth.ts NatsAuthPolicy). */
export const STREAM_AUTH_POLICY = { operator: operatorPermissions(), publisher: (namespaces: string[]) => publisherPermissions(namespaces) };
