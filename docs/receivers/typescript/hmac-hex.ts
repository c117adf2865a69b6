// A receiver for subscriptions with signature.scheme HMACSHA256Hex, with node:crypto only:
// x-webhook-signature is sha256=<hex HMAC-SHA256 of "<x-webhook-timestamp>.<raw body>">. The key
// is the Secret's value as UTF-8 bytes (a whsec_<base64> value: its decoded bytes).
// Run: WEBHOOK_SECRET=... PORT=8000 npx tsx hmac-hex.ts
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingHttpHeaders } from "node:http";

const TOLERANCE_S = 5 * 60;

const keyOf = (secret: string) => (secret.startsWith("whsec_") ? Buffer.from(secret.slice("whsec_".length).trim(), "base64") : Buffer.from(secret, "utf8"));

/**
 * The helper: true when the request was signed by Hookline with one of `secrets` less than
 * TOLERANCE_S ago. List the old and the new secret while you rotate (Hookline signs
 * HMACSHA256Hex with the current one only).
 */
export function verifyHooklineHex(body: Buffer, headers: IncomingHttpHeaders, secrets: string[], nowSeconds = Date.now() / 1000): boolean {
  const timestamp = headers["x-webhook-timestamp"];
  const signature = headers["x-webhook-signature"];
  if (typeof timestamp !== "string" || typeof signature !== "string" || !/^\d+$/.test(timestamp)) return false;
  // The timestamp is signed: an old request (captured, then sent again) is refused.
  if (Math.abs(nowSeconds - Number(timestamp)) > TOLERANCE_S) return false;
  const given = Buffer.from(signature);
  return secrets.some((secret) => {
    const mac = createHmac("sha256", keyOf(secret)).update(`${timestamp}.`).update(body).digest("hex");
    const expected = Buffer.from(`sha256=${mac}`);
    // Constant time: how much of a guess matches must not show in the time the answer takes.
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

const secrets = [process.env.WEBHOOK_SECRET!, ...(process.env.WEBHOOK_PREVIOUS_SECRET ? [process.env.WEBHOOK_PREVIOUS_SECRET] : [])];
const seen = new Set<string>(); // processed x-webhook-id values (a database in production)

createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    // Verify the raw bytes as received: re-serialized JSON would not match the signature.
    const body = Buffer.concat(chunks);
    // 401 when unsigned, 403 when signed wrong or too long ago. Either (any 4xx but 408, 410,
    // 429) makes Hookline dead-letter it at once (PermanentFailure): fix the secret, then replay.
    if (req.headers["x-webhook-signature"] === undefined || req.headers["x-webhook-timestamp"] === undefined) {
      res.writeHead(401).end();
      console.log(JSON.stringify({ rejected: "no signature or timestamp" }));
      return;
    }
    if (!verifyHooklineHex(body, req.headers, secrets)) {
      res.writeHead(403).end();
      console.log(JSON.stringify({ rejected: "bad signature or timestamp" }));
      return;
    }
    const id = req.headers["x-webhook-id"] as string;
    if (seen.has(id)) {
      res.writeHead(200).end(); // a duplicate: already processed, acknowledge it again
      console.log(JSON.stringify({ duplicate: id }));
      return;
    }
    seen.add(id);
    const event = JSON.parse(body.toString("utf8")) as { type: string; data: unknown };
    res.writeHead(204).end();
    console.log(JSON.stringify({ received: id, type: event.type, data: event.data }));
  });
}).listen(Number(process.env.PORT ?? 8000), "127.0.0.1", () => console.log(JSON.stringify({ listening: true })));
