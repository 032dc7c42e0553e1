/**
 * Paces a planned CPU completion out in time: time to first token, tokens per second, and
 * the test switches that make it fail or kill its process after K tokens.
 */
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import type { CpuEngineBehaviour } from './cpu-engine-options';
import type { CpuCompletionPlan } from './cpu-request';
import { chunkFormat, DONE_EVENT, renderCompletionBody, usageOf } from './cpu-response-format';
import { cpuChoice, type ChoiceAnswer } from './cpu-choice';
import { EngineFailure } from './engine-failure';
import type { CpuPrefixSimulator } from './cpu-prefix-cache';
import type { JobPreemption } from '../job-preemption';

// Without a rate limit, yield to the event loop this often so a long generation never
// starves I/O (cancels, heartbeats) of the process it runs in.
const STEPS_PER_TURN = 64;

/**
 * The whole non-streamed body, after the time a real engine would take to produce it. With a
 * `prefix` simulation, the prompt's prefill (its turn on the engine's lane, then its uncached
 * tokens) comes first and the usage reports the cached tokens. With a `preemption` (a batch
 * line), the time stands still while the line is paused and each resume adds the time to
 * first token again (its prefill recomputed).
 */
export async function cpuResponseBody(plan: CpuCompletionPlan, signal?: AbortSignal, prefix?: CpuPrefixSimulator, preemption?: JobPreemption): Promise<Buffer> {
  const cachedTokens = prefix ? (await prefix.prefill(plan.prompts, signal, plan.cacheSalt)).cachedTokens : undefined;
  const answers = await generateAnswers(plan, signal);
  const tokens = answers.reduce((sum, answer) => sum + answer.completionTokens, 0);
  const limit = Math.min(tokens, plan.behaviour.failAfterTokens ?? Infinity, plan.behaviour.crashAfterTokens ?? Infinity);
  const engineMs = plan.behaviour.ttftMs + limit * intervalOf(plan.behaviour);
  if (preemption) await preemption.sleep(engineMs, plan.behaviour.ttftMs, signal);
  else await pause(engineMs, signal);
  const budget = new TokenBudget(plan.behaviour);
  for (let token = 0; token < tokens; token += 1) budget.spend();
  return renderCompletionBody(plan, answers, usageOf(plan, tokens, cachedTokens));
}

/**
 * SSE bytes, one buffer per generation step (one token of every unfinished choice). A choice's
 * finish event goes out in the step of its last token, so each choice is read one token ahead.
 * With a `prefix` simulation, the prompt's prefill comes before the first token and the usage
 * chunk (include_usage) reports the cached tokens.
 */
export async function* cpuEventStream(plan: CpuCompletionPlan, signal?: AbortSignal, prefix?: CpuPrefixSimulator): AsyncGenerator<Buffer> {
  const format = chunkFormat(plan);
  const interval = intervalOf(plan.behaviour);
  const budget = new TokenBudget(plan.behaviour);
  const cachedTokens = prefix ? (await prefix.prefill(plan.prompts, signal, plan.cacheSalt)).cachedTokens : undefined;
  await pause(plan.behaviour.ttftMs, signal);
  const startedAt = performance.now();
  const generators = plan.choices.map(cpuChoice);
  let text = generators.map((generator, index) => generator.opening(format, index)).join('');
  const upcoming = generators.map((generator, index) => generator.nextEvents(format, index));
  for (let step = 0, unfinished = true; unfinished; step += 1) {
    if (step > 0 && interval > 0) await pause(startedAt + step * interval - performance.now(), signal);
    else if (step > 0 && step % STEPS_PER_TURN === 0) await nextTurn(undefined, { signal });
    unfinished = false;
    generators.forEach((generator, index) => {
      const events = upcoming[index];
      if (events === undefined) {
        // A choice with no token at all finishes in the first step.
        if (step === 0) text += format.finish(index, generator.finishReason);
        return;
      }
      budget.spend();
      text += events;
      upcoming[index] = generator.nextEvents(format, index);
      if (upcoming[index] === undefined) text += format.finish(index, generator.finishReason);
      else unfinished = true;
    });
    yield Buffer.from(text);
    text = '';
  }
  const completionTokens = generators.reduce((sum, generator) => sum + generator.completionTokens, 0);
  yield Buffer.from((plan.includeUsage ? format.usage(usageOf(plan, completionTokens, cachedTokens)) : '') + DONE_EVENT);
}

/**
 * Every choice's whole text, made a step (a token of each choice) at a time and yielding to the
 * event loop as a stream does: 16 choices of 65,536 tokens take a few hundred milliseconds,
 * during which the agent must still answer its control plane.
 */
async function generateAnswers(plan: CpuCompletionPlan, signal?: AbortSignal): Promise<ChoiceAnswer[]> {
  const generators = plan.choices.map(cpuChoice);
  for (let step = 0, unfinished = true; unfinished; step += 1) {
    if (step > 0 && step % STEPS_PER_TURN === 0) await nextTurn(undefined, { signal });
    unfinished = false;
    for (const generator of generators) if (generator.advance()) unfinished = true;
  }
  return generators.map((generator) => generator.answer());
}

/** Counts generated tokens and trips the fail / crash switches when their K is reached. */
class TokenBudget {
  private spent = 0;

  constructor(private readonly behaviour: CpuEngineBehaviour) {}

  spend(): void {
    if (this.behaviour.crashAfterTokens !== undefined && this.spent >= this.behaviour.crashAfterTokens) {
      // Simulates an OOM-killed engine process: no cleanup, no goodbye frame.
      process.kill(process.pid, 'SIGKILL');
    }
    if (this.behaviour.failAfterTokens !== undefined && this.spent >= this.behaviour.failAfterTokens) {
      throw new EngineFailure('engine_error', `cpu engine failed after ${this.spent} tokens (fail switch)`);
    }
    this.spent += 1;
  }
}

function intervalOf(behaviour: CpuEngineBehaviour): number {
  return behaviour.tokensPerSecond > 0 ? 1000 / behaviour.tokensPerSecond : 0;
}

async function pause(milliseconds: number, signal?: AbortSignal): Promise<void> {
  signal?.throwIfAborted();
  if (milliseconds > 0) await sleep(milliseconds, undefined, { signal });
}
