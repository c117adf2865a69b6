// One attempt's HTTP request: the subscription's static headers, the fixed ones, and the
// signature headers of its scheme over this attempt's timestamp. The webhook id is the same on
// every attempt and replay; the timestamp is this attempt's.
import { signHmacSha256Hex, signStandardWebhooks } from "../../core/request/signing.js";
import type { Policy } from "../../core/attempt/policy.js";
import type { SendRequest } from "./sender.js";

/** What is sent: the webhook id and the JSON body {"id","type","timestamp","created_at","data"}. */
export interface RequestBody {
  id: string;
  /** The event's type (for the attempt's log line; the body carries it too). */
  type: string | undefined;
  body: string;
}

export interface RequestInput {
  message: RequestBody;
  policy: Policy;
  /** Signing keys, the current one first (empty: unsigned). */
  keys: Buffer[];
  userAgent: string;
  /** When this attempt starts, epoch ms (its webhook-timestamp). */
  startedAt: number;
  signal?: AbortSignal;
}

export function buildRequest({ message: { id, body }, policy, keys, userAgent, startedAt, signal }: RequestInput): SendRequest {
  const timestampSeconds = Math.floor(startedAt / 1000);
  const headers: Record<string, string> = {
    ...policy.headers,
    "content-type": "application/json",
    "user-agent": userAgent,
  };
  if (keys.length) {
    Object.assign(
      headers,
      policy.scheme === "StandardWebhooks" ? signStandardWebhooks({ id, timestampSeconds, body, secrets: keys }) : signHmacSha256Hex({ id, timestampSeconds, body, secret: keys[0]!, signedContent: policy.signedContent }),
    );
  } else if (policy.scheme === "HMACSHA256Hex") {
    Object.assign(headers, { "x-webhook-id": id, "x-webhook-timestamp": String(timestampSeconds) });
  } else {
    // Unsigned (scheme None): the Standard Webhooks names, without webhook-signature.
    Object.assign(headers, { "webhook-id": id, "webhook-timestamp": String(timestampSeconds) });
  }
  return { url: policy.url, headers, body, timeoutMs: policy.timeoutMs, ...(signal ? { signal } : {}) };
}
