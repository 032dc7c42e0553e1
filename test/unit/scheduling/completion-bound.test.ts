/**
 * The completion bound of a request's fields (control-plane/pipeline/completion-bound.ts), the
 * one answer every hold counts; that the holds agree is completion-bound-callers.test.ts.
 */
import { completionBound, DEFAULT_COMPLETION_HOLD, withCompletionBound } from '../../../control-plane/pipeline/completion-bound';

/** A guest's default bound (SHARED_DEFAULT_MAX_TOKENS), unlike DEFAULT_COMPLETION_HOLD. */
const GUEST_DEFAULT = 256;
const MESSAGES = [{ role: 'user', content: 'how many tokens may you write?' }];

describe('completionBound', () => {
  test.each<[string, Record<string, unknown>, number | undefined, Partial<ReturnType<typeof completionBound>>]>([
    ['max_tokens', { max_tokens: 500 }, undefined, { perChoice: 500, completions: 1, total: 500, given: true, field: 'max_tokens' }],
    ['max_completion_tokens wins over max_tokens', { max_completion_tokens: 100, max_tokens: 500 }, undefined, { total: 100, field: 'max_completion_tokens' }],
    ['max_completion_tokens alone', { max_completion_tokens: 40 }, undefined, { total: 40, given: true, field: 'max_completion_tokens' }],
    ['a null max_completion_tokens leaves max_tokens', { max_completion_tokens: null, max_tokens: 7 }, undefined, { total: 7, field: 'max_tokens' }],
    ['no bound: the caller\'s assumption', {}, undefined, { perChoice: DEFAULT_COMPLETION_HOLD, total: DEFAULT_COMPLETION_HOLD, given: false, field: 'max_tokens' }],
    ['no bound, a guest\'s default', { max_tokens: null }, GUEST_DEFAULT, { total: GUEST_DEFAULT, given: false }],
    ['n multiplies', { max_tokens: 500, n: 2 }, undefined, { perChoice: 500, completions: 2, total: 1_000 }],
    ['a prompt array of strings multiplies', { max_tokens: 10, prompt: ['a', 'b', 'c'] }, undefined, { completions: 3, total: 30 }],
    ['prompts and n together', { max_tokens: 10, n: 2, prompt: ['a', 'b', 'c'] }, undefined, { total: 60 }],
    ['a single tokenized prompt counts once', { max_tokens: 10, prompt: [1, 2, 3] }, undefined, { total: 10 }],
    ['a bound the parse refuses counts 1 per choice (the screen must not answer 402 for a 400)', { max_tokens: 'many', n: 2 }, undefined, { perChoice: 1, total: 2 }],
    ['max_tokens 0 (refused by the parse) counts 1', { max_tokens: 0 }, undefined, { total: 1, given: true }],
    ['an n the parse refuses counts 1', { max_tokens: 10, n: 2.5 }, undefined, { total: 10 }],
  ])('%s', (_name, fields, unbounded, expected) => {
    expect(DEFAULT_COMPLETION_HOLD).toBe(1024);
    expect(completionBound(fields, unbounded)).toMatchObject(expected);
  });

  test('withCompletionBound writes max_tokens into a request without a bound, and leaves a bounded one as it is', () => {
    const open = { messages: MESSAGES, n: 2 };
    const bounded = withCompletionBound(open, Buffer.from(JSON.stringify(open)), GUEST_DEFAULT);
    expect(bounded.fields).toEqual({ ...open, max_tokens: GUEST_DEFAULT });
    expect(JSON.parse(bounded.body.toString())).toEqual(bounded.fields);
    const given = { messages: MESSAGES, max_completion_tokens: 9 };
    const body = Buffer.from(JSON.stringify(given));
    expect(withCompletionBound(given, body, GUEST_DEFAULT)).toEqual({ fields: given, body });
  });
});
