/**
 * An agent's adapter_load_failed as the client sees it (openai/openai-error.ts): weights that
 * cannot load are a 422 naming model; a fetch of them that failed is the platform's 502.
 */
import { jobFailureError, openAiErrorResponse } from '../../control-plane/openai/openai-error';

const failure = (engineStatus: number) => ({ code: 'adapter_load_failed', message: 'adapter rank 128 is above the engine\'s max_lora_rank 64', engineStatus, engineBody: null, usage: undefined });

describe('adapter_load_failed', () => {
  test('malformed weights, another base or too big a rank: 422 adapter_load_failed naming model', () => {
    const answer = openAiErrorResponse(jobFailureError(failure(422)));
    expect(answer.status).toBe(422);
    expect(JSON.parse(answer.body.toString())).toEqual({
      error: { message: 'adapter rank 128 is above the engine\'s max_lora_rank 64', type: 'invalid_request_error', param: 'model', code: 'adapter_load_failed' },
    });
  });

  test('the weights could not be fetched: 502 upstream_error naming model', () => {
    const answer = openAiErrorResponse(jobFailureError(failure(502)));
    expect(answer.status).toBe(502);
    expect(JSON.parse(answer.body.toString()).error).toMatchObject({ code: 'upstream_error', param: 'model' });
  });
});
