/** Runs `send(i)` for i < n at `perSecond`, on a schedule (not one after the other); resolves when all have. */
export async function paced(n: number, perSecond: number, send: (i: number) => Promise<void>): Promise<void> {
  const start = performance.now();
  const all: Promise<void>[] = [];
  for (let i = 0; i < n; i++) {
    const wait = start + (i * 1000) / perSecond - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    all.push(send(i));
  }
  await Promise.all(all);
}
