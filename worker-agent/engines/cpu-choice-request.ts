/** What one choice of a CPU engine answer is made from, and what it came to (cpu-choice.ts). */
import type { TokenLogprob } from './cpu-logprobs';
import type { PlannedToolCall, StructuredAnswer } from './cpu-structured-answer';
import type { GenerationRequest } from './cpu-text-generator';

export interface ChoiceRequest extends GenerationRequest {
  /** JSON or tool calls, made at planning; absent: words. */
  readonly structured?: StructuredAnswer;
  /** `top_logprobs` when `logprobs` is true; null without logprobs. */
  readonly topLogprobs: number | null;
}

export interface ChoiceAnswer {
  /** Null when the choice is tool calls. */
  readonly text: string | null;
  readonly finishReason: string;
  readonly completionTokens: number;
  readonly toolCalls?: readonly PlannedToolCall[];
  readonly logprobs?: readonly TokenLogprob[];
}
