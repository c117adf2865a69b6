// A real HTTP CONNECT proxy on 127.0.0.1 for tests: it records each CONNECT target (the
// authority the client asked for), optionally demands Proxy-Authorization, and pipes bytes
// between the client and the target. Anything but CONNECT is answered 405.
import { createServer, type IncomingMessage, type Server } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";

export interface ConnectRecord {
  /** What came after CONNECT, e.g. "127.0.0.1:8443". */
  authority: string;
  proxyAuthorization: string | undefined;
  answered: number;
}

export class ConnectProxy {
  readonly connects: ConnectRecord[] = [];
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  /** `requireAuth`: the Proxy-Authorization value to demand (others get 407). */
  static async start(opts: { requireAuth?: string } = {}): Promise<ConnectProxy> {
    const server = createServer((_req, res) => res.writeHead(405).end());
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const self = new ConnectProxy(server, (server.address() as AddressInfo).port);
    server.on("connection", (s: Socket) => {
      self.sockets.add(s);
      s.on("close", () => self.sockets.delete(s));
    });
    server.on("connect", (req: IncomingMessage, client: Socket, head: Buffer) => self.tunnel(req, client, head, opts.requireAuth));
    return self;
  }

  url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  private tunnel(req: IncomingMessage, client: Socket, head: Buffer, requireAuth: string | undefined): void {
    const authority = req.url ?? "";
    const record: ConnectRecord = { authority, proxyAuthorization: req.headers["proxy-authorization"], answered: 0 };
    this.connects.push(record);
    client.on("error", () => undefined);
    if (requireAuth !== undefined && record.proxyAuthorization !== requireAuth) {
      record.answered = 407;
      client.end("HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=test\r\n\r\n");
      return;
    }
    const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(authority);
    if (!m) {
      record.answered = 400;
      client.end("HTTP/1.1 400 Bad Request\r\n\r\n");
      return;
    }
    const upstream = connect(Number(m[2]), m[1], () => {
      record.answered = 200;
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    this.sockets.add(upstream);
    upstream.on("close", () => this.sockets.delete(upstream));
    upstream.on("error", () => {
      if (!record.answered) {
        record.answered = 502;
        client.end("HTTP/1.1 502 Bad Gateway\r\n\r\n");
      } else client.destroy();
    });
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
