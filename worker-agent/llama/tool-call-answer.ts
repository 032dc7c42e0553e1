/**
 * Reading a finished answer as tool calls when the request had tools (llama-tools.ts), and
 * holding a streamed answer back while it may be calls: the calls are streamed once whole, in
 * OpenAI's `delta.tool_calls` shape, so arguments never reach a client half-written.
 */
import type { LlamaRequestPlan } from './llama-request';
import type { FinishedChoice } from './llama-response-format';
import { parseToolCalls } from './llama-tools';

/**
 * The choice as the client gets it: with tools, an answer the grammar completed as an array of
 * calls is those calls (finish_reason `tool_calls`); cut short by max_tokens it stays text
 * ("length"), as OpenAI returns whatever was generated.
 */
export function finishChoice(plan: LlamaRequestPlan, choice: FinishedChoice): FinishedChoice {
  if (plan.output.kind !== 'tools' || choice.finishReason !== 'stop') return choice;
  const toolCalls = parseToolCalls(choice.text);
  return toolCalls ? { text: '', finishReason: 'tool_calls', toolCalls } : choice;
}

/** Streams text at once when the answer is plain text; holds it when it starts as calls (`[`). */
export class ToolCallStream {
  private held: string | null = null;
  private decided = false;

  constructor(private readonly sendText: (text: string) => Promise<void> | undefined) {}

  push(text: string): Promise<void> | undefined {
    if (!this.decided && text.length > 0) {
      this.decided = true;
      if (text.startsWith('[')) this.held = '';
    }
    if (this.held === null) return this.sendText(text);
    this.held += text;
    return undefined;
  }

  /** The answer was not calls after all (cut by max_tokens): what was held goes out as text. */
  async flush(): Promise<void> {
    if (this.held) await this.sendText(this.held);
    this.held = null;
  }
}
