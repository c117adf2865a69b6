// The opening most integration suites share: a namespace of their own, a real operator watching
// it, and the receivers the tests start; all of it torn down after the suite. Call it at the top
// of a describe block; read `ns` and `op` inside the tests (they exist once beforeAll ran).
import { afterAll, beforeAll } from "vitest";
import { createNamespace, deleteNamespace } from "./cluster.js";
import { startOperator, type TestOperator } from "./operator.js";
import { Receiver, type Script } from "./receiver.js";

export interface OperatorFixture {
  readonly ns: string;
  readonly op: TestOperator;
  /** A receiver on 127.0.0.1 answering with `script`, closed after the suite. */
  receiver(script: Script): Promise<Receiver>;
}

export function operatorFixture(prefix: string, opts: { env?: Record<string, string>; statusIntervalMs?: number } = {}): OperatorFixture {
  let ns: string | undefined;
  let op: TestOperator | undefined;
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    ns = await createNamespace(prefix);
    op = await startOperator({ namespaces: [ns], ...opts });
  });
  afterAll(async () => {
    await op?.stop();
    await Promise.all(receivers.map((r) => r.close()));
    if (ns) await deleteNamespace(ns);
  });
  return {
    get ns() {
      if (!ns) throw new Error("operatorFixture: the namespace exists once beforeAll ran");
      return ns;
    },
    get op() {
      if (!op) throw new Error("operatorFixture: the operator runs once beforeAll ran");
      return op;
    },
    async receiver(script) {
      const r = await Receiver.start(script);
      receivers.push(r);
      return r;
    },
  };
}
