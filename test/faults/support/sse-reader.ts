/** One SSE `data:` event as the client received it, with when (performance.now()). */
export interface TimedEvent {
  readonly data: string;
  readonly at: number;
}

/**
 * Reads a streamed chat completion event by event, timing each, so a test can act after the
 * Nth chunk and measure how long the terminal event took after it.
 */
export class SseReader {
  readonly events: TimedEvent[] = [];
  /** Resolves when the response body ends (or breaks); never rejects. */
  readonly done: Promise<void>;
  private readonly waiters = new Set<() => void>();
  private ended = false;

  constructor(response: Response) {
    this.done = this.read(response).finally(() => {
      this.ended = true;
      this.notify();
    });
  }

  /** Content chunks received so far (not the error event, not [DONE]). */
  get chunks(): number {
    return this.events.filter((event) => event.data.startsWith('{') && !event.data.startsWith('{"error"')).length;
  }

  /** The last event, parsed, when it is a terminal `{"error": …}`. */
  get terminalError(): { event: TimedEvent; error: { code?: string; message?: string; type?: string } } | undefined {
    const last = this.events.at(-1);
    if (!last?.data.startsWith('{"error"')) return undefined;
    return { event: last, error: JSON.parse(last.data).error };
  }

  /** Waits until `condition` holds (checked after every event) or the stream ended. */
  async until(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
    const startedAt = performance.now();
    const deadline = setTimeout(() => this.notify(), timeoutMs);
    try {
      while (!condition()) {
        if (this.ended) throw new Error(`the stream ended before ${what}: ${JSON.stringify(this.events.slice(-3))}`);
        if (performance.now() - startedAt > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
        await new Promise<void>((resolve) => this.waiters.add(resolve));
      }
    } finally {
      clearTimeout(deadline);
    }
  }

  private notify(): void {
    for (const waiter of this.waiters) waiter();
    this.waiters.clear();
  }

  private async read(response: Response): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const part of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(part, { stream: true });
        let boundary: number;
        while ((boundary = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, boundary);
          buffer = buffer.slice(boundary + 2);
          const data = block.split('\n').filter((line) => line.startsWith('data: ')).map((line) => line.slice('data: '.length)).join('\n');
          if (data) this.events.push({ data, at: performance.now() });
        }
        this.notify();
      }
    } catch {
      // A body that breaks is a stream that ended: the test asserts on what arrived.
    }
  }
}
