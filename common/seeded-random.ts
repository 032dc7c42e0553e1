/**
 * Reproducible randomness: the same seed gives the same sequence on every machine, so the CPU
 * engine's stand-in answers, simulated load and benchmark traces can be replayed exactly.
 * Not for anything secret.
 */

/** 32-bit FNV-1a: a stable, dependency-free hash of a text, to seed from it. */
export function hashText(text: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < text.length; index += 1) {
    hash ^= text.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/** mulberry32: 32 bits of state, small and fast, plenty for varied-looking text and traffic shapes. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let mixed = state;
    mixed = Math.imul(mixed ^ (mixed >>> 15), mixed | 1);
    mixed ^= mixed + Math.imul(mixed ^ (mixed >>> 7), mixed | 61);
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 4_294_967_296;
  };
}
