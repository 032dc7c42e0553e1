/**
 * The benchmark's clients: node:http with keep-alive, SSE parsed just enough to time the first
 * content chunk and read the usage chunk; closed loops (the owner, and the guests on raw
 * connections) and open loops (the fairness phase).
 */
import http from 'node:http';
import { RawHttpConnection } from '../raw-http-client';
import { now } from './measure';
import type { Sample } from './model';

/** Set once a signal stops the benchmark: every loop ends after its current request. */
export const loads = { aborted: false };

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });

export function streamChat(url: URL, key: string, body: string): Promise<Sample> {
  return new Promise((resolve) => {
    const startedAt = now();
    let firstTokenAt: number | null = null;
    let chunks = 0;
    let usageTokens: number | null = null;
    const request = http.request({
      host: '127.0.0.1', port: url.port, path: url.pathname, method: 'POST', agent,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (response) => {
      const status = response.statusCode ?? 0;
      response.setEncoding('utf8');
      let buffer = '';
      response.on('data', (part: string) => {
        if (status !== 200) {
          buffer += part;
          return;
        }
        const at = now();
        buffer += part;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (!event.startsWith('data: {')) continue;
          if (event.includes('"content":"') && !event.includes('"content":""')) {
            chunks++;
            firstTokenAt ??= at;
          } else if (event.includes('"usage":{')) {
            usageTokens = (JSON.parse(event.slice(6)) as { usage: { completion_tokens: number } }).usage.completion_tokens;
          }
        }
      });
      response.on('end', () => {
        let error: string | undefined;
        if (status !== 200) {
          try {
            error = (JSON.parse(buffer) as { error?: { code?: string; type?: string } }).error?.code ?? 'unknown';
          } catch {
            error = buffer.slice(0, 80);
          }
        }
        resolve({ startedAt, firstTokenAt, endedAt: now(), status, tokens: usageTokens ?? chunks, error });
      });
      response.on('error', (err) => resolve({ startedAt, firstTokenAt, endedAt: now(), status: 0, tokens: 0, error: err.message }));
    });
    request.on('error', (err) => resolve({ startedAt, firstTokenAt: null, endedAt: now(), status: 0, tokens: 0, error: err.message }));
    request.end(body);
  });
}

/**
 * `count` closed loops until `stop()`; a non-200 answer waits `backoffMs` before the next call.
 * Loop i starts i × `staggerMs` late and waits a random 0–`thinkMs` after each answer: with an
 * engine whose every request takes the same time, loops started together stay in lockstep and
 * the load becomes one burst of `count` requests per request duration (see bench/README.md).
 */
export function closedLoop(count: number, url: URL, key: string, body: string, backoffMs: number, staggerMs = 0, thinkMs = 0, who?: string, raw = false) {
  const samples: Sample[] = [];
  let stopped = false;
  const loops = Array.from({ length: count }, async (_, index) => {
    // The guests' loops each on a raw keep-alive connection (raw-http-client.ts); the owner's on node:http.
    const connection = raw ? new RawHttpConnection(url, key, body, now) : null;
    const send = connection
      ? async (): Promise<Sample> => {
        const startedAt = now();
        const answer = await connection.send();
        return { startedAt, endedAt: now(), ...answer };
      }
      : () => streamChat(url, key, body);
    if (staggerMs > 0) await sleep(index * staggerMs);
    while (!stopped && !loads.aborted) {
      const sample = await send();
      samples.push(who ? { ...sample, who } : sample);
      if (sample.status !== 200) await sleep(backoffMs);
      else if (thinkMs > 0) await sleep(Math.random() * thinkMs);
    }
    connection?.close();
  });
  return { samples, stop: async () => { stopped = true; await Promise.all(loops); } };
}

/**
 * Attempts at a fixed rate (an open loop: each attempt is sent on schedule, whatever the answers
 * before it), at most `maxInFlight` at once: the fairness phase sends two guest workspaces' attempts
 * at exactly 1:10, which closed loops cannot (a served loop slows down, a refused one speeds up).
 */
export function pacedLoad(perSecond: number, maxInFlight: number, url: URL, key: string, body: string, who: string) {
  const samples: Sample[] = [];
  const startedAt = now();
  let sent = 0;
  let inFlight = 0;
  const running = new Set<Promise<void>>();
  const timer = setInterval(() => {
    const due = Math.floor(((now() - startedAt) / 1000) * perSecond);
    while (sent < due && inFlight < maxInFlight && !loads.aborted) {
      sent++;
      inFlight++;
      const attempt = streamChat(url, key, body).then((sample) => {
        samples.push({ ...sample, who });
        inFlight--;
        running.delete(attempt);
      });
      running.add(attempt);
    }
    // Behind by more than the cap allows: the schedule skips what could not be sent (counted as not attempted).
    if (due - sent > maxInFlight) sent = due;
  }, 5);
  return { samples, stop: async () => { clearInterval(timer); await Promise.all(running); } };
}

