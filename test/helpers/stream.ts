// Stream mode from a test's side: publish events to the real nats-server as a producer would
// (the library's stream path), and look at the operator's JetStream consumers (on each
// namespace's stream, HOOKLINE_<namespace>).
import type { JetStreamManager } from "@nats-io/jetstream";
import { publishToStream, type StreamPublishResult } from "../../src/publish/stream.js";
import { listConsumers, type HooklineConsumer } from "../../src/jetstream/consumers.js";
import { STREAM_NAME, type StreamConnection } from "../../src/jetstream/jetstream.js";
import { namespaceStreamName } from "../../src/jetstream/layout.js";
import { waitFor } from "./cluster.js";

/** Publishes one event (validated like every door) and waits for JetStream's acknowledgement. */
export function publishEvent(conn: StreamConnection, namespace: string, type: string, id: string, data: unknown): Promise<StreamPublishResult> {
  return publishToStream(conn, { namespace, type, id, data });
}

/** The stream of a namespace (the default prefix). */
export const streamOf = (namespace: string): string => namespaceStreamName(STREAM_NAME, namespace);

/** The Hookline consumers of a namespace's stream; none while it has no stream. */
export async function consumersOf(jsm: JetStreamManager, namespace: string): Promise<HooklineConsumer[]> {
  try {
    return await listConsumers(jsm, streamOf(namespace));
  } catch (err) {
    if ((err as { code?: number }).code === 10059) return [];
    throw err;
  }
}

/** The operator's consumer of a subscription, once the leader made it (events published before would not reach it). */
export async function waitForConsumer(jsm: JetStreamManager, namespace: string, name: string, timeoutMs = 30_000): Promise<HooklineConsumer> {
  return waitFor(async () => (await consumersOf(jsm, namespace)).find((c) => c.name === name), { description: `stream consumer of ${namespace}/${name}`, timeoutMs });
}

/** Waits until the subscription's consumer holds nothing: every message acknowledged (none pending, none out). */
export async function waitForDrained(jsm: JetStreamManager, namespace: string, name: string, timeoutMs = 30_000): Promise<void> {
  await waitFor(
    async () => {
      const c = (await consumersOf(jsm, namespace)).find((x) => x.name === name);
      return c !== undefined && c.pending === 0 && c.ackPending === 0;
    },
    { description: `every message of ${namespace}/${name} acknowledged`, timeoutMs },
  );
}

/** The bytes of `data` in a webhook body {"id","type","timestamp","data":...}. */
export function dataBytes(body: Buffer): Buffer {
  const at = body.indexOf(Buffer.from(',"data":'));
  return body.subarray(at + ',"data":'.length, body.length - 1);
}
