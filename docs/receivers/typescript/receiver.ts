// A Hookline receiver in TypeScript with the Standard Webhooks library (npm: standardwebhooks).
// Run: WEBHOOK_SECRET=whsec_... PORT=8000 npx tsx receiver.ts
import { createServer } from "node:http";
import { Webhook, WebhookVerificationError } from "standardwebhooks";

// The same value as in the subscription's Secret (whsec_<base64>). While a subscription rotates
// (secretRef.previousKey), requests carry two signatures and either secret verifies: deploy the
// new secret here first, then switch the Secret's keys.
const webhook = new Webhook(process.env.WEBHOOK_SECRET!);

// Hookline sends each event at least once: the same webhook-id on every retry and replay.
// Remember the ids you processed (a database unique key in production; here, memory for a day).
const seen = new Map<string, number>();
const DAY_MS = 24 * 60 * 60 * 1000;

createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    // Verify the raw bytes as received: re-serialized JSON would not match the signature.
    const body = Buffer.concat(chunks).toString("utf8");
    let event: { id: string; type: string; timestamp: string; data: unknown };
    try {
      // Checks the signature and that webhook-timestamp is within 5 minutes of now.
      event = webhook.verify(body, req.headers as Record<string, string>) as typeof event;
    } catch (err) {
      // 401 when unsigned, 403 when signed wrong or too long ago. Any 4xx but 408, 410 and 429
      // dead-letters at once (PermanentFailure): fix the secret, then replay.
      const unsigned = req.headers["webhook-signature"] === undefined;
      res.writeHead(!(err instanceof WebhookVerificationError) ? 400 : unsigned ? 401 : 403).end();
      console.log(JSON.stringify({ rejected: (err as Error).message }));
      return;
    }
    const id = req.headers["webhook-id"] as string;
    const now = Date.now();
    for (const [k, at] of seen) if (now - at > DAY_MS) seen.delete(k);
    if (seen.has(id)) {
      res.writeHead(200).end(); // a duplicate: already processed, acknowledge it again
      console.log(JSON.stringify({ duplicate: id }));
      return;
    }
    seen.set(id, now);
    // Answer 2xx quickly and do slow work afterwards: an attempt times out after 10 s by default.
    res.writeHead(204).end();
    console.log(JSON.stringify({ received: id, type: event.type, data: event.data }));
  });
}).listen(Number(process.env.PORT ?? 8000), "127.0.0.1", () => console.log(JSON.stringify({ listening: true })));
