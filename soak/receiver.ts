// A scripted webhook receiver: one child process of the soak (soak/run.ts), on 127.0.0.1. Each
// endpoint (path /e/<endpoint>/...) answers with the behaviour the parent set over IPC
// ({cmd:"set", endpoint, behaviour}); unknown endpoints answer 200. Every request is appended to
// the log file as one JSON line when its body is complete (webhook headers, body length, SHA-256,
// whether the body is valid UTF-8, the behaviour applied), and a second line when the response
// finished or the connection closed first. The file survives a restart of this process, which is
// one of the soak's faults. argv: <logFile> <port|0>. Exits when the parent goes away.
import { createHash } from "node:crypto";
import { appendFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Behaviour } from "./lib/behaviour.js";

const [logFile, portArg] = process.argv.slice(2);
if (!logFile) throw new Error("usage: receiver.ts LOGFILE PORT");
const behaviours = new Map<string, Behaviour>();
const open = new Set<ServerResponse>();
/** Requests a hang held that the settle phase answered (setAll ok): their finish says the status they got. */
const released = new WeakSet<ServerResponse>();
let seq = 0;

const log = (rec: Record<string, unknown>): void => appendFileSync(logFile, `${JSON.stringify(rec)}\n`);

function utf8Valid(buf: Buffer): boolean {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(buf);
    return true;
  } catch {
    return false;
  }
}

const header = (req: IncomingMessage, name: string): string | undefined => {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(", ") : v;
};

function answer(b: Behaviour, res: ServerResponse): void {
  switch (b.kind) {
    case "ok":
      res.writeHead(b.status ?? 200, { "content-type": "text/plain" }).end("ok");
      return;
    case "status":
      res.writeHead(b.status ?? 500, { "content-type": "text/plain" }).end("no");
      return;
    case "retryAfter": {
      const ra = b.retryAfterDate ? new Date(Date.now() + (b.retryAfterSeconds ?? 1) * 1000).toUTCString() : String(b.retryAfterSeconds ?? 1);
      res.writeHead(b.status ?? 503, { "retry-after": ra }).end("later");
      return;
    }
    case "slowHeaders":
      // Released by setAll (settle) or closed by the client meanwhile: nothing more to write
      // (a second writeHead throws, and an uncaught throw took the receiver down: seed 300496).
      setTimeout(() => {
        if (!res.headersSent && !res.destroyed) res.writeHead(200).end("slow");
      }, b.delayMs ?? 1000);
      return;
    case "trickle": {
      res.writeHead(200, { "content-type": "text/plain" });
      let n = 0;
      const t = setInterval(() => {
        if (res.destroyed || ++n > 10) {
          clearInterval(t);
          if (!res.destroyed) res.end();
          return;
        }
        res.write(".");
      }, Math.max(10, (b.delayMs ?? 1000) / 10));
      return;
    }
    case "huge": {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      const chunk = Buffer.alloc(64 * 1024, 120);
      let left = 5 * 1024 * 1024;
      const pump = (): void => {
        while (left > 0 && !res.destroyed) {
          left -= chunk.length;
          if (!res.write(chunk)) return void res.once("drain", pump);
        }
        if (!res.destroyed) res.end();
      };
      pump();
      return;
    }
    case "reset":
      res.socket?.destroy();
      return;
    case "hang":
      return; // never answered: the operator's timeout ends it
    case "redirect":
      res.writeHead(b.status ?? 302, { location: "http://127.0.0.1:1/elsewhere" }).end();
      return;
  }
}

/** The status this behaviour answers with; 0 when it answers none. */
function statusOf(b: Behaviour): number {
  if (b.kind === "ok") return b.status ?? 200;
  if (b.kind === "slowHeaders" || b.kind === "trickle" || b.kind === "huge") return 200;
  if (b.kind === "reset" || b.kind === "hang") return 0;
  return b.status;
}

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  const path = req.url ?? "/";
  const endpoint = /^\/e\/([^/]+)/.exec(path)?.[1] ?? "";
  const id = `${process.pid}-${++seq}`;
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks);
    const b = behaviours.get(endpoint) ?? { kind: "ok" };
    log({
      seq: id,
      t: Date.now(),
      path,
      endpoint,
      wid: header(req, "webhook-id") ?? header(req, "x-webhook-id"),
      wts: header(req, "webhook-timestamp") ?? header(req, "x-webhook-timestamp"),
      wsig: header(req, "webhook-signature"),
      xsig: header(req, "x-webhook-signature"),
      len: body.length,
      sha: createHash("sha256").update(body).digest("hex"),
      utf8: utf8Valid(body),
      // U+FFFD in a body: a multi-byte character was decoded in pieces somewhere on the way.
      fffd: body.toString("utf8").split("\ufffd").length - 1,
      kind: b.kind,
      status: statusOf(b),
    });
    open.add(res);
    let done = false;
    res.on("finish", () => {
      done = true;
      log({ seq: id, fin: "finish", t: Date.now(), ...(released.has(res) ? { status: 200 } : {}) });
    });
    res.on("close", () => {
      open.delete(res);
      if (!done) log({ seq: id, fin: "close", t: Date.now() });
    });
    answer(b, res);
  });
});
server.keepAliveTimeout = 5_000;

process.on("message", (m: { cmd: string; endpoint?: string; behaviour?: Behaviour; id?: number }) => {
  if (m.cmd === "set" && m.endpoint && m.behaviour) behaviours.set(m.endpoint, m.behaviour);
  if (m.cmd === "setAll" && m.behaviour) for (const k of behaviours.keys()) behaviours.set(k, m.behaviour);
  if (m.cmd === "setAll" && m.behaviour?.kind === "ok") {
    for (const r of open) {
      if (r.headersSent) continue;
      released.add(r);
      r.writeHead(200).end("released");
    }
  }
  process.send?.({ id: m.id, ok: true });
});
process.on("disconnect", () => process.exit(0));

server.listen(Number(portArg ?? 0), "127.0.0.1", () => {
  process.send?.({ ready: true, port: (server.address() as AddressInfo).port });
});
