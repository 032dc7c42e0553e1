/**
 * What a describe block opens once for all its tests (a server, a database, a fixture): `open`
 * runs in the block's beforeAll and `close` in its afterAll (only if open resolved). This is the
 * `let x; beforeAll(x = await open()); afterAll(x?.close())` that most integration suites wrote
 * by hand.
 *
 * The returned object stands for what `open` resolves to: it is empty until beforeAll has run,
 * then holds the same fields (copied from the opened object), so tests and later hooks use it as
 * they would the opened object itself. Read it inside tests and hooks, never at describe time.
 */
export function openForSuite<T extends object>(open: () => Promise<T>, close: (opened: T) => Promise<unknown>, timeoutMs?: number): T {
  const holder = {} as T;
  let opened: T | undefined;
  beforeAll(async () => {
    opened = await open();
    Object.assign(holder, opened);
  }, timeoutMs);
  afterAll(async () => {
    if (opened) await close(opened);
  });
  return holder;
}
