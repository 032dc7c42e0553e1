/**
 * llama.cpp itself, loaded once per agent: the native binding for this platform, its version,
 * and its log. Opening it is quick (no model yet), so the agent knows its engine version for
 * Hello before the model load starts. node-llama-cpp is ESM, so it is loaded with a real
 * `import()`, and only by this engine (agents of other engines never load its 40 MB).
 */
import type { Llama } from 'node-llama-cpp';
import { EngineStartError } from '../engines/engine-start-error';

export type NodeLlamaCpp = typeof import('node-llama-cpp');

export interface LlamaBackendOptions {
  /** CPU threads llama.cpp may use at most. */
  readonly threads: number;
  /** llama.cpp's own warnings and errors. */
  readonly log: (level: 'error' | 'warn', message: string) => void;
}

export class LlamaBackend {
  private constructor(
    readonly library: NodeLlamaCpp,
    readonly llama: Llama,
    /** `node-llama-cpp <version> (llama.cpp <release>)`. */
    readonly version: string,
    private readonly logged: { loadError: string },
  ) {}

  static async open(options: LlamaBackendOptions): Promise<LlamaBackend> {
    const library = await import('node-llama-cpp');
    // llama.cpp says why a load failed only in its log ("error loading model: …"); the
    // exception node-llama-cpp throws just says "Failed to load model".
    const logged = { loadError: '' };
    const llama = await library.getLlama({
      // CPU only, and never download or compile: a missing binary must fail now, not build for minutes.
      gpu: false, build: 'never', maxThreads: options.threads, progressLogs: false,
      logLevel: library.LlamaLogLevel.warn,
      logger: (level, message) => {
        const text = message.trim();
        if (!text) return;
        const reason = /error loading model: (.+)$/.exec(text);
        if (reason) logged.loadError = reason[1];
        options.log(level === library.LlamaLogLevel.error || level === library.LlamaLogLevel.fatal ? 'error' : 'warn', text);
      },
    }).catch((error: Error) => {
      throw new EngineStartError(`llama.cpp is not usable on this machine (${process.platform}-${process.arch}): ${firstLine(error)}`, { cause: error });
    });
    const version = `node-llama-cpp ${await library.getModuleVersion()} (llama.cpp ${llama.llamaCppRelease.release})`;
    return new LlamaBackend(library, llama, version, logged);
  }

  /** Why llama.cpp said the last model load failed, if it said so. */
  async loadError(): Promise<string> {
    // Log lines cross from llama.cpp's thread on their own schedule: give the last one a moment.
    if (!this.logged.loadError) await new Promise((resolve) => setTimeout(resolve, 50));
    return this.logged.loadError;
  }
}

export function firstLine(error: Error): string {
  return String(error?.message ?? error).split('\n')[0];
}
