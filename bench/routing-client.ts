/**
 * Open-loop replay of a routing trace (routing-trace.ts): every request is sent at its time in
 * the trace whether or not earlier ones have answered, streamed, alternating over the given
 * endpoints (one per server). Per request: time to the first content chunk (from its
 * scheduled send time, so a late client does not hide queueing), the end, and the usage chunk
 * (prompt, cached and completion tokens). Requests still running at the cut-off are aborted
 * and marked `cut`.
 */
import http from 'node:http';
import type { TraceRequest } from './routing-trace';

export interface Endpoint {
  /** Full URL of the deployment's chat completions endpoint. */
  readonly url: URL;
  readonly key: string;
}

export interface ReplaySample {
  readonly index: number;
  readonly conversation: number;
  readonly turn: number;
  readonly endpoint: number;
  /** Milliseconds from the run's start. */
  readonly scheduledAt: number;
  /** How late the client sent it. */
  sendLagMs: number;
  firstTokenAt: number | null;
  endedAt: number | null;
  status: number;
  error?: string;
  cut: boolean;
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
  contentChunks: number;
}

export interface ReplayOptions {
  readonly model: string;
  readonly maxTokens: number;
  /** Milliseconds after the last send when whatever still runs is aborted. */
  readonly graceMs: number;
  /** Called every `progressMs` with the samples so far and the elapsed milliseconds. */
  readonly progress?: (samples: readonly ReplaySample[], elapsedMs: number) => void;
  readonly progressMs?: number;
}

export interface Replay {
  readonly samples: ReplaySample[];
  /** When the last request was due, and when the replay ended (everything answered or cut), ms from start. */
  readonly sendEndMs: number;
  readonly endMs: number;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });

export function closeClient(): void {
  agent.destroy();
}

export async function replay(trace: readonly TraceRequest[], endpoints: readonly Endpoint[], options: ReplayOptions, aborted: () => boolean): Promise<Replay> {
  const samples: ReplaySample[] = [];
  const running = new Map<number, http.ClientRequest>();
  const startedAt = performance.now() + 100;
  const elapsed = () => performance.now() - startedAt;
  let next = 0;
  let settle!: () => void;
  const allAnswered = new Promise<void>((resolve) => { settle = resolve; });
  const maybeDone = () => {
    if (next >= trace.length && running.size === 0) settle();
  };

  const send = (index: number) => {
    const request = trace[index];
    const endpoint = index % endpoints.length;
    const target = endpoints[endpoint];
    const sample: ReplaySample = {
      index, conversation: request.conversation, turn: request.turn, endpoint, scheduledAt: request.at, sendLagMs: elapsed() - request.at,
      firstTokenAt: null, endedAt: null, status: 0, cut: false, promptTokens: 0, cachedTokens: 0, completionTokens: 0, contentChunks: 0,
    };
    samples.push(sample);
    const body = JSON.stringify({
      model: options.model, messages: request.messages, max_tokens: options.maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true },
    });
    const finish = (status: number, error?: string) => {
      if (sample.endedAt !== null) return;
      sample.endedAt = elapsed();
      sample.status = status;
      if (error) sample.error = error;
      running.delete(index);
      maybeDone();
    };
    const call = http.request({
      host: target.url.hostname, port: target.url.port, path: target.url.pathname, method: 'POST', agent,
      headers: { authorization: `Bearer ${target.key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (response) => {
      const status = response.statusCode ?? 0;
      response.setEncoding('utf8');
      let buffer = '';
      response.on('data', (part: string) => {
        buffer += part;
        if (status !== 200) return;
        const at = elapsed();
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (!event.startsWith('data: {')) continue;
          if (event.includes('"usage":{')) {
            const usage = (JSON.parse(event.slice(6)) as { usage?: { prompt_tokens?: number; completion_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } } }).usage;
            if (usage) {
              sample.promptTokens = usage.prompt_tokens ?? 0;
              sample.completionTokens = usage.completion_tokens ?? 0;
              sample.cachedTokens = usage.prompt_tokens_details?.cached_tokens ?? 0;
            }
          }
          if (event.includes('"content":"') && !event.includes('"content":""')) {
            sample.contentChunks++;
            sample.firstTokenAt ??= at;
          }
        }
      });
      response.on('end', () => {
        let error: string | undefined;
        if (status !== 200) {
          try {
            error = (JSON.parse(buffer) as { error?: { code?: string } }).error?.code ?? 'unknown';
          } catch {
            error = buffer.slice(0, 80);
          }
        }
        finish(status, error);
      });
      response.on('error', (err) => finish(0, err.message));
    });
    call.on('error', (err) => finish(0, err.message));
    running.set(index, call);
    call.end(body);
  };

  let lastProgress = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = elapsed();
      while (next < trace.length && trace[next].at <= now && !aborted()) send(next++);
      if (options.progress && now - lastProgress >= (options.progressMs ?? 10_000)) {
        lastProgress = now;
        options.progress(samples, now);
      }
      if (next >= trace.length || aborted()) {
        next = trace.length;
        resolve();
        return;
      }
      setTimeout(tick, Math.max(0, Math.min(50, trace[next].at - now)));
    };
    tick();
  });
  const sendEndMs = Math.max(elapsed(), trace.at(-1)?.at ?? 0);
  maybeDone();
  let timer: NodeJS.Timeout | undefined;
  const progressTimer = options.progress ? setInterval(() => options.progress!(samples, elapsed()), options.progressMs ?? 10_000) : undefined;
  await Promise.race([allAnswered, new Promise<void>((resolve) => { timer = setTimeout(resolve, aborted() ? 0 : options.graceMs); })]);
  clearTimeout(timer);
  if (progressTimer) clearInterval(progressTimer);
  const endMs = elapsed();
  for (const [index, call] of running) {
    const sample = samples[index];
    sample.cut = true;
    sample.endedAt = endMs;
    call.destroy();
  }
  running.clear();
  return { samples, sendEndMs, endMs };
}
