/**
 * One request to an HTTP engine on undici's dispatch API: the response arrives as callbacks,
 * without the Readable body stream, async iterator and AbortSignal that `request()` builds per
 * call (together about a third of the agent's CPU per request in the profile).
 */
import type { Dispatcher } from 'undici';
import type { Usage } from '../../proto/worker/v1/index';
import type { JobCancellation } from '../job-cancellation';
import type { EngineResult, EngineSink } from './engine';
import { EngineFailure, withUsage } from './engine-failure';
import type { StreamForwarder } from './engine-response';
import type { ModelRename } from './model-rename';
import { estimateUsage } from './usage-estimate';

export class EngineCall implements Dispatcher.DispatchHandler {
  private status = 0;
  private responded = false;
  private settled = false;
  private readonly parts: Buffer[] = [];

  constructor(
    /** Set for streamed jobs; null when the engine answers with one JSON body. */
    private readonly forwarder: StreamForwarder | null,
    private readonly sink: EngineSink,
    private readonly cancellation: JobCancellation,
    private readonly promptText: () => string,
    private readonly engineUrl: string,
    /** Reads a whole (not streamed) answer for its usage and passes it on: forwardJsonBody or forwardEmbeddingsBody. */
    private readonly forwardBody: (body: Buffer, sink: EngineSink, promptText: () => string, rename?: ModelRename) => Promise<EngineResult>,
    private readonly resolve: (result: EngineResult) => void,
    private readonly reject: (error: unknown) => void,
    /** The engine's model name to answer as the catalog model in a whole body (a stream's forwarder has its own). */
    private readonly rename?: ModelRename,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.cancellation.onAbort((reason) => controller.abort(reason));
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number): void {
    this.status = statusCode;
    this.responded = true;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.status >= 400 || !this.forwarder) {
      this.parts.push(chunk);
      return;
    }
    let pending: Promise<void> | undefined;
    try {
      pending = this.forwarder.push(chunk);
    } catch (error) {
      controller.abort(error as Error);
      return;
    }
    if (pending) {
      controller.pause();
      pending.then(() => controller.resume(), (error) => controller.abort(error));
    }
  }

  onResponseEnd(): void {
    const body = this.parts.length === 1 ? this.parts[0] : Buffer.concat(this.parts);
    if (this.status >= 400) {
      const code = this.status < 500 ? 'engine_rejected' : 'engine_error';
      this.settle(Promise.reject(new EngineFailure(code, `engine answered ${this.status}`, { engineStatus: this.status, engineBody: body })));
    } else if (this.forwarder) {
      this.settle(this.forwarder.finish());
    } else {
      this.settle(this.forwardBody(body, this.sink, this.promptText, this.rename));
    }
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    if (this.cancellation.reason) {
      this.settle(Promise.reject(withUsage(this.cancellation.reason, this.partialUsage())));
    } else if (error instanceof EngineFailure) {
      this.settle(Promise.reject(withUsage(error, this.partialUsage())));
    } else if (!this.responded) {
      this.settle(Promise.reject(new EngineFailure('engine_unavailable', `engine at ${this.engineUrl} could not be reached: ${error.message}`, { cause: error })));
    } else {
      this.settle(Promise.reject(new EngineFailure('engine_error', `engine stream broke: ${error.message}`, { cause: error, usage: this.partialUsage() })));
    }
  }

  /** Tokens consumed so far: streamed chunks, or for a whole body at least the prompt. */
  private partialUsage(): Usage {
    return this.forwarder ? this.forwarder.partialUsage() : estimateUsage(this.promptText(), 0);
  }

  private settle(outcome: Promise<EngineResult>): void {
    if (this.settled) return;
    this.settled = true;
    outcome.then(this.resolve, this.reject);
  }
}

/**
 * What undici holds of a call once it ended. undici keeps up to 256 finished requests in each
 * connection's queue before it splices them off (client.js, `kRunningIdx > 256`), handler
 * included, and an EngineCall reaches the job's whole graph (sink, forwarder, the promise its
 * caller awaits, the response bytes). Handed that graph, V8 promoted ~2.5 KB per request to old
 * space and the agent's scavenges took 6 ms each (1 ms in the same pass-through without it);
 * this wrapper lets go of the call as soon as the response ends, so only itself stays queued.
 */
export class ReleasingHandler implements Dispatcher.DispatchHandler {
  constructor(private call: EngineCall | null) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.call?.onRequestStart(controller);
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number): void {
    this.call?.onResponseStart(controller, statusCode);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.call?.onResponseData(controller, chunk);
  }

  onResponseEnd(): void {
    const call = this.call;
    this.call = null;
    call?.onResponseEnd();
  }

  onResponseError(controller: Dispatcher.DispatchController, error: Error): void {
    const call = this.call;
    this.call = null;
    call?.onResponseError(controller, error);
  }
}
