import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { apiserverReadyOnce } from "./control-plane.js";

describe("apiserverReadyOnce", () => {
  const LEAF = "-----BEGIN CERTIFICATE-----\nleaf\n-----END CERTIFICATE-----\n";
  const CA = "-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n";
  /** Like TLS against the real server: it verifies only with the CA in the bundle. */
  const probe = (ca: Buffer): Promise<number> => (ca.toString().includes(CA) ? Promise.resolve(200) : Promise.reject(new Error("self-signed certificate in certificate chain")));

  it("reads the CA again on every try: a file read while kube-apiserver was writing it (the leaf alone) does not fail the tries after it", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "hookline-ca-")), "apiserver.crt");
    expect(await apiserverReadyOnce(file, probe)).toBe(false); // not written yet
    writeFileSync(file, LEAF);
    await expect(apiserverReadyOnce(file, probe)).rejects.toThrow("self-signed certificate in certificate chain");
    writeFileSync(file, LEAF + CA);
    expect(await apiserverReadyOnce(file, probe)).toBe(true);
  });

  it("is not ready while /readyz answers anything but 200", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "hookline-ca-")), "apiserver.crt");
    writeFileSync(file, LEAF + CA);
    expect(await apiserverReadyOnce(file, () => Promise.resolve(500))).toBe(false);
  });
});
