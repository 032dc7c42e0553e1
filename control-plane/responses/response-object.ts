import type { ResponseItem, ResponseSettings, ResponseStatus, ResponseUsage } from './response-items';

/** What a Response object is made of, stored or still running. */
export interface ResponseState {
  id: string;
  createdAt: Date;
  status: ResponseStatus;
  model: string;
  output: ResponseItem[];
  usage: ResponseUsage | null;
  error: { code: string; message: string } | null;
  incompleteDetails: { reason: string } | null;
  previousResponseId: string | null;
  settings: ResponseSettings;
}

/** The Response object in OpenAI's shape (`output_text` is left to the SDKs, which compute it from `output`). */
export function responseObject(state: ResponseState): Record<string, unknown> {
  const { settings } = state;
  return {
    id: state.id,
    object: 'response',
    created_at: Math.floor(state.createdAt.getTime() / 1000),
    status: state.status,
    background: settings.background,
    error: state.error,
    incomplete_details: state.incompleteDetails,
    instructions: settings.instructions,
    max_output_tokens: settings.max_output_tokens,
    metadata: settings.metadata,
    model: state.model,
    output: state.output,
    parallel_tool_calls: settings.parallel_tool_calls,
    previous_response_id: state.previousResponseId,
    reasoning: { effort: null, summary: null },
    store: settings.store,
    temperature: settings.temperature,
    text: settings.text,
    tool_choice: settings.tool_choice,
    tools: settings.tools,
    top_p: settings.top_p,
    truncation: settings.truncation,
    usage: state.usage,
    user: settings.user,
  };
}
