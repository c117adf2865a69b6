// The benchmark's webhook receiver, a separate process on 127.0.0.1 (started by run.ts with an
// IPC channel). It answers 200 at once with keep-alive, except under /hang/ where it never
// answers (the sender's timeout ends those requests). It records the arrival time of every
// webhook id (first arrival and how many times it came) and answers IPC requests:
//   {cmd:"arrivals", prefix}  -> {arrivals: [[id, firstArrivalMs, count], ...]}
//   {cmd:"count", prefix}     -> {count} (distinct ids under prefix; nothing copied, so a poll
//                                does not hold up the requests arriving meanwhile)
//   {cmd:"stats"}             -> {ok, hang, hangingOpen, ceiling, other, eventLoopDelayMs: {p99, max}}
//                                (the delay since the previous stats call)
//   {cmd:"release", prefix?}  -> answers every hanging request under prefix (default /hang/) with
//                                200, and answers there at once from then on
// It exits when its parent goes away (IPC disconnect).
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { now } from "./lib/util.js";

// Its own event-loop delay: a stall here delays the recorded arrival of every request meanwhile.
const loopDelay = monitorEventLoopDelay({ resolution: 10 });
loopDelay.enable();
const arrivals = new Map<string, { at: number; count: number }>();
const hanging = new Set<ServerResponse>();
const counts = { ok: 0, hang: 0, ceiling: 0, other: 0 };
/** Paths under these prefixes (after {cmd:"release"}) answer at once even under /hang/. */
const released: string[] = [];

const server = createServer((req, res) => {
  const at = now();
  const url = req.url ?? "/";
  if (url.startsWith("/hang/") && !released.some((p) => url.startsWith(p))) {
    counts.hang++;
    hanging.add(res);
    res.on("close", () => hanging.delete(res));
    req.resume();
    return;
  }
  if (url.startsWith("/ceiling/")) counts.ceiling++;
  else {
    const id = req.headers["webhook-id"];
    if (typeof id === "string") {
      counts.ok++;
      const seen = arrivals.get(id);
      if (seen) seen.count++;
      else arrivals.set(id, { at, count: 1 });
    } else counts.other++;
  }
  req.resume();
  req.on("end", () => {
    res.writeHead(200, { "content-length": "0" });
    res.end();
  });
});
server.keepAliveTimeout = 65_000;
server.headersTimeout = 70_000;

type Message = { cmd: "arrivals"; prefix: string } | { cmd: "count"; prefix: string } | { cmd: "stats" } | { cmd: "release"; prefix?: string };

process.on("message", (msg: Message & { id: number }) => {
  const reply = (body: object) => process.send?.({ id: msg.id, ...body });
  switch (msg.cmd) {
    case "arrivals": {
      const out: Array<[string, number, number]> = [];
      for (const [id, a] of arrivals) if (id.startsWith(msg.prefix)) out.push([id, a.at, a.count]);
      reply({ arrivals: out });
      break;
    }
    case "count": {
      let count = 0;
      for (const id of arrivals.keys()) if (id.startsWith(msg.prefix)) count++;
      reply({ count });
      break;
    }
    case "stats":
      reply({ ...counts, hangingOpen: hanging.size, eventLoopDelayMs: { p99: loopDelay.percentile(99) / 1e6, max: loopDelay.max / 1e6 } });
      // Each stats call starts a new window for the delay.
      loopDelay.reset();
      break;
    case "release": {
      const prefix = msg.prefix ?? "/hang/";
      released.push(prefix);
      for (const res of hanging) {
        if (!(res.req.url ?? "").startsWith(prefix)) continue;
        if (!res.destroyed) res.writeHead(200, { "content-length": "0" }).end();
        hanging.delete(res);
      }
      reply({ released: true });
      break;
    }
  }
});
process.on("disconnect", () => process.exit(0));

server.listen(0, "127.0.0.1", () => {
  process.send?.({ ready: true, port: (server.address() as AddressInfo).port, pid: process.pid });
});
