/**
 * Paces a planned CPU completion out in time: time to first token, tokens per second, and
 * the test switches that make it fail or kill its process after K tokens.
 */
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import type { CpuEngineBehaviour } from './cpu-engine-options';
import type { CpuCompletionPlan } from './cpu-request';
import { chunkFormat, DONE_EVENT, renderCompletionBody } from './cpu-response-format';
import { EngineFailure } from './engine-failure';

// Without a rate limit, yield to the event loop this often so a long generation never
// starves I/O (cancels, heartbeats) of the process it runs in.
const STEPS_PER_TURN = 64;

/** The whole non-streamed body, after the time a real engine would take to produce it. */
export async function cpuResponseBody(plan: CpuCompletionPlan, signal?: AbortSignal): Promise<Buffer> {
  const tokens = plan.usage.completion_tokens;
  const limit = Math.min(tokens, plan.behaviour.failAfterTokens ?? Infinity, plan.behaviour.crashAfterTokens ?? Infinity);
  await pause(plan.behaviour.ttftMs + limit * intervalOf(plan.behaviour), signal);
  const budget = new TokenBudget(plan.behaviour);
  for (let token = 0; token < tokens; token += 1) budget.spend();
  return renderCompletionBody(plan);
}

/** SSE bytes, one buffer per generation step (one token of every unfinished choice). */
export async function* cpuEventStream(plan: CpuCompletionPlan, signal?: AbortSignal): AsyncGenerator<Buffer> {
  const format = chunkFormat(plan);
  const interval = intervalOf(plan.behaviour);
  const budget = new TokenBudget(plan.behaviour);
  await pause(plan.behaviour.ttftMs, signal);
  const startedAt = performance.now();
  const steps = Math.max(1, ...plan.choices.map((choice) => choice.pieces.length));
  let text = plan.choices.map((_, index) => format.role(index)).join('');
  for (let step = 0; step < steps; step += 1) {
    if (step > 0 && interval > 0) await pause(startedAt + step * interval - performance.now(), signal);
    else if (step > 0 && step % STEPS_PER_TURN === 0) await nextTurn(undefined, { signal });
    plan.choices.forEach((choice, index) => {
      if (step < choice.pieces.length) {
        budget.spend();
        text += format.content(index, choice.pieces[step]);
      }
      if (step === Math.max(0, choice.pieces.length - 1)) text += format.finish(index, choice.finishReason);
    });
    yield Buffer.from(text);
    text = '';
  }
  yield Buffer.from((plan.includeUsage ? format.usage() : '') + DONE_EVENT);
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
