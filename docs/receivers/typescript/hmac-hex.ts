// A receiver for subscriptions with signature.scheme HMACSHA256Hex, with node:crypto only:
// x-webhook-signature is sha256=<hex HMAC-SHA256 of the raw body>. The key is the Secret's value
// as UTF-8 bytes (a whsec_<base64> value: its decoded bytes).
// Run: WEBHOOK_SECRET=... PORT=8000 npx tsx hmac-hex.ts
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";

const secret = process.env.WEBHOOK_SECRET!;
const key = secret.startsWith("whsec_") ? Buffer.from(secret.slice("whsec_".length), "base64") : Buffer.from(secret, "utf8");
const TOLERANCE_S = 5 * 60;
const seen = new Set<string>(); // processed x-webhook-id values (a database in production)

function valid(body: Buffer, signature: string | undefined, timestamp: string | undefined): boolean {
  // The body is signed, the timestamp is not: it still bounds how old a request may be.
  if (!timestamp || Math.abs(Date.now() / 1000 - Number(timestamp)) > TOLERANCE_S) return false;
  const expected = Buffer.from(`sha256=${createHmac("sha256", key).update(body).digest("hex")}`);
  const given = Buffer.from(signature ?? "");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks);
    if (!valid(body, req.headers["x-webhook-signature"] as string | undefined, req.headers["x-webhook-timestamp"] as string | undefined)) {
      res.writeHead(401).end();
      console.log(JSON.stringify({ rejected: "bad signature or timestamp" }));
      return;
    }
    const id = req.headers["x-webhook-id"] as string;
    if (seen.has(id)) {
      res.writeHead(200).end();
      console.log(JSON.stringify({ duplicate: id }));
      return;
    }
    seen.add(id);
    const event = JSON.parse(body.toString("utf8")) as { type: string; data: unknown };
    res.writeHead(204).end();
    console.log(JSON.stringify({ received: id, type: event.type, data: event.data }));
  });
}).listen(Number(process.env.PORT ?? 8000), "127.0.0.1", () => console.log(JSON.stringify({ listening: true })));
