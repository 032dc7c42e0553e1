/**
 * `promise`, or a rejection after `timeoutMs`. A probe or a scrape must answer even when the
 * database hangs (a pool waiting for a connection has no timeout of its own); the abandoned
 * query finishes or fails on its own later.
 */
export async function withTimeout<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
