import type { CatalogModel } from '../catalog/catalog';
import { asAppError } from '../database/database-unavailable';
import type { JobFailure, JobListener } from '../dispatch/job';
import { AppError } from '../errors/app-error';
import type { BatchEndpoint } from '../batches/batch.entities';
import {
  LOST_JOB_CODES, type BatchLineHandler, type LineCheck, type LineJobSender, type LineResponse, type LineRun,
} from '../batches/batch-line-handler';
import type { Usage } from '../../proto/worker/v1';
import { jobFailureError, openAiErrorResponse } from './openai-error';
import { assembleEmbeddingLists } from './embedding-lists';
import { splitEmbeddingsRequest } from './embedding-batches';
import { parseEmbeddingsRequest } from './embeddings-request';
import { parseTextRequest } from './text-request';
import { refuseToolsWithoutParser } from '../pipeline/tool-support';
import { parseJsonText } from '../../common/json-nesting';
import { chatAnswerToResult, usageOf } from '../responses/chat-to-response';
import { settingsOf, type ResponsesRequest } from '../responses/response-items';
import { responseObject } from '../responses/response-object';
import { responsesToChat } from '../responses/responses-to-chat';
import { itemId as newId } from '../responses/response-ids';
import { parseResponsesRequest } from './responses-request';

const NO_USAGE: Usage = { promptTokens: 0, completionTokens: 0, totalTokens: 0 };

/**
 * Batch lines as the live endpoints see requests (control-plane/batches/batch-line-handler.ts):
 * a line's body is checked by the very parser of its endpoint, run as the same jobs, and
 * answered with the same body, or the same error body and status, a live call would get (the
 * OpenAI wire form, which the output line records). The batch runner runs lines; what a request
 * means is here, in the OpenAI request model the gateway's routes use too.
 */
export class OpenAiBatchLines implements BatchLineHandler {
  check(endpoint: BatchEndpoint, model: CatalogModel, body: Buffer): LineCheck {
    try {
      if (endpoint === '/v1/embeddings') return { ok: true, fields: parseEmbeddingsRequest(body, model.id, embeddingLimits(model)).fields };
      if (endpoint === '/v1/responses') return { ok: true, fields: batchResponseLine(body, model).chat };
      const request = parseTextRequest(body, endpoint === '/v1/chat/completions' ? 'chat.completions' : 'completions');
      refuseToolsWithoutParser(model, request.fields);
      if (request.stream) {
        throw new AppError('invalid_request', 'stream must be false or absent in a batch request: a batch answers each request whole, in the output file', { param: 'stream' });
      }
      return { ok: true, fields: request.fields };
    } catch (error) {
      return { ok: false, response: this.render(asAppError(error)) };
    }
  }

  async run(endpoint: BatchEndpoint, model: CatalogModel, body: Buffer, send: LineJobSender, answeredAs?: string): Promise<LineRun> {
    try {
      // Chat and completions: the agent already renames the engine's `model` to the job's (the adapter's name).
      if (endpoint === '/v1/responses') return await runResponseLine(body, model, send, answeredAs ?? model.id);
      if (endpoint !== '/v1/embeddings') return await runJob(body, send);
      return await this.runEmbeddings(model, body, send);
    } catch (error) {
      // Only a bug gets here (the parsers ran at validation); answered as the endpoint answers one.
      return { kind: 'answered', response: this.render(asAppError(error)), usage: NO_USAGE };
    }
  }

  render(error: AppError): LineResponse {
    return renderAppError(error);
  }

  /**
   * An embeddings line of more inputs than the model's batch is several jobs, as a live request
   * is, but one after the other: a line holds one slot at a time. Their answers are put back in
   * input order and their usage summed; the first failure ends the line.
   */
  private async runEmbeddings(model: CatalogModel, body: Buffer, send: LineJobSender): Promise<LineRun> {
    const limits = embeddingLimits(model);
    const parts = splitEmbeddingsRequest(body, parseEmbeddingsRequest(body, model.id, limits), limits.maxBatchInputs);
    const outputs: Buffer[] = [];
    let usage: Usage = NO_USAGE;
    for (const part of parts) {
      const outcome = await runJob(part.body, send, true);
      usage = { promptTokens: usage.promptTokens + outcome.usage.promptTokens, completionTokens: 0, totalTokens: usage.totalTokens + outcome.usage.totalTokens };
      if (outcome.kind === 'lost') return { ...outcome, usage };
      if (outcome.response.statusCode !== 200) return { ...outcome, usage, response: renumbered(outcome.response, part.offset) };
      outputs.push(Buffer.from(outcome.response.body));
    }
    const answer = parts.length === 1 ? outputs[0] : assembleEmbeddingLists(parts, outputs);
    return { kind: 'answered', response: { statusCode: 200, body: answer.toString('utf8') }, usage };
  }
}

/** One job to its end: the engine's whole body (200), its refusal or failure as the endpoint renders it, or lost. */
function runJob(body: Buffer, send: LineJobSender, embeddings = false): Promise<LineRun> {
  return new Promise<LineRun>((resolve) => {
    let output: Buffer | null = null;
    const listener: JobListener = {
      onChunk: () => {},
      onOutput: (data) => (output = data),
      onCompleted: (usage) => resolve(answered(output, usage ?? NO_USAGE)),
      onFailed: (failure) => resolve(failed(failure, embeddings)),
    };
    try {
      send(body, listener);
    } catch (error) {
      const appError = asAppError(error);
      resolve({ kind: 'lost', failure: { code: 'agent_draining', message: appError.message }, usage: NO_USAGE });
    }
  });
}

function answered(output: Buffer | null, usage: Usage): LineRun {
  const text = output?.toString('utf8') ?? '';
  try {
    parseJsonText(text);
  } catch {
    return { kind: 'answered', response: renderAppError(new AppError('upstream_error', 'the engine answered with a body that is not JSON')), usage };
  }
  return { kind: 'answered', response: { statusCode: 200, body: text }, usage };
}

function failed(failure: JobFailure, embeddings: boolean): LineRun {
  const usage = failure.usage ?? NO_USAGE;
  if (LOST_JOB_CODES.has(failure.code)) return { kind: 'lost', failure: { code: failure.code, message: failure.message }, usage };
  const error = jobFailureError(failure);
  // An embeddings refusal names its input; the live route gives it as `param` (embedding-batches.ts).
  const param = embeddings && failure.code === 'invalid_job' ? (/\binput\[\d+\]/.exec(error.message)?.[0] ?? 'input') : null;
  return { kind: 'answered', response: renderAppError(param ? new AppError('invalid_request', error.message, { param }) : error), usage };
}

/** An engine's refusal of one part names inputs by their index in that part: renumbered to the line's. */
function renumbered(response: LineResponse, offset: number): LineResponse {
  if (offset === 0) return response;
  return { ...response, body: response.body.replace(/\binput\[(\d+)\]/g, (_match, index: string) => `input[${offset + Number(index)}]`) };
}

/**
 * A `/v1/responses` line: checked by the live route's parser, run as the chat it translates to,
 * answered with the Response object (`store: false`). A batch answers each line in its output
 * file: such a line is not stored, so `store: true` is refused, and so is `previous_response_id`
 * (a line stands alone), `stream` and `background`.
 */
function batchResponseLine(body: Buffer, model: CatalogModel): { request: ResponsesRequest; chat: Record<string, unknown> } {
  const fields = parseJsonText(body) as Record<string, unknown>;
  const request = parseResponsesRequest(body);
  if (request.stream) throw new AppError('invalid_request', 'stream must be false or absent in a batch request: a batch answers each request whole, in the output file', { param: 'stream' });
  if (request.background) throw new AppError('invalid_request', 'background must be false or absent in a batch request', { param: 'background' });
  if (request.previousResponseId !== null) throw new AppError('invalid_request', 'previous_response_id is not allowed in a batch request: each line stands alone', { param: 'previous_response_id' });
  if (fields.store === true) throw new AppError('invalid_request', 'store must be false or absent in a batch request: its answer is the output file\'s line, never stored', { param: 'store' });
  return { request, chat: responsesToChat(request, [], model.id) };
}

async function runResponseLine(body: Buffer, model: CatalogModel, send: LineJobSender, answeredAs: string): Promise<LineRun> {
  const { request, chat } = batchResponseLine(body, model);
  const createdAt = new Date();
  const outcome = await runJob(Buffer.from(JSON.stringify(chat)), send);
  if (outcome.kind === 'lost' || outcome.response.statusCode !== 200) return outcome;
  const result = chatAnswerToResult(parseJsonText(outcome.response.body) as Record<string, unknown>);
  result.usage ??= usageOf({ prompt_tokens: outcome.usage.promptTokens, completion_tokens: outcome.usage.completionTokens, total_tokens: outcome.usage.totalTokens });
  const object = responseObject({
    id: newId('resp'), createdAt, status: result.status, model: answeredAs, output: result.output, usage: result.usage, error: null,
    incompleteDetails: result.incompleteDetails, previousResponseId: null, settings: { ...settingsOf(request), store: false },
  });
  return { ...outcome, response: { statusCode: 200, body: JSON.stringify(object) } };
}

function renderAppError(error: AppError): LineResponse {
  const rendered = openAiErrorResponse(error);
  return { statusCode: rendered.status, body: rendered.body.toString('utf8') };
}

function embeddingLimits(model: CatalogModel): NonNullable<CatalogModel['embedding']> {
  if (model.task !== 'embedding' || !model.embedding) throw new AppError('unsupported_endpoint', `'${model.id}' is not an embedding model`);
  return model.embedding;
}
