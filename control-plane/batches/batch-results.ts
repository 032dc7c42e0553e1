import { newId } from '../ids';
import type { LineResponse } from './batch-line-handler';

/**
 * The lines of a batch's output and error files, in OpenAI's batch output format: every line
 * `{"id": "batch_req_…", "custom_id", "response": {"status_code", "request_id", "body"} | null,
 * "error": {"code", "message"} | null}`. A line an engine (or our checks) answered carries the
 * answer as `response`, 2xx in the output file and 4xx/5xx in the error file; a line that never
 * got an answer (the window passed, the batch was cancelled, its replica failed twice) carries
 * `error` and no response. Built as text so an engine's body goes in byte for byte.
 */

/** A line's answer: `body` is the JSON text the endpoint answered. */
export function responseLine(customId: string, response: LineResponse): string {
  return `{"id":${JSON.stringify(newId('batch_req'))},"custom_id":${JSON.stringify(customId)},`
    + `"response":{"status_code":${response.statusCode},"request_id":${JSON.stringify(newId('req'))},"body":${response.body}},"error":null}`;
}

/** A line that got no answer. */
export function errorLine(customId: string, code: BatchLineErrorCode, message: string): string {
  return JSON.stringify({ id: newId('batch_req'), custom_id: customId, response: null, error: { code, message } });
}

/**
 * `batch_expired` and `batch_cancelled` are OpenAI's; `replica_lost` is ours: the line's replica
 * (or the server running it) failed while it ran, twice, and a line never runs a third time;
 * so is `input_unavailable`: its body could not be read from the input file's object (removed
 * from storage outside the platform, or cut short), so it never ran.
 */
export type BatchLineErrorCode = 'batch_expired' | 'batch_cancelled' | 'replica_lost' | 'input_unavailable';

export const LINE_ERROR_MESSAGES: Record<BatchLineErrorCode, string> = {
  batch_expired: 'This request could not be executed before the completion window expired.',
  batch_cancelled: 'This request was not executed: the batch was cancelled first.',
  replica_lost: 'The replica running this request stopped before answering, twice; it was not run a third time.',
  input_unavailable: "This request was not executed: its bytes could not be read from the batch's input file in storage.",
};

/** Whether a status code goes to the output file (2xx) or the error file. */
export function succeeded(statusCode: number): boolean {
  return statusCode >= 200 && statusCode < 300;
}
