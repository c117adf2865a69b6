// A private nats-server with JetStream for one test file (stream mode), from the project's own
// build (hack/build-nats.sh: Go module proxy, cached; built by the global setup). It is killed with the test worker even if
// that dies by SIGKILL (the reaper), and can be stopped, killed and restarted on the same port
// with the same store, so a test can take JetStream away mid-test and bring it back.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LocalNatsServer } from "../../src/cluster/nats.js";
import { StreamConnection, type ConnectStreamOptions } from "../../src/stream/jetstream.js";
import { testTools } from "./tools.js";

/** The nats-server binary the global setup built. */
export function natsServerBinary(): Promise<string> {
  return Promise.resolve(testTools().natsServer);
}

export interface TestNats {
  server: LocalNatsServer;
  /** nats://127.0.0.1:PORT, the same across restarts. */
  url: string;
  /** Stops it and removes its directory. */
  close(): Promise<void>;
}

export async function startNats(name = "test"): Promise<TestNats> {
  const dir = await mkdtemp(join(tmpdir(), `hookline-nats-${name}-`));
  const server = await LocalNatsServer.start({ dir, binary: await natsServerBinary() });
  return {
    server,
    url: server.url,
    close: async () => {
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A StreamConnection to `url` for a test (source "test"). */
export function connectStream(url: string, opts: Partial<ConnectStreamOptions> = {}): Promise<StreamConnection> {
  return StreamConnection.connect({ url, source: "test", name: "hookline test", ...opts });
}
