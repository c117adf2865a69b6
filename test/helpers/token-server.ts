// A real OAuth2 token endpoint on 127.0.0.1 for tests (client credentials grant, RFC 6749
// section 4.4): it checks the client id and secret (HTTP Basic or form), issues tokens
// `tok-<n>-<random>` with a chosen lifetime, records each request, and can be scripted to fail
// or hang. `valid(token)` tells a receiver whether a token was issued and not revoked.
import { randomBytes } from "node:crypto";
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

export interface TokenRequest {
  at: number;
  form: Record<string, string>;
  /** Client credentials as sent, and how. */
  clientId: string | undefined;
  clientSecret: string | undefined;
  via: "basic" | "form" | "none";
  contentType: string | undefined;
  issued?: string;
}

export class TokenServer {
  readonly requests: TokenRequest[] = [];
  private readonly issued = new Map<string, number>(); // token -> expiry (ms)
  private readonly revoked = new Set<string>();
  private readonly sockets = new Set<Socket>();
  /** expires_in of the next tokens (seconds); undefined: none sent. */
  expiresIn: number | undefined = 3600;
  /** Overrides the answer: a status (with an OAuth2 error body) or "hang". */
  fail: { status: number; error?: string } | "hang" | undefined;
  /** Overrides the answer with exactly this (after the request is recorded). */
  raw: { status: number; body: string } | undefined;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly client: { id: string; secret: string },
  ) {}

  static async start(client: { id: string; secret: string }): Promise<TokenServer> {
    const holder: { self?: TokenServer } = {};
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => holder.self!.handle(req.headers.authorization, req.headers["content-type"], Buffer.concat(chunks).toString("utf8"), res));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const self = new TokenServer(server, (server.address() as AddressInfo).port, client);
    holder.self = self;
    server.on("connection", (s: Socket) => {
      self.sockets.add(s);
      s.on("close", () => self.sockets.delete(s));
    });
    return self;
  }

  url(): string {
    return `http://127.0.0.1:${this.port}/oauth/token`;
  }

  /** Whether `authorization` carries a token this server issued, not expired, not revoked. */
  valid(authorization: string | string[] | undefined): boolean {
    const token = typeof authorization === "string" && authorization.startsWith("Bearer ") ? authorization.slice(7) : undefined;
    const exp = token ? this.issued.get(token) : undefined;
    return token !== undefined && exp !== undefined && Date.now() < exp && !this.revoked.has(token);
  }

  revoke(token: string): void {
    this.revoked.add(token);
  }

  get tokens(): string[] {
    return this.requests.map((r) => r.issued).filter((t): t is string => !!t);
  }

  private handle(authorization: string | undefined, contentType: string | undefined, body: string, res: ServerResponse): void {
    const form = Object.fromEntries(new URLSearchParams(body));
    let clientId: string | undefined;
    let clientSecret: string | undefined;
    let via: TokenRequest["via"] = "none";
    if (authorization?.startsWith("Basic ")) {
      const [id, secret] = Buffer.from(authorization.slice(6), "base64").toString("utf8").split(":") as [string, string | undefined];
      clientId = decodeURIComponent(id.replace(/\+/g, " "));
      clientSecret = secret === undefined ? undefined : decodeURIComponent(secret.replace(/\+/g, " "));
      via = "basic";
    } else if (form.client_id !== undefined) {
      clientId = form.client_id;
      clientSecret = form.client_secret;
      via = "form";
    }
    const rec: TokenRequest = { at: Date.now(), form, clientId, clientSecret, via, contentType };
    this.requests.push(rec);
    const json = (status: number, value: unknown): void => {
      res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(value));
    };
    if (this.fail === "hang") return;
    if (this.raw) {
      res.writeHead(this.raw.status, { "content-type": "application/json" }).end(this.raw.body);
      return;
    }
    if (this.fail) return json(this.fail.status, { error: this.fail.error ?? "server_error", error_description: `refused: ${clientSecret ?? ""}` });
    if (form.grant_type !== "client_credentials") return json(400, { error: "unsupported_grant_type" });
    if (clientId !== this.client.id || clientSecret !== this.client.secret) return json(401, { error: "invalid_client" });
    const token = `tok-${this.requests.length}-${randomBytes(6).toString("hex")}`;
    rec.issued = token;
    this.issued.set(token, Date.now() + (this.expiresIn ?? 3600) * 1000);
    json(200, { access_token: token, token_type: "Bearer", ...(this.expiresIn !== undefined ? { expires_in: this.expiresIn } : {}) });
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
