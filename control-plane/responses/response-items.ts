/**
 * The Responses API's shapes as the platform keeps them (docs/api-contract.md#responses-api).
 * Items are stored as OpenAI names them, so `GET /responses/{id}` and `input_items` answer them
 * as they were sent; engines never see them (responses-to-chat.ts turns them into chat).
 */

export type InputContentPart =
  | { type: 'input_text'; text: string }
  | { type: 'input_image'; image_url: string; detail: 'auto' | 'low' | 'high' }
  | { type: 'output_text'; text: string; annotations: unknown[] };

export interface MessageItem {
  id: string;
  type: 'message';
  role: 'user' | 'system' | 'developer' | 'assistant';
  status?: 'completed' | 'incomplete' | 'in_progress';
  content: InputContentPart[];
}

export interface FunctionCallItem {
  id: string;
  type: 'function_call';
  call_id: string;
  name: string;
  arguments: string;
  status: 'completed' | 'incomplete' | 'in_progress';
}

export interface FunctionCallOutputItem {
  id: string;
  type: 'function_call_output';
  call_id: string;
  output: string;
  status?: 'completed';
}

export type ResponseItem = MessageItem | FunctionCallItem | FunctionCallOutputItem;

/** A function tool in the Responses API's flat shape. */
export interface FunctionTool {
  type: 'function';
  name: string;
  description?: string | null;
  parameters: Record<string, unknown> | null;
  strict: boolean | null;
}

export type ToolChoice = 'none' | 'auto' | 'required' | { type: 'function'; name: string };

export type TextFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; name: string; schema: Record<string, unknown>; strict: boolean | null; description?: string };

export type ResponseStatus = 'queued' | 'in_progress' | 'completed' | 'incomplete' | 'failed' | 'cancelled';

export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

/** A create request, validated (control-plane/openai/responses-request.ts): every field with its default. */
export interface ResponsesRequest {
  model: string | undefined;
  /** This turn's input, as items with ids. */
  input: ResponseItem[];
  instructions: string | null;
  previousResponseId: string | null;
  store: boolean;
  stream: boolean;
  background: boolean;
  maxOutputTokens: number | null;
  temperature: number | null;
  topP: number | null;
  tools: FunctionTool[];
  toolChoice: ToolChoice;
  parallelToolCalls: boolean;
  text: { format: TextFormat };
  metadata: Record<string, string>;
  truncation: 'disabled' | 'auto';
  user: string | null;
}

/** The request fields a Response object echoes (stored as they were asked). */
export interface ResponseSettings {
  instructions: string | null;
  max_output_tokens: number | null;
  temperature: number | null;
  top_p: number | null;
  tools: FunctionTool[];
  tool_choice: ToolChoice;
  parallel_tool_calls: boolean;
  text: { format: TextFormat };
  metadata: Record<string, string>;
  truncation: 'disabled' | 'auto';
  store: boolean;
  background: boolean;
  user: string | null;
}

export function settingsOf(request: ResponsesRequest): ResponseSettings {
  return {
    instructions: request.instructions, max_output_tokens: request.maxOutputTokens, temperature: request.temperature, top_p: request.topP,
    tools: request.tools, tool_choice: request.toolChoice, parallel_tool_calls: request.parallelToolCalls, text: request.text,
    metadata: request.metadata, truncation: request.truncation, store: request.store, background: request.background, user: request.user,
  };
}
