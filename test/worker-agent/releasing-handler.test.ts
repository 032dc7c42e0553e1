import type { Dispatcher } from 'undici';
import { EngineCall, ReleasingHandler } from '../../worker-agent/engines/engine-call';
import { forwardJsonBody } from '../../worker-agent/engines/engine-response';
import type { EngineResult } from '../../worker-agent/engines/engine';
import { JobCancellation } from '../../worker-agent/job-cancellation';

/**
 * undici keeps finished requests (and their handlers) queued for a while; what it holds must
 * not keep the job alive. The wrapper forwards every callback until the response ends, then
 * lets go of the call: nothing it receives afterwards reaches the job.
 */
describe('ReleasingHandler', () => {
  const controller = { abort: () => {}, pause: () => {}, resume: () => {} } as unknown as Dispatcher.DispatchController;
  const body = Buffer.from(JSON.stringify({ choices: [{ message: { content: 'hi' }, finish_reason: 'stop' }], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } }));

  function call() {
    const outputs: Buffer[] = [];
    const sink = { chunk: () => undefined, output: (data: Buffer) => void outputs.push(data) };
    let resolveResult!: (result: EngineResult) => void;
    const result = new Promise<EngineResult>((resolve) => (resolveResult = resolve));
    const engineCall = new EngineCall(null, sink, new JobCancellation(), () => 'prompt', 'http://engine', forwardJsonBody, resolveResult, () => {});
    return { engineCall, outputs, result };
  }

  it('passes a whole response on, then lets go of the call', async () => {
    const { engineCall, outputs, result } = call();
    const onResponseEnd = jest.spyOn(engineCall, 'onResponseEnd');
    const onResponseData = jest.spyOn(engineCall, 'onResponseData');
    const handler = new ReleasingHandler(engineCall);
    handler.onRequestStart(controller);
    handler.onResponseStart(controller, 200);
    handler.onResponseData(controller, body);
    handler.onResponseEnd();
    expect((await result).usage.totalTokens).toBe(4);
    expect(outputs).toEqual([body]);
    // Late callbacks (undici's queue, an error after the end) reach nothing.
    handler.onResponseData(controller, Buffer.from('late'));
    handler.onResponseEnd();
    handler.onResponseError(controller, new Error('late'));
    expect(onResponseData).toHaveBeenCalledTimes(1);
    expect(onResponseEnd).toHaveBeenCalledTimes(1);
  });

  it('hands an error to the call once and then lets go of it', () => {
    const { engineCall } = call();
    const onResponseError = jest.spyOn(engineCall, 'onResponseError');
    const handler = new ReleasingHandler(engineCall);
    handler.onRequestStart(controller);
    handler.onResponseError(controller, new Error('connection refused'));
    handler.onResponseEnd();
    handler.onResponseError(controller, new Error('again'));
    expect(onResponseError).toHaveBeenCalledTimes(1);
  });
});
