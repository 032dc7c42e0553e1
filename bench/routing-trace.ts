/**
 * The routing benchmark's traces (bench/run-routing.ts): seeded, replayed open loop.
 *
 * - `conversationTrace`: several applications, each with its own long system prompt; many
 *   conversations per application, each of several turns. A turn re-sends the whole history
 *   (system prompt, every earlier user message and the recorded assistant answer) plus a short
 *   new user message, as a chat client does. The answers are recorded text (the trace is a
 *   replay: it cannot wait for the engine's answer), so each turn's prompt starts with the
 *   previous turn's whole prompt, which is what an engine's prefix cache can reuse.
 *   Conversations start as a Poisson process (rate / mean turns per second); a conversation's
 *   turns are 0.5–1.5 × the mean gap apart, the mean gap being `openConversations / rate`, so
 *   about `openConversations` conversations are open at any moment. Conversations start before
 *   0 as well, so the request rate is steady from the first second.
 * - `noPrefixTrace`: every request one user message of distinct random words of a similar
 *   length (nothing shared between two requests beyond the chat template), Poisson arrivals.
 *
 * Every system prompt (and every no-prefix prompt) begins with a salt naming the policy and
 * the run, so the cache one policy's run warmed never serves another's.
 */

import { seededRandom } from '../common/seeded-random';

export interface ChatMessage {
  readonly role: 'system' | 'user' | 'assistant';
  readonly content: string;
}

export interface TraceRequest {
  /** Send time, milliseconds after the run's start. */
  readonly at: number;
  readonly conversation: number;
  /** 0 for a conversation's first request. */
  readonly turn: number;
  readonly application: number;
  readonly messages: readonly ChatMessage[];
  /** Prompt tokens by the trace's unit (message contents only; the chat template adds a few). */
  readonly promptTokens: number;
}

/** How text length is counted: llama.cpp with the generated model's byte vocabulary (one token a byte), or the CPU engine's words and punctuation. */
export type TokenUnit = 'bytes' | 'words';

export interface ConversationShape {
  readonly applications: number;
  readonly systemTokens: number;
  readonly userTokens: readonly [number, number];
  readonly assistantTokens: number;
  readonly turns: readonly [number, number];
  /** Requests per second. */
  readonly rate: number;
  /** Conversations open at once (sets the mean gap between a conversation's turns). */
  readonly openConversations: number;
  readonly seconds: number;
  readonly unit: TokenUnit;
  readonly seed: number;
}

const SYLLABLES = ['ka', 'ro', 'mi', 'ten', 'sul', 'dor', 'vi', 'an', 'pel', 'quo', 'ri', 'sta', 'no', 'gar', 'lu', 'me', 'tis', 'bra', 'fen', 'os', 'cu', 'ly', 'zan', 'hep'];

/** ~2,000 pseudo-words of 1–3 syllables, the same for every seed. */
const WORDS: readonly string[] = (() => {
  const random = seededRandom(7);
  const words = new Set<string>();
  while (words.size < 2000) {
    const syllables = 1 + Math.floor(random() * 3);
    let word = '';
    for (let index = 0; index < syllables; index++) word += SYLLABLES[Math.floor(random() * SYLLABLES.length)];
    words.add(word);
  }
  return [...words];
})();

/** Tokens of `text` in `unit` (the CPU engine's tokenizer: a word or one punctuation mark). */
export function countTokens(text: string, unit: TokenUnit): number {
  if (unit === 'bytes') return Buffer.byteLength(text);
  return text.match(/\w+|[^\w\s]/g)?.length ?? 0;
}

/** Random sentences of about `tokens` tokens (never fewer), after `start` if given. */
export function randomText(random: () => number, tokens: number, unit: TokenUnit, start = ''): string {
  const parts: string[] = start ? [start] : [];
  let count = start ? countTokens(start, unit) : 0;
  let sentence = 0;
  while (count < tokens) {
    let word = WORDS[Math.floor(random() * WORDS.length)];
    sentence++;
    if (sentence >= 8 + Math.floor(random() * 8)) {
      word += '.';
      sentence = 0;
    }
    const piece = parts.length ? ` ${word}` : word;
    parts.push(piece);
    count += countTokens(piece, unit);
  }
  return parts.join('');
}

function between(random: () => number, [low, high]: readonly [number, number]): number {
  return low + Math.floor(random() * (high - low + 1));
}

function exponential(random: () => number, mean: number): number {
  return -Math.log(1 - random()) * mean;
}

export interface Trace {
  readonly requests: readonly TraceRequest[];
  readonly description: Record<string, number | string>;
}

/** The multi-turn trace; `salt` (policy and run) begins every system prompt. */
export function conversationTrace(shape: ConversationShape, salt: string): Trace {
  const random = seededRandom(shape.seed);
  // The salt goes in front of text drawn without it, so every policy's trace draws the same numbers (same timings, same conversations).
  const systems = Array.from({ length: shape.applications }, (_, application) =>
    `[${salt}] ${randomText(random, shape.systemTokens, shape.unit, `You are the assistant of application ${application + 1}. Follow these instructions exactly:`)}`);
  const meanTurns = (shape.turns[0] + shape.turns[1]) / 2;
  const meanGapMs = (shape.openConversations / shape.rate) * 1000;
  const conversationRate = shape.rate / meanTurns;
  const requests: TraceRequest[] = [];
  const endMs = shape.seconds * 1000;
  // Start early enough that conversations begun before 0 have reached their last turns by 0.
  let start = -(shape.turns[1] * meanGapMs * 1.5);
  let conversation = 0;
  while (true) {
    start += exponential(random, 1000 / conversationRate);
    if (start >= endMs) break;
    conversation++;
    const application = Math.floor(random() * shape.applications);
    const turns = between(random, shape.turns);
    const messages: ChatMessage[] = [{ role: 'system', content: systems[application] }];
    let tokens = countTokens(systems[application], shape.unit);
    let at = start;
    for (let turn = 0; turn < turns; turn++) {
      if (turn > 0) at += meanGapMs * (0.5 + random());
      if (at >= endMs) break;
      const user = randomText(random, between(random, shape.userTokens), shape.unit);
      messages.push({ role: 'user', content: user });
      tokens += countTokens(user, shape.unit);
      if (at >= 0) requests.push({ at, conversation, turn, application, messages: [...messages], promptTokens: tokens });
      const answer = randomText(random, shape.assistantTokens, shape.unit);
      messages.push({ role: 'assistant', content: answer });
      tokens += countTokens(answer, shape.unit);
    }
  }
  requests.sort((a, b) => a.at - b.at);
  return { requests, description: describe(requests, shape.seconds) };
}

export interface NoPrefixShape {
  readonly promptTokens: number;
  readonly rate: number;
  readonly seconds: number;
  readonly unit: TokenUnit;
  readonly seed: number;
}

/** Every request a distinct random prompt of `promptTokens` ± 10 % in one user message. */
export function noPrefixTrace(shape: NoPrefixShape, salt: string): Trace {
  const random = seededRandom(shape.seed);
  const requests: TraceRequest[] = [];
  let at = 0;
  for (let index = 0; ; index++) {
    at += exponential(random, 1000 / shape.rate);
    if (at >= shape.seconds * 1000) break;
    const tokens = Math.round(shape.promptTokens * (0.9 + 0.2 * random()));
    // Random words first: the salt goes after a random start, so two prompts share no prefix at all.
    const text = `${randomText(random, tokens, shape.unit)} [${salt} ${index}]`;
    requests.push({ at, conversation: index + 1, turn: 0, application: -1, messages: [{ role: 'user', content: text }], promptTokens: countTokens(text, shape.unit) });
  }
  return { requests, description: describe(requests, shape.seconds) };
}

function describe(requests: readonly TraceRequest[], seconds: number): Record<string, number> {
  const prompt = requests.reduce((sum, request) => sum + request.promptTokens, 0);
  const conversations = new Set(requests.map((request) => request.conversation)).size;
  const firstTurns = requests.filter((request) => request.turn === 0).length;
  return {
    requests: requests.length, requestsPerSecond: Math.round((requests.length / seconds) * 100) / 100, conversations,
    firstTurnShare: requests.length ? Math.round((firstTurns / requests.length) * 1000) / 1000 : 0,
    meanPromptTokens: requests.length ? Math.round(prompt / requests.length) : 0,
    maxPromptTokens: requests.reduce((max, request) => Math.max(max, request.promptTokens), 0),
  };
}

/**
 * Prompt tokens a request must evaluate when the engine holds everything it could (the
 * previous turn's prompt, or for a first turn the application's system prompt): its new part.
 */
export function newTokensPerRequest(requests: readonly TraceRequest[], unit: TokenUnit): number {
  if (requests.length === 0) return 0;
  let total = 0;
  for (const request of requests) {
    const messages = request.messages;
    // The new user message, plus the previous answer on later turns (first turns: the system prompt is cached).
    total += countTokens(messages[messages.length - 1].content, unit) + (request.turn > 0 ? countTokens(messages[messages.length - 2].content, unit) : 0);
  }
  return total / requests.length;
}
