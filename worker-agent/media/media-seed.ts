import { hashText } from '../../common/seeded-random';

/**
 * The 32-bit seed a renderer draws its pattern from. Every option that would change a real
 * model's output takes part, so changing any of them changes the pixels; a missing seed is
 * derived from the prompt because the CPU engine must stay repeatable (tests compare bytes).
 */
export function mediaSeed(kind: string, prompt: string, seed: number | undefined, ...details: readonly unknown[]): number {
  const effectiveSeed = seed ?? hashText(prompt);
  return hashText(JSON.stringify([kind, prompt, effectiveSeed, ...details]));
}
