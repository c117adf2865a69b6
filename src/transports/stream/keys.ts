// The work keys of stream mode. A stream message held or attempted by this replica has a key
// like a delivery's ("namespace/..."), so the endpoint registry parks and shares the
// operator-wide request slots between both modes by namespace; the part after the slash holds a
// ':' (never in a Kubernetes name), so it can never be a WebhookDelivery's key. Nothing routes
// by a key's shape: a parked key carries the function that wakes it.

const MARK = "stream:";

/** The key of message `seq` of consumer `consumer` (in `namespace`). */
export function streamKey(namespace: string, consumer: string, seq: number): string {
  return `${namespace}/${MARK}${consumer}:${seq}`;
}
