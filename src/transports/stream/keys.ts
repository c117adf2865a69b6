// The work keys of stream mode. A stream message held or attempted by this replica has a key
// like a delivery's ("namespace/..."), so the endpoint registry parks, wakes and shares the
// operator-wide request slots between both modes by namespace; the part after the slash holds a
// ':' (never in a Kubernetes name), so it cannot be taken for a WebhookDelivery's key.

const MARK = "stream:";

/** The key of message `seq` of consumer `consumer` (in `namespace`). */
export function streamKey(namespace: string, consumer: string, seq: number): string {
  return `${namespace}/${MARK}${consumer}:${seq}`;
}

/** The consumer and sequence of a stream key; undefined for any other key (a delivery's). */
export function parseStreamKey(key: string): { consumer: string; seq: number } | undefined {
  const slash = key.indexOf("/");
  if (slash < 0 || !key.startsWith(MARK, slash + 1)) return undefined;
  const rest = key.slice(slash + 1 + MARK.length);
  const colon = rest.lastIndexOf(":");
  const seq = Number(rest.slice(colon + 1));
  if (colon <= 0 || !Number.isSafeInteger(seq)) return undefined;
  return { consumer: rest.slice(0, colon), seq };
}
