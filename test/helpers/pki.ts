// A throwaway certificate authority for tests, made with the openssl CLI: a CA, server
// certificates for 127.0.0.1 and client certificates, each a fresh P-256 key. Nothing is kept
// after `close()`.
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface Pem {
  /** The certificate (PEM). */
  cert: string;
  /** Its private key (PKCS#8 PEM). */
  key: string;
}

let serial = 1;

export class TestCa implements Pem {
  private constructor(
    private readonly dir: string,
    readonly name: string,
    readonly cert: string,
    readonly key: string,
  ) {}

  static async create(name = "Hookline Test CA"): Promise<TestCa> {
    const dir = await mkdtemp(join(tmpdir(), "hookline-pki-"));
    const [key, cert] = [join(dir, "ca.key"), join(dir, "ca.crt")];
    await openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", `/CN=${name}`, "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
    return new TestCa(dir, name, await readFile(cert, "utf8"), await readFile(key, "utf8"));
  }

  /** A certificate signed by this CA: `server` for 127.0.0.1 and localhost, or `client`. */
  async issue(cn: string, usage: "server" | "client"): Promise<Pem> {
    const id = `leaf-${serial++}`;
    const [key, csr, cert, ext] = ["key", "csr", "crt", "ext"].map((x) => join(this.dir, `${id}.${x}`)) as [string, string, string, string];
    await writeFile(ext, usage === "server" ? "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n" : "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n");
    await openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", csr, "-subj", `/CN=${cn}`]);
    await openssl(["x509", "-req", "-in", csr, "-CA", join(this.dir, "ca.crt"), "-CAkey", join(this.dir, "ca.key"), "-set_serial", String(Date.now() * 1000 + serial), "-days", "2", "-out", cert, "-extfile", ext]);
    return { cert: await readFile(cert, "utf8"), key: await readFile(key, "utf8") };
  }

  async close(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}

async function openssl(args: string[]): Promise<void> {
  try {
    await run("openssl", args, { timeout: 30_000 });
  } catch (err) {
    throw new Error(`openssl ${args[0]} failed: ${(err as { stderr?: string }).stderr ?? (err as Error).message}`);
  }
}

/** A kubernetes.io/tls Secret holding `pem`. */
export function tlsSecret(namespace: string, name: string, pem: Pem): unknown {
  return { apiVersion: "v1", kind: "Secret", metadata: { name, namespace }, type: "kubernetes.io/tls", stringData: { "tls.crt": pem.cert, "tls.key": pem.key } };
}
