import v8 from 'node:v8';
import vm from 'node:vm';
import fc from 'fast-check';

/** The seed when FUZZ_SEED is not set: CI runs the same cases every time, so a failure is reproducible. */
export const DEFAULT_FUZZ_SEED = 0x5eed_f022;

/** FUZZ_SEED (an integer) replays another run; otherwise the fixed default. */
export function fuzzSeed(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.FUZZ_SEED?.trim();
  if (!raw) return DEFAULT_FUZZ_SEED;
  const seed = Number(raw);
  if (!Number.isSafeInteger(seed)) throw new Error(`FUZZ_SEED must be an integer, got ${JSON.stringify(raw)}`);
  return seed | 0;
}

/** A case that gets no answer in this long hangs: a failure like a 5xx (every case here is answered in milliseconds). */
const CASE_TIMEOUT_MS = 15_000;

async function withinTime(work: Promise<string | null>, timeoutMs: number, problem: () => string): Promise<string | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<string>((resolve) => (timer = setTimeout(() => resolve(problem()), timeoutMs)));
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** What one property did: cases run (shrinking included) and the answers' status codes. */
export interface PropertyReport {
  name: string;
  numRuns: number;
  executed: number;
  statuses: Record<string, number>;
  milliseconds: number;
}

/**
 * Runs `check` on `numRuns` generated values with `seed`; a case fails when `check` returns a
 * problem (fast-check then shrinks it and reports the seed, path and smallest failing value).
 */
export async function runProperty<T>(
  name: string, arbitrary: fc.Arbitrary<T>, check: (value: T, count: (status: number | string) => void) => Promise<string | null>,
  options: { seed: number; numRuns: number },
): Promise<PropertyReport> {
  const report: PropertyReport = { name, numRuns: options.numRuns, executed: 0, statuses: {}, milliseconds: 0 };
  const count = (status: number | string) => {
    report.statuses[status] = (report.statuses[status] ?? 0) + 1;
  };
  const startedAt = performance.now();
  const details = await fc.check(fc.asyncProperty(arbitrary, async (value) => {
    report.executed++;
    const problem = await withinTime(check(value, count), CASE_TIMEOUT_MS, () => `no answer within ${CASE_TIMEOUT_MS} ms: ${fc.stringify(value).slice(0, 1_500)}`);
    if (problem) throw new Error(problem);
  }), { seed: options.seed, numRuns: options.numRuns });
  if (details.failed) {
    // The case as `check` described it (readable, bodies cut short), rather than fast-check's print of the raw value.
    const cause = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
    throw new Error(`${name}: failed after ${details.numRuns} case(s), shrunk ${details.numShrinks} time(s); seed ${details.seed}, path "${details.counterexamplePath}"\n${cause}`);
  }
  report.milliseconds = Math.round(performance.now() - startedAt);
  return report;
}

/**
 * The heap of this process (the server runs in it) after full collections. `--expose-gc` is
 * switched on at run time, since jest is not started with it: a new context then has `gc`.
 */
export function heapAfterCollection(): number {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  for (let round = 0; round < 3; round++) gc();
  return process.memoryUsage().heapUsed;
}
