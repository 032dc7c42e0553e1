/**
 * The agent's log of its adapters (worker-agent/engines/adapter-log.ts): a line per load with
 * its name and time, per unload with why, per failure with the client-safe reason, and never
 * the presigned URL it was fetched from or the path it was stored at. The slots and the store
 * are the real ones; the storage is an in-test HTTP server.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { AdapterRef } from '../../proto/worker/v1/index';
import type { AgentLogger } from '../../worker-agent/agent-logger';
import { AdapterSlots } from '../../worker-agent/engines/adapter-slots';
import { AdapterStore } from '../../worker-agent/engines/adapter-store';
import { logAdapterEvents } from '../../worker-agent/engines/adapter-log';

const GOOD = Buffer.from('weights of a good adapter');

describe('the agent\'s adapter log', () => {
  let server: http.Server;
  let base: string;
  let directory: string;
  const lines: Array<{ level: string; context: Record<string, unknown>; message?: string }> = [];
  const logger: AgentLogger = {
    info: (context, message) => lines.push({ level: 'info', context: context as Record<string, unknown>, message }),
    warn: (context, message) => lines.push({ level: 'warn', context: context as Record<string, unknown>, message }),
    error: (context, message) => lines.push({ level: 'error', context: context as Record<string, unknown>, message }),
  };

  beforeAll(async () => {
    directory = fs.mkdtempSync(path.join(os.tmpdir(), 'adapter-log-'));
    // A refusal that quotes the URL back, as object stores do.
    server = http.createServer((request, response) => {
      if (request.url?.startsWith('/good')) response.end(GOOD);
      else { response.statusCode = 403; response.end(`<Error>SignatureDoesNotMatch for ${request.url}</Error>`); }
    });
    server.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    fs.rmSync(directory, { recursive: true, force: true });
  });

  const ref = (name: string, file: string, bytes: Buffer): AdapterRef => ({
    name: `ad_${name}.r1`, displayName: name, format: 'ADAPTER_FORMAT_GGUF', source: `${base}/${file}?X-Amz-Credential=AKIA-SECRET&X-Amz-Signature=deadbeef`,
    sha256: createHash('sha256').update(bytes).digest('hex'), sizeBytes: bytes.length, rank: 8, scale: 0,
  });

  it('logs a load with its name and time, failures with their reason, and the unloads at close, naming no URL or path', async () => {
    const store = new AdapterStore({ directory, maxBytes: 1 << 20, fetchTimeoutMs: 5_000 });
    // A loader as the engines' are: the store fetches and checks the weights, the engine would then load the file.
    const slots = new AdapterSlots<string>({ maxLoras: 1, maxCpuLoras: 0, maxLoraRank: 64 }, {
      load: async (adapter) => (await store.materialize(adapter)).path,
      unload: async () => {},
    });
    logAdapterEvents(slots, logger);

    (await slots.acquire(ref('support-bot', 'good/1', GOOD))).release();
    await expect(slots.acquire(ref('sales-bot', 'good/2', Buffer.concat([GOOD, Buffer.from('2')])))).rejects.toMatchObject({ code: 'adapter_load_failed' });
    await expect(slots.acquire(ref('forbidden-bot', 'denied', Buffer.from('never served')))).rejects.toMatchObject({ code: 'adapter_load_failed' });
    await slots.close();

    // sales-bot's weights differ from what the server sends: its sha256 check fails too.
    const summary = lines.map((line) => [line.level, line.message, line.context.adapter, line.context.why ?? null]);
    expect(summary).toEqual([
      ['info', 'adapter loaded', 'support-bot', null],
      ['warn', 'adapter load failed', 'sales-bot', null],
      ['warn', 'adapter load failed', 'forbidden-bot', null],
      ['info', 'adapter unloaded', 'support-bot', 'closing'],
    ]);
    expect(lines[0].context).toEqual({ adapter: 'support-bot', engineName: 'ad_support-bot.r1', loadMs: expect.any(Number) });
    const forbidden = lines[2].context;
    expect(forbidden).toEqual({ adapter: 'forbidden-bot', engineName: 'ad_forbidden-bot.r1', loadMs: expect.any(Number), reason: expect.stringContaining('forbidden-bot') });
    const written = JSON.stringify(lines);
    for (const secret of ['http://', base, 'X-Amz', 'AKIA-SECRET', 'deadbeef', directory, '/denied']) expect({ secret, found: written.includes(secret) }).toEqual({ secret, found: false });
  });

  it('logs each eviction of the least recently used adapter as an unload', async () => {
    lines.length = 0;
    const store = new AdapterStore({ directory: fs.mkdtempSync(path.join(directory, 'evict-')), maxBytes: 1 << 20, fetchTimeoutMs: 5_000 });
    const slots = new AdapterSlots<string>({ maxLoras: 1, maxCpuLoras: 0, maxLoraRank: 64 }, { load: async (adapter) => (await store.materialize(adapter)).path, unload: async () => {} });
    logAdapterEvents(slots, logger);
    (await slots.acquire(ref('first', 'good/a', GOOD))).release();
    (await slots.acquire(ref('second', 'good/b', GOOD))).release();
    await slots.close();
    expect(lines.map((line) => [line.message, line.context.adapter, line.context.why ?? null])).toEqual([
      ['adapter loaded', 'first', null],
      ['adapter loaded', 'second', null],
      ['adapter unloaded', 'first', 'evicted'],
      ['adapter unloaded', 'second', 'closing'],
    ]);
  });
});
