/**
 * promptKey (control-plane/placement/prompt-key.ts): the application and conversation keys of a
 * chat or completions body. What prefix-aware routing relies on: a conversation's later turns
 * keep its keys, the instructions (system messages, tools) decide the application, the first
 * user turn the conversation, and nothing that does not change the engine's cached prefix
 * (sampling fields) changes a key. Keys are per tenant, as engines' prefix caches are: two
 * workspaces' equal prompts are keyed apart, so affinity never gathers tenants on one replica.
 */
import { COMPLETION_APPLICATION_CHARS, COMPLETION_CONVERSATION_CHARS, promptKey, type PromptKey } from '../../../control-plane/placement/prompt-key';
import { rankedOrder } from '../../../control-plane/placement/prefix-aware';
import type { RouteCandidate } from '../../../control-plane/placement/placement-policy';

/** The workspace the jobs are for: keys are computed per tenant. */
const TENANT = 'ws_a';
const SYSTEM = { role: 'system', content: 'You are a helpful travel agent. Answer briefly.' };
const FIRST_USER = { role: 'user', content: 'Find me a flight to Lisbon.' };

function keyOf(fields: Record<string, unknown>, tenant = TENANT): PromptKey {
  const key = promptKey(fields, tenant);
  if (!key) throw new Error(`expected a key for ${JSON.stringify(fields)}`);
  return key;
}

function chat(messages: unknown[], extra: Record<string, unknown> = {}, tenant = TENANT): PromptKey {
  return keyOf({ model: 'acme/chat', messages, ...extra }, tenant);
}

describe('promptKey: chat conversations', () => {
  it('keeps both keys over a conversation\'s later turns', () => {
    const first = chat([SYSTEM, FIRST_USER]);
    const second = chat([SYSTEM, FIRST_USER, { role: 'assistant', content: 'Which day?' }, { role: 'user', content: 'Friday.' }]);
    const third = chat([
      SYSTEM, FIRST_USER, { role: 'assistant', content: 'Which day?' }, { role: 'user', content: 'Friday.' },
      { role: 'assistant', content: 'TAP 1234 at 9:00.' }, { role: 'user', content: 'Book it.' },
    ]);
    expect(second).toEqual(first);
    expect(third).toEqual(first);
  });

  it('gives different system prompts different application keys (and conversation keys)', () => {
    const a = chat([SYSTEM, FIRST_USER]);
    const b = chat([{ role: 'system', content: 'You are a pirate. Answer in verse.' }, FIRST_USER]);
    expect(b.application).not.toBe(a.application);
    expect(b.conversation).not.toBe(a.conversation);
  });

  it('gives the same system prompt with different first user turns one application, different conversations', () => {
    const a = chat([SYSTEM, FIRST_USER]);
    const b = chat([SYSTEM, { role: 'user', content: 'Find me a hotel in Porto.' }]);
    expect(b.application).toBe(a.application);
    expect(b.conversation).not.toBe(a.conversation);
  });

  it('counts every message before the first user turn as the application (several system messages, a developer message)', () => {
    const base = chat([SYSTEM, { role: 'developer', content: 'Prices in EUR.' }, FIRST_USER]);
    expect(chat([SYSTEM, { role: 'developer', content: 'Prices in USD.' }, FIRST_USER]).application).not.toBe(base.application);
    expect(chat([SYSTEM, FIRST_USER]).application).not.toBe(base.application);
  });

  it('gives a chat with no user turn a conversation key equal to its application key', () => {
    const key = chat([SYSTEM]);
    expect(key.conversation).toBe(key.application);
    // ...and a chat whose first message is the user's has no application to share: its own conversation keys it.
    const bare1 = chat([{ role: 'user', content: 'hello' }]);
    const bare2 = chat([{ role: 'user', content: 'goodbye' }]);
    expect(bare1.application).not.toBe(bare2.application);
    expect(bare1.conversation).not.toBe(bare2.conversation);
  });

  it.each<[string, Record<string, unknown>]>([
    ['temperature', { temperature: 1.7 }],
    ['max_tokens', { max_tokens: 12 }],
    ['stream', { stream: true, stream_options: { include_usage: true } }],
    ['n', { n: 4 }],
    ['seed', { seed: 42 }],
    ['all of them and more', { temperature: 0, top_p: 0.1, max_tokens: 1, stream: false, n: 2, seed: 7, stop: ['\n'], user: 'u_1', model: 'other/model' }],
  ])('never changes a key for the sampling field(s) %s', (_name, sampling) => {
    const messages = [SYSTEM, FIRST_USER];
    expect(chat(messages, sampling)).toEqual(chat(messages));
  });

  it('changes the application key with the tools', () => {
    const weather = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
    const flights = [{ type: 'function', function: { name: 'search_flights', parameters: { type: 'object', properties: {} } } }];
    const none = chat([SYSTEM, FIRST_USER]);
    const withWeather = chat([SYSTEM, FIRST_USER], { tools: weather });
    const withFlights = chat([SYSTEM, FIRST_USER], { tools: flights });
    expect(withWeather.application).not.toBe(none.application);
    expect(withFlights.application).not.toBe(withWeather.application);
    expect(chat([SYSTEM, FIRST_USER, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'more' }], { tools: weather })).toEqual(withWeather);
    // What the code does: `tools: []` is hashed ("[]"), so it differs from no tools at all; `tools: undefined` does not.
    expect(chat([SYSTEM, FIRST_USER], { tools: [] }).application).not.toBe(none.application);
    expect(chat([SYSTEM, FIRST_USER], { tools: undefined })).toEqual(none);
  });

  it('counts an image part by a digest of its URL: same URL same key, different URL different key', () => {
    const withImage = (url: unknown) => chat([SYSTEM, { role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: url }] }]);
    const cat = withImage({ url: 'https://example.com/cat.png' });
    expect(withImage({ url: 'https://example.com/cat.png' })).toEqual(cat);
    expect(withImage({ url: 'https://example.com/dog.png' }).conversation).not.toBe(cat.conversation);
    expect(withImage({ url: 'https://example.com/dog.png' }).application).toBe(cat.application);
    // A data URL counts by its bytes' digest too.
    const pixel = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
    expect(withImage({ url: pixel })).toEqual(withImage({ url: pixel }));
    expect(withImage({ url: pixel }).conversation).not.toBe(cat.conversation);
    // What the code does: the string form of `image_url` keys like the object form, and `detail` is not part of the key.
    expect(withImage('https://example.com/cat.png')).toEqual(cat);
    expect(withImage({ url: 'https://example.com/cat.png', detail: 'low' })).toEqual(cat);
  });

  it('keys string content and an array of text parts with the same text alike', () => {
    // What the code does: text parts are hashed as their bare text, so "hi" and [{type:'text',text:'hi'}] give the same keys
    // (the engine's chat template renders them alike), and so does the same text split over two parts.
    const asString = chat([{ role: 'system', content: 'Be terse.' }, { role: 'user', content: 'hi' }]);
    const asParts = chat([{ role: 'system', content: [{ type: 'text', text: 'Be terse.' }] }, { role: 'user', content: [{ type: 'text', text: 'hi' }] }]);
    const split = chat([{ role: 'system', content: 'Be terse.' }, { role: 'user', content: [{ type: 'text', text: 'h' }, { type: 'text', text: 'i' }] }]);
    expect(asParts).toEqual(asString);
    expect(split).toEqual(asString);
  });

  it('keys a message by its role, name, tool calls and tool call id', () => {
    const base = chat([SYSTEM, FIRST_USER]);
    expect(chat([{ ...SYSTEM, role: 'developer' }, FIRST_USER]).application).not.toBe(base.application);
    expect(chat([SYSTEM, { ...FIRST_USER, name: 'alice' }]).conversation).not.toBe(base.conversation);
    const assistantCall = (id: string) => ({ role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name: 'f', arguments: '{}' } }] });
    expect(chat([SYSTEM, assistantCall('call_1'), FIRST_USER]).application).not.toBe(chat([SYSTEM, assistantCall('call_2'), FIRST_USER]).application);
    const toolReply = (id: string) => ({ role: 'tool', tool_call_id: id, content: 'sunny' });
    expect(chat([SYSTEM, toolReply('call_1'), FIRST_USER]).application).not.toBe(chat([SYSTEM, toolReply('call_2'), FIRST_USER]).application);
  });

  it('gives the same body the same keys every time (no per-process state)', () => {
    const body = { messages: [SYSTEM, FIRST_USER], tools: [{ type: 'function', function: { name: 'f' } }] };
    expect(keyOf(JSON.parse(JSON.stringify(body)))).toEqual(keyOf(body));
    const key = keyOf(body);
    expect(Number.isInteger(key.application) && key.application >= 0 && key.application < 2 ** 32).toBe(true);
    expect(Number.isInteger(key.conversation) && key.conversation >= 0 && key.conversation < 2 ** 32).toBe(true);
  });
});

describe('promptKey: completions prompts', () => {
  const long = (seed: string, length: number) => seed.repeat(Math.ceil(length / seed.length)).slice(0, length);

  it('gives prompts that share their first 1,024 characters one application', () => {
    const head = long('Translate the following into French. ', COMPLETION_APPLICATION_CHARS);
    const a = keyOf({ prompt: `${head} The cat sleeps.` });
    const b = keyOf({ prompt: `${head} The dog barks loudly.` });
    expect(b.application).toBe(a.application);
    expect(b.conversation).not.toBe(a.conversation);
    expect(keyOf({ prompt: `X${head.slice(1)} The cat sleeps.` }).application).not.toBe(a.application);
  });

  it('gives prompts that share their first 4,096 characters one conversation', () => {
    const head = long('Once upon a time, ', COMPLETION_CONVERSATION_CHARS);
    expect(keyOf({ prompt: `${head} and then A` })).toEqual(keyOf({ prompt: `${head} and then B, much later` }));
  });

  it('gives a short prompt (within 1,024 characters) equal application and conversation keys', () => {
    const key = keyOf({ prompt: 'Hello' });
    expect(key.conversation).toBe(key.application);
    expect(keyOf({ prompt: 'Hello!' }).application).not.toBe(key.application);
  });

  it('keys a string array prompt by its first element', () => {
    expect(keyOf({ prompt: ['first prompt', 'second prompt'] })).toEqual(keyOf({ prompt: 'first prompt' }));
    expect(keyOf({ prompt: ['first prompt', 'another second'] })).toEqual(keyOf({ prompt: ['first prompt', 'second prompt'] }));
  });

  it('never changes a key for sampling fields', () => {
    expect(keyOf({ prompt: 'Hello', temperature: 2, max_tokens: 5, stream: true, n: 3, seed: 1, echo: true })).toEqual(keyOf({ prompt: 'Hello' }));
  });
});

describe('promptKey: nothing to key by', () => {
  it.each<[string, Record<string, unknown>]>([
    ['empty messages', { messages: [] }],
    ['empty messages, even with a prompt (messages win)', { messages: [], prompt: 'Hello' }],
    ['no messages and no prompt', { model: 'acme/chat', temperature: 0.5 }],
    ['an empty prompt', { prompt: '' }],
    ['an empty prompt array', { prompt: [] }],
    ['a prompt array whose first element is empty', { prompt: ['', 'second'] }],
    ['a token-id prompt (what the code does: not keyed)', { prompt: [101, 2023, 2003] }],
    ['a prompt that is not a string', { prompt: 42 }],
    ['messages that are not an array, and no prompt', { messages: 'hello' }],
  ])('returns null for %s', (_name, fields) => {
    expect(promptKey(fields, TENANT)).toBeNull();
  });
});

describe('promptKey: malformed messages', () => {
  it('does not throw on null, number, string or array entries, or on odd content parts', () => {
    const odd: unknown[] = [
      null, 7, 'a string', [1, 2], { role: 'system' }, { role: 'system', content: 12 }, { content: 'no role' },
      { role: 'system', content: [null, 3, 'text', { type: 'text' }, { type: 'image_url' }, { type: 'image_url', image_url: {} }, { type: 'input_audio', input_audio: { data: 'AAAA' } }] },
      { role: 'user', content: [{ type: 'image_url', image_url: { url: 12 } }] },
    ];
    expect(() => promptKey({ messages: odd }, TENANT)).not.toThrow();
    expect(promptKey({ messages: odd }, TENANT)).not.toBeNull();
    expect(() => promptKey({ messages: [null] }, TENANT)).not.toThrow();
    expect(() => promptKey({ messages: [undefined, 0, false] }, TENANT)).not.toThrow();
    expect(() => promptKey({ messages: [SYSTEM, FIRST_USER], tools: 'not a list' }, TENANT)).not.toThrow();
  });

  it('skips entries that are not objects (what the code does: they add nothing to either key)', () => {
    expect(chat([null, 7, SYSTEM, 'x', FIRST_USER])).toEqual(chat([SYSTEM, FIRST_USER]));
  });
});

describe('prompts without instructions', () => {
  it('key their application by the conversation, so system-prompt-less chats do not share two home replicas', () => {
    const a = promptKey({ messages: [{ role: 'user', content: 'first question' }] }, TENANT)!;
    const b = promptKey({ messages: [{ role: 'user', content: 'another question' }] }, TENANT)!;
    expect(a.application).toBe(a.conversation);
    expect(b.application).toBe(b.conversation);
    expect(a.application).not.toBe(b.application);
    // A later turn keeps the keys of its first, and now has something a replica may hold.
    const later = promptKey({ messages: [{ role: 'user', content: 'first question' }, { role: 'assistant', content: 'x' }, { role: 'user', content: 'more' }] }, TENANT)!;
    expect(later).toEqual({ ...a, shared: true });
  });

  it('count as shared only once there are earlier turns (a lone first user message is cached nowhere)', () => {
    expect(promptKey({ messages: [{ role: 'user', content: 'first question' }] }, TENANT)!.shared).toBe(false);
    expect(promptKey({ messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: 'a' }] }, TENANT)!.shared).toBe(true);
    expect(promptKey({ messages: [{ role: 'system', content: 's' }, { role: 'user', content: 'q' }] }, TENANT)!.shared).toBe(true);
    expect(promptKey({ messages: [{ role: 'user', content: 'q' }], tools: [{ type: 'function', function: { name: 'f' } }] }, TENANT)!.shared).toBe(true);
    expect(promptKey({ messages: [{ role: 'system', content: 'only instructions' }] }, TENANT)!.shared).toBe(true);
    expect(promptKey({ prompt: 'a completions prompt' }, TENANT)!.shared).toBe(true);
  });
});

describe('promptKey: tenants', () => {
  const OTHER = 'ws_b';

  it('keys one prompt of two workspaces apart (chat with and without instructions, tools, completions), and alike within one', () => {
    const bodies: Array<Record<string, unknown>> = [
      { messages: [SYSTEM, FIRST_USER] },
      { messages: [FIRST_USER] },
      { messages: [FIRST_USER], tools: [{ type: 'function', function: { name: 'f' } }] },
      { prompt: 'Translate the following into French. The cat sleeps.' },
    ];
    for (const body of bodies) {
      const mine = keyOf(body);
      const theirs = keyOf(body, OTHER);
      expect(theirs.application).not.toBe(mine.application);
      expect(theirs.conversation).not.toBe(mine.conversation);
      expect(theirs.shared).toBe(mine.shared);
      expect(keyOf(body)).toEqual(mine);
    }
  });

  it('does not let a tenant name fold into the prompt (the tenant is delimited)', () => {
    // "ws_a" + "Xprompt" must not key as "ws_aX" + "prompt".
    expect(keyOf({ prompt: 'Xprompt' }, 'ws_a')).not.toEqual(keyOf({ prompt: 'prompt' }, 'ws_aX'));
    expect(chat([SYSTEM, FIRST_USER], {}, 'ws_a')).not.toEqual(chat([SYSTEM, FIRST_USER], {}, 'ws_a\u0000'));
  });

  it('ranks two workspaces\' equal prompts independently: the same first replica only as often as chance gives', () => {
    const candidates: RouteCandidate[] = Array.from({ length: 8 }, (_, index) => ({ replicaId: `rep_${index}`, load: 0, capacity: 4 }));
    let together = 0;
    const prompts = 400;
    for (let index = 0; index < prompts; index++) {
      const body = { messages: [{ role: 'system', content: `Application ${index}` }, FIRST_USER] };
      const first = (tenant: string) => rankedOrder(candidates, keyOf(body, tenant), 2)[0].replicaId;
      // Within one workspace the same prompt always has the same home.
      expect(first(TENANT)).toBe(first(TENANT));
      if (first(TENANT) === first(OTHER)) together++;
    }
    // Chance is 1 in 8 (50 of 400); keyed by the prompt alone it was every one.
    expect(together).toBeLessThan(prompts / 4);
  });
});
