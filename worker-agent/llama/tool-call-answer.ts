/**
 * Reading an answer as tool calls when the request had tools (llama-tools.ts): a finished one
 * as a whole, a streamed one piece by piece in OpenAI's `delta.tool_calls` shape.
 */
import type { LlamaRequestPlan } from './llama-request';
import type { FinishedChoice } from './llama-response-format';
import { ToolCallScanner } from './tool-call-scanner';
import { parseToolCalls, toolCallId } from './llama-tools';

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

/** Where a streamed answer's pieces go: text, or the calls' starts and argument fragments. */
export interface ToolCallSink {
  text(text: string): Promise<void> | undefined;
  callStart(position: number, id: string, name: string): Promise<void> | undefined;
  callArguments(position: number, text: string): Promise<void> | undefined;
}

/**
 * Streams a plain-text answer as text; an answer that starts with `[` (the calls' array) as
 * calls: each call's start once its name is whole, then its arguments as they come.
 */
export class ToolCallStream {
  private scanner: ToolCallScanner | null = null;
  private decided = false;

  constructor(private readonly sink: ToolCallSink) {}

  /** Whether the answer is calls (known from its first character on). */
  get isCalls(): boolean {
    return this.scanner !== null;
  }

  async push(text: string): Promise<void> {
    if (!this.decided && text.length > 0) {
      this.decided = true;
      if (text.startsWith('[')) this.scanner = new ToolCallScanner();
    }
    if (!this.scanner) {
      await this.sink.text(text);
      return;
    }
    for (const part of this.scanner.push(text)) {
      if (part.kind === 'start') await this.sink.callStart(part.position, toolCallId(), part.name);
      else await this.sink.callArguments(part.position, part.text);
    }
  }
}
