// A private nats-server with JetStream for one test file (stream mode), from the project's own
// build (hack/build-nats.sh: Go module proxy, cached; built by the global setup). It is killed with the test worker even if
// that dies by SIGKILL (the reaper), and can be stopped, killed and restarted on the same port
// with the same store, so a test can take JetStream away mid-test and bring it back.
//
// It authenticates, as stream mode requires (docs/security.md): the operator's user with the
// permissions of src/jetstream/permissions.ts (`url` carries its credentials: the operator's
// HOOKLINE_NATS_URL), publishers made per namespace (`publisher`), and an admin who may do
// anything, for what a test sets up or looks at that the operator may not. `{ auth: false }`:
// an open server, as nats-server runs by default.
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OPERATOR_USER } from "../../src/cluster/nats-auth.js";
import { LocalNatsServer, natsPaths, type LocalNatsOptions } from "../../src/cluster/nats.js";
import { StreamConnection, type ConnectStreamOptions } from "../../src/jetstream/jetstream.js";
import { OPERATOR_INBOX_PREFIX, STREAM_AUTH_POLICY } from "../../src/jetstream/permissions.js";
import { testTools } from "./tools.js";

/** The nats-server binary the global setup built. */
export function natsServerBinary(): Promise<string> {
  return Promise.resolve(testTools().natsServer);
}

export interface TestNats {
  server: LocalNatsServer;
  /** The operator's URL, with its credentials (the plain address without authentication); the same across restarts. */
  url: string;
  /** nats://127.0.0.1:PORT (tls:// with TLS), no credentials. */
  address: string;
  /** An admin's URL (may do anything in the account); the plain address without authentication. */
  adminUrl: string;
  /** The URL of a publisher of `namespaces` (made when missing: the server reloads its config). */
  publisherUrl(...namespaces: string[]): Promise<string>;
  /** What nats-server refused the operator's user so far ("Publish Violation - Subject ..." lines of its log). */
  operatorViolations(): string[];
  /** Stops it and removes its directory; fails when the operator's user was refused anything (its permissions miss a subject stream mode uses). */
  close(): Promise<void>;
}

export async function startNats(name = "test", opts: { auth?: boolean; tls?: LocalNatsOptions["tls"] } = {}): Promise<TestNats> {
  const dir = await mkdtemp(join(tmpdir(), `hookline-nats-${name}-`));
  const auth = opts.auth ?? true;
  const server = await LocalNatsServer.start({ dir, binary: await natsServerBinary(), ...(auth ? { auth: { ...STREAM_AUTH_POLICY, admin: true } } : {}), ...(opts.tls ? { tls: opts.tls } : {}) });
  const operatorViolations = () => {
    let log = "";
    try {
      log = readFileSync(natsPaths(dir).log, "utf8");
    } catch {
      return [];
    }
    return log.split("\n").filter((l) => l.includes(`/user:${OPERATOR_USER}"`) && / Violation /.test(l));
  };
  return {
    server,
    url: server.operatorUrl,
    address: server.url,
    adminUrl: server.adminUrl,
    publisherUrl: async (...namespaces) => (await server.publisher(namespaces)).url,
    operatorViolations,
    close: async () => {
      await server.close();
      const refused = operatorViolations();
      await rm(dir, { recursive: true, force: true });
      if (refused.length) throw new Error(`nats-server refused the operator's user ${refused.length} time(s): its permissions (src/jetstream/permissions.ts) miss what stream mode uses:\n${refused.slice(0, 10).join("\n")}`);
    },
  };
}

/**
 * A StreamConnection to `url` for a test (source "test"), with its replies on the operator's
 * inbox prefix (the operator's user may subscribe to no other): give a publisher's URL
 * `inboxPrefix: "_INBOX"`.
 */
export function connectStream(url: string, opts: Partial<ConnectStreamOptions> = {}): Promise<StreamConnection> {
  return StreamConnection.connect({ url, source: "test", name: "hookline test", inboxPrefix: OPERATOR_INBOX_PREFIX, ...opts });
}
