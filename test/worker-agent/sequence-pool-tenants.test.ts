/**
 * The sequence pool's tenant rule (worker-agent/llama/sequence-pool.ts): a sequence another
 * tenant's request left holds nothing for this request, however much of its prompt it shares,
 * so the llama.cpp engine's `cached_tokens` and time to first token count only the caller's own
 * reuse. A tenant is a job's cache salt (engines/cache-tenant.ts).
 */
import { cacheTenantOf } from '../../worker-agent/engines/cache-tenant';
import { chooseSequences, SequencePool } from '../../worker-agent/llama/sequence-pool';

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, index) => from + index);
const never = new AbortController().signal;
const OWNER = 'o'.repeat(43);
const GUEST = 'g'.repeat(43);

/** A pool over named sequences whose tokens the test sets, readied as the runtime does (prepared after each take). */
function pool(held: Record<string, number[]>, maxLent?: number, canCopy = false) {
  const sequences = Object.keys(held);
  const instance = new SequencePool(sequences, (sequence) => held[sequence], maxLent, canCopy);
  /** What the runtime does with a lent sequence: keep what it may reuse (else clear it), evaluate the prompt, release it. */
  const serve = async (prompt: number[], tenant: string) => {
    const [sequence] = await instance.acquire(1, never, [prompt], tenant);
    const reusable = instance.reusableTokens(sequence);
    let kept = 0;
    while (kept < reusable.length && kept < prompt.length - 1 && reusable[kept] === prompt[kept]) kept++;
    if (kept < 16) kept = 0;
    instance.prepared(sequence);
    held[sequence] = [...prompt];
    instance.release([sequence]);
    return { sequence, kept };
  };
  return { pool: instance, serve };
}

describe('sequence pool: prefixes never cross tenants', () => {
  const secret = [...range(0, 300), 4821];

  it('gives a guest nothing of the owner\'s prefix, while the owner and the guest each reuse their own', async () => {
    const { serve } = pool({ a: [], b: [] });
    expect((await serve(secret, OWNER)).kept).toBe(0);
    // The owner repeats its prompt: the cache still works.
    expect((await serve(secret, OWNER)).kept).toBe(secret.length - 1);
    // The guest sends the owner's exact prefix: it reuses nothing.
    const probe = await serve(secret, GUEST);
    expect(probe.kept).toBe(0);
    // The guest's own repeat reuses what it left itself.
    expect((await serve(secret, GUEST)).kept).toBe(secret.length - 1);
    expect(probe.sequence).toBeDefined();
  });

  it('reports no reusable tokens for a sequence lent to another tenant, until the request readied it', async () => {
    const held: Record<string, number[]> = { a: range(0, 100) };
    const instance = new SequencePool(['a'], (sequence) => held[sequence]);
    // Never readied by a salted request yet: the unsalted tenant's (every job before salts).
    const [first] = await instance.acquire(1, never, [range(0, 50)]);
    expect(instance.reusableTokens(first)).toEqual(range(0, 100));
    instance.prepared(first);
    instance.release([first]);
    const [lent] = await instance.acquire(1, never, [range(0, 50)], OWNER);
    expect(instance.reusableTokens(lent)).toEqual([]);
    // Given up before it was readied (canceled): still the previous tenant's, never the owner's.
    instance.release([lent]);
    const [again] = await instance.acquire(1, never, [range(0, 50)], OWNER);
    expect(instance.reusableTokens(again)).toEqual([]);
    instance.prepared(again);
    held.a = range(0, 60);
    instance.release([again]);
    const [owned] = await instance.acquire(1, never, [range(0, 50)], OWNER);
    expect(instance.reusableTokens(owned)).toEqual(range(0, 60));
    instance.release([owned]);
    const [unsalted] = await instance.acquire(1, never, [range(0, 50)]);
    expect(instance.reusableTokens(unsalted)).toEqual([]);
  });

  it('chooses by the requester\'s own prefixes only: a guest is not steered to the sequence holding the owner\'s prompt', async () => {
    // Both idle: one holds an older prompt of the guest's own, the other the owner's secret (used last).
    const { pool: instance, serve } = pool({ a: [], b: [] });
    const guests = await serve([...range(900, 950)], GUEST);
    const owners = await serve(secret, OWNER);
    expect(owners.sequence).not.toBe(guests.sequence);
    const [chosen] = await instance.acquire(1, never, [secret], GUEST);
    // Without the rule the guest would get the owner's (its whole prompt cached there). With it,
    // that one holds nothing for the guest and is the most recently used: the guest takes its own.
    expect(chosen).toBe(guests.sequence);
    expect(instance.reusableTokens(chosen)).toEqual(range(900, 950));
  });

  it('counts another tenant\'s sequence as holding tokens (not empty) when choosing a victim, and never copies from it', () => {
    const free = [
      { tokens: [], lastUsed: 1, empty: false },
      { tokens: [], lastUsed: 5 },
    ];
    // An empty sequence is a better victim than another tenant's, which still holds a prefix for that tenant.
    expect(chooseSequences(free, [range(0, 40)])).toEqual([1]);
  });

  it('copies a prefix only from a sequence of the same tenant', async () => {
    const system = range(0, 40);
    const held: Record<string, number[]> = { a: [], b: [], c: [] };
    const { pool: instance, serve } = pool(held, 3, true);
    await serve([...system, ...range(500, 600)], OWNER);
    await serve(range(900, 950), OWNER);
    const [forGuest] = await instance.acquire(1, never, [[...system, ...range(700, 720)]], GUEST);
    expect(instance.sourceOf(forGuest)).toBeNull();
    instance.release([forGuest]);
    const [forOwner] = await instance.acquire(1, never, [[...system, ...range(700, 720)]], OWNER);
    expect(instance.sourceOf(forOwner)).not.toBeNull();
  });

  it('hands waiting requests sequences by their own tenant', async () => {
    const { pool: instance, serve } = pool({ a: [] }, 1);
    await serve(secret, OWNER);
    const [held] = await instance.acquire(1, never, [secret], OWNER);
    const waiting = instance.acquire(1, never, [secret], GUEST);
    instance.prepared(held);
    instance.release([held]);
    const [granted] = await waiting;
    expect(instance.reusableTokens(granted)).toEqual([]);
  });
});

describe('cacheTenantOf', () => {
  it('is the job\'s salt; a guest job without one is a tenant of its own; other unsalted jobs share \'\'', () => {
    expect(cacheTenantOf({ jobId: 'j1', cacheSalt: OWNER })).toBe(OWNER);
    expect(cacheTenantOf({ jobId: 'j1', cacheSalt: GUEST, guest: true })).toBe(GUEST);
    expect(cacheTenantOf({ jobId: 'j1', guest: true })).not.toBe(cacheTenantOf({ jobId: 'j2', guest: true }));
    expect(cacheTenantOf({ jobId: 'j1', cacheSalt: '', guest: true })).toBe('job:j1');
    expect(cacheTenantOf({ jobId: 'j1' })).toBe('');
    expect(cacheTenantOf({ jobId: 'j1', cacheSalt: '' })).toBe('');
  });
});
