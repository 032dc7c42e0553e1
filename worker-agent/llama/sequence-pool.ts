/**
 * The context's sequences (llama.cpp's parallel slots, and optionally more that only keep their
 * tokens for prompts to come). Requests are served first come, first served, at most `maxLent`
 * sequences at once; which free sequences a request gets is chosen by what they still hold: a sequence
 * keeps its tokens (and their KV cache) after a request, so the one whose tokens share the
 * longest prefix with the new prompt only has to evaluate the rest (llama.cpp's server does
 * the same with its slot similarity). A request takes one sequence per choice, all at once, so
 * an `n = 2` request never holds one slot while waiting for another (two of them could
 * otherwise deadlock each other).
 *
 * Prefixes never cross tenants (the requests' cache salts, engines/cache-tenant.ts): a sequence
 * whose tokens another tenant's request left holds nothing for this request, however much of
 * its prompt they share. It is chosen as a sequence holding tokens it cannot reuse would be
 * (a victim, by recency), and the request clears it before evaluating: its `cached_tokens` and
 * its time to first token say nothing of what another tenant sent.
 */

/**
 * Shared prefixes shorter than this are not worth a sequence: a chat template's first tokens
 * (BOS, `<|im_start|>user\n`) are in every prompt, and choosing by them would hand an unrelated
 * prompt the sequence holding a hot system prompt. Like vLLM's 16-token cache blocks, reuse
 * (and the `cached_tokens` reported) is then 0 or at least this many tokens.
 */
export const MIN_REUSED_PREFIX = 16;

/** Length of the common prefix of two token lists. */
export function commonPrefixLength(a: readonly number[], b: readonly number[]): number {
  const length = Math.min(a.length, b.length);
  let index = 0;
  while (index < length && a[index] === b[index]) index += 1;
  return index;
}

/**
 * How many of `prompt`'s leading tokens a sequence holding `cached` can keep: the common
 * prefix, but never the whole prompt (its last token is evaluated again to get the logits
 * the first answer token is sampled from), and 0 when shorter than `minPrefix`.
 */
export function reusablePrefix(cached: readonly number[], prompt: readonly number[], minPrefix = MIN_REUSED_PREFIX): number {
  const shared = Math.min(commonPrefixLength(cached, prompt), prompt.length - 1);
  return shared >= Math.max(1, minPrefix) ? shared : 0;
}

/**
 * The prefix a sequence would give `prompt`, when taking it is worth what it throws away:
 * the shared part is at least half the prompt, or at least half of what the sequence holds.
 * A new conversation that shares only the chat template's first tokens with a long cached
 * history would otherwise take that sequence and erase the history its next turn needs
 * (llama.cpp's server uses a similar similarity threshold, 0.5, for its slots). 0: not worth it.
 */
export function worthReusing(cached: readonly number[], prompt: readonly number[], minPrefix = MIN_REUSED_PREFIX): number {
  return worthOf(reusablePrefix(cached, prompt, minPrefix), cached, prompt);
}

/** `shared` (a reusable prefix) when worth what taking the sequence throws away, else 0. */
function worthOf(shared: number, cached: readonly number[], prompt: readonly number[]): number {
  return shared * 2 >= prompt.length || shared * 2 >= cached.length ? shared : 0;
}

/**
 * A free sequence holding at least this many tokens past the prefix a prompt shares with it
 * holds someone else's history (another conversation of the same application, say): when the
 * engine can copy a prefix between sequences, the prompt gets another sequence and a copy of
 * the shared prefix instead of erasing that history. Without copying, two conversations of one
 * application on one replica would take each other's sequence turn after turn, each erasing
 * the other's history. Shorter tails (the answer the last turn generated, which the next turn
 * re-sends in its own words) are erased: keeping them is worth nothing.
 */
export const PRESERVED_TAIL = 64;

export interface FreeSequence {
  /** Tokens the sequence holds (its KV cache) that the request may reuse: none when another tenant left them. */
  readonly tokens: readonly number[];
  /** When it was last released (higher = more recent). */
  readonly lastUsed: number;
  /**
   * It holds no tokens at all, its own tenant's or another's (taking it erases nothing). @default
   * `tokens` is empty
   */
  readonly empty?: boolean;
}

/**
 * Picks a free sequence for each prompt (one per choice): repeatedly the (prompt, sequence)
 * pair with the longest prefix worth reusing; ties, and prompts that share nothing worth keeping
 * with any sequence, take an empty sequence, else the least recently used one, so hot prefixes
 * survive longest.
 * Returns, per prompt, an index into `free`. Pure, for tests.
 */
export function chooseSequences(free: readonly FreeSequence[], prompts: readonly (readonly number[])[], minPrefix = MIN_REUSED_PREFIX, preserveTails = false): number[] {
  if (prompts.length > free.length) throw new RangeError(`asked for ${prompts.length} sequences of ${free.length} free`);
  const shares = prompts.map((prompt) => free.map((sequence) => reusablePrefix(sequence.tokens, prompt, minPrefix)));
  const scores = prompts.map((prompt, index) => free.map((sequence, position) => {
    const shared = shares[index][position];
    return preserveTails && sequence.tokens.length - shared >= PRESERVED_TAIL ? 0 : worthOf(shared, sequence.tokens, prompt);
  }));
  const chosen: number[] = new Array(prompts.length).fill(-1);
  const taken = new Set<number>();
  for (let round = 0; round < prompts.length; round += 1) {
    let best: { prompt: number; sequence: number } | null = null;
    for (let prompt = 0; prompt < prompts.length; prompt += 1) {
      if (chosen[prompt] !== -1) continue;
      for (let sequence = 0; sequence < free.length; sequence += 1) {
        if (taken.has(sequence)) continue;
        if (!best) {
          best = { prompt, sequence };
          continue;
        }
        const score = scores[prompt][sequence];
        const bestScore = scores[best.prompt][best.sequence];
        // Longer prefix first; then, among sequences not worth reusing, the one sharing least with
        // the prompt (the others are what it may copy from); then an empty sequence (taking it
        // erases nothing); then the least recently used; then the earlier prompt (strict `<`).
        const shared = shares[prompt][sequence];
        const bestShared = shares[best.prompt][best.sequence];
        if (score > bestScore || (score === bestScore && (shared < bestShared || (shared === bestShared && isBetterVictim(free[sequence], free[best.sequence]))))) {
          best = { prompt, sequence };
        }
      }
    }
    chosen[best!.prompt] = best!.sequence;
    taken.add(best!.sequence);
  }
  return chosen;
}

/**
 * For each prompt, the free sequence (not among `chosen`) to copy a longer prefix from than its
 * chosen sequence holds, or -1. Pure, for tests.
 */
export function copySources(free: readonly FreeSequence[], prompts: readonly (readonly number[])[], chosen: readonly number[], minPrefix = MIN_REUSED_PREFIX): number[] {
  const taken = new Set(chosen);
  return prompts.map((prompt, index) => {
    let best = -1;
    let bestShared = reusablePrefix(free[chosen[index]].tokens, prompt, minPrefix);
    for (let sequence = 0; sequence < free.length; sequence += 1) {
      if (taken.has(sequence)) continue;
      const shared = reusablePrefix(free[sequence].tokens, prompt, minPrefix);
      if (shared > bestShared) {
        best = sequence;
        bestShared = shared;
      }
    }
    return best;
  });
}

function isBetterVictim(candidate: FreeSequence, current: FreeSequence): boolean {
  const candidateEmpty = candidate.empty ?? candidate.tokens.length === 0;
  if (candidateEmpty !== (current.empty ?? current.tokens.length === 0)) return candidateEmpty;
  return candidate.lastUsed < current.lastUsed;
}

const NO_TOKENS: readonly number[] = Object.freeze([]);

interface Waiter<Sequence> {
  readonly count: number;
  readonly prompts: readonly (readonly number[])[] | undefined;
  readonly tenant: string;
  resolve(sequences: Sequence[]): void;
}

export class SequencePool<Sequence> {
  private readonly free: Array<{ sequence: Sequence; lastUsed: number }>;
  private readonly waiting: Array<Waiter<Sequence>> = [];
  /**
   * Lent sequences that start from a copy of another (free) sequence's prefix. Until the copy
   * is done (`copied`) the source is pinned: free, but no request may take it and change it.
   */
  private readonly sources = new Map<Sequence, Sequence>();
  private readonly pinned = new Set<Sequence>();
  /**
   * The tenant whose tokens each sequence holds, set once a request readied it (`prepared`); a
   * sequence no request readied yet is the unsalted tenant's '' (it holds nothing in the engine).
   */
  private readonly holders = new Map<Sequence, string>();
  /** The tenant of the request each lent sequence is lent to. */
  private readonly borrowers = new Map<Sequence, string>();
  private lent = 0;
  private clock = 0;

  /**
   * @param cachedTokens the tokens a free sequence holds (none: every sequence counts as empty)
   * @param maxLent sequences lent at once (the parallel slots); the others only keep their
   *   tokens for prompts to come, so a request chooses among more cached prefixes than run. @default all
   */
  constructor(
    sequences: readonly Sequence[],
    private readonly cachedTokens: (sequence: Sequence) => readonly number[] = () => [],
    private readonly maxLent = sequences.length,
    /** The engine can copy a prefix from one sequence to another (see `PRESERVED_TAIL`). */
    private readonly canCopy = false,
  ) {
    this.free = sequences.map((sequence) => ({ sequence, lastUsed: 0 }));
  }

  /** Sequences a request may hold at once (the parallel slots). */
  get size(): number {
    return Math.min(this.maxLent, this.free.length + this.lent);
  }

  /** Whether `count` sequences can be lent now. */
  private canLend(count: number): boolean {
    return this.free.length - this.pinned.size >= count && this.lent + count <= this.maxLent;
  }

  /** Sequences lent to requests now. */
  get busy(): number {
    return this.lent;
  }

  /** Requests waiting for sequences. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Whether the sequence is in the pool now (not lent to a request). */
  isFree(sequence: Sequence): boolean {
    return this.free.some((entry) => entry.sequence === sequence);
  }

  /**
   * Resolves with `count` sequences; rejects with the signal's reason if it aborts first.
   * `prompts` (one per sequence, in the order the sequences are returned) chooses them by
   * shared prefix; without it they are the least recently used. `tenant`: whose prefixes the
   * request may reuse (its cache salt); only sequences its own tenant left count as holding any.
   */
  acquire(count: number, signal: AbortSignal, prompts?: readonly (readonly number[])[], tenant = ''): Promise<Sequence[]> {
    if (count > this.size) return Promise.reject(new RangeError(`asked for ${count} sequences of ${this.size}`));
    if (prompts && prompts.length !== count) return Promise.reject(new RangeError(`${prompts.length} prompts for ${count} sequences`));
    signal.throwIfAborted();
    if (this.waiting.length === 0 && this.canLend(count)) return Promise.resolve(this.take(count, prompts, tenant));
    return new Promise<Sequence[]>((resolve, reject) => {
      const waiter: Waiter<Sequence> = {
        count,
        prompts,
        tenant,
        resolve: (sequences: Sequence[]) => {
          signal.removeEventListener('abort', onAbort);
          resolve(sequences);
        },
      };
      const onAbort = () => {
        this.waiting.splice(this.waiting.indexOf(waiter), 1);
        reject(signal.reason);
        this.grant();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  /**
   * The tokens of `sequence` (lent now) its request may reuse: what it holds when the request's
   * own tenant left it, else none (the request must clear it before evaluating).
   */
  reusableTokens(sequence: Sequence): readonly number[] {
    return (this.holders.get(sequence) ?? '') === this.borrowers.get(sequence) ? this.cachedTokens(sequence) : NO_TOKENS;
  }

  /**
   * `sequence` (lent now) was readied for its request: it holds its own tenant's prefix or
   * nothing, and whatever it evaluates next is that tenant's. Until this is called (a request
   * given up before it got that far) the sequence stays the previous tenant's.
   */
  prepared(sequence: Sequence): void {
    const borrower = this.borrowers.get(sequence);
    if (borrower !== undefined) this.holders.set(sequence, borrower);
  }

  /**
   * The free sequence holding a longer prefix of the prompt `sequence` was lent for than it
   * holds itself, to copy that prefix from before evaluating, or null. It stays pinned until
   * `copied(sequence)`. Only ever one its own tenant left.
   */
  sourceOf(sequence: Sequence): Sequence | null {
    return this.sources.get(sequence) ?? null;
  }

  /** The copy into `sequence` is done (or given up): its source may be lent again. */
  copied(sequence: Sequence): void {
    const source = this.sources.get(sequence);
    if (source === undefined) return;
    this.sources.delete(sequence);
    this.pinned.delete(source);
    this.grant();
  }

  release(sequences: readonly Sequence[]): void {
    for (const sequence of sequences) {
      const source = this.sources.get(sequence);
      if (source !== undefined) this.pinned.delete(source);
      this.sources.delete(sequence);
      this.borrowers.delete(sequence);
    }
    this.lent -= sequences.length;
    for (const sequence of sequences) this.free.push({ sequence, lastUsed: ++this.clock });
    this.grant();
  }

  private take(count: number, prompts: readonly (readonly number[])[] | undefined, tenant: string): Sequence[] {
    const entries = this.pinned.size === 0 ? this.free : this.free.filter((entry) => !this.pinned.has(entry.sequence));
    const free = entries.map(({ sequence, lastUsed }): FreeSequence => {
      if (!prompts) return { tokens: NO_TOKENS, lastUsed };
      const held = this.cachedTokens(sequence);
      // Another tenant's tokens: nothing to reuse (nor to copy from), but not empty either.
      return (this.holders.get(sequence) ?? '') === tenant ? { tokens: held, lastUsed } : { tokens: NO_TOKENS, lastUsed, empty: held.length === 0 };
    });
    const chosen = chooseSequences(free, prompts ?? Array.from({ length: count }, () => []), MIN_REUSED_PREFIX, this.canCopy);
    const sequences = chosen.map((index) => entries[index].sequence);
    if (this.canCopy && prompts) {
      copySources(free, prompts, chosen).forEach((source, index) => {
        // One copy per source at a time (two choices of one prompt may want the same one).
        if (source === -1 || this.pinned.has(entries[source].sequence)) return;
        this.sources.set(sequences[index], entries[source].sequence);
        this.pinned.add(entries[source].sequence);
      });
    }
    const taken = new Set(sequences);
    for (let index = this.free.length - 1; index >= 0; index -= 1) if (taken.has(this.free[index].sequence)) this.free.splice(index, 1);
    for (const sequence of sequences) this.borrowers.set(sequence, tenant);
    this.lent += count;
    return sequences;
  }

  /** Strict FIFO: a large request at the head is not starved by smaller ones behind it. */
  private grant(): void {
    while (this.waiting.length > 0 && this.canLend(this.waiting[0].count)) {
      const waiter = this.waiting.shift()!;
      waiter.resolve(this.take(waiter.count, waiter.prompts, waiter.tenant));
    }
  }
}
