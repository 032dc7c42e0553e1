import pino from 'pino';
import type { FinishedRequest } from '../../control-plane/pipeline/finished-request';
import { RequestLogRecorder } from '../../control-plane/request-log/request-log-recorder';
import { RequestLogStore } from '../../control-plane/request-log/request-log-store';
import { dataSourceForSuite } from '../support/test-database';

/**
 * The recorder sends each batch as positional rows with durations in whole microseconds (cheaper
 * to serialise on the request path's server); these read the rows back column by column, so a
 * value in the wrong position, a lost fraction of a millisecond or a step that appears from
 * nowhere fails here. Phases are read back through the store (they are kept in µs, `phase_us`).
 */
describe('request log recorder', () => {
  const database = dataSourceForSuite();

  const base: FinishedRequest = {
    workspaceId: 'ws_recorder', apiKeyId: 'key_recorder', deploymentId: 'dep_recorder', sharedModel: null, model: 'acme/chat-8b',
    endpoint: 'chat.completions', stream: true, batchId: undefined, outcome: 'succeeded', finishReason: 'stop', errorCode: null,
    promptTokens: 12, completionTokens: 30, cachedTokens: 4, startedAt: Date.UTC(2026, 10, 30, 8, 0, 0, 123), latencyMs: 41.5,
    ttftMs: 7.25, replicaId: 'rep_recorder', requestId: 'req_one', traceId: '0af7651916cd43dd8448eb211c80319c',
    phases: { admittedMs: 0.0421, dispatchedMs: 1.5, startedMs: 2.1254, firstTokenMs: 7.25, endedMs: 41.5 },
  };

  const phasesOf = async (requestId: string) => (await new RequestLogStore(database.dataSource).entry('ws_recorder', requestId))!.phases;

  async function written(requests: FinishedRequest[]): Promise<Array<Record<string, unknown>>> {
    const recorder = new RequestLogRecorder(database.dataSource, 60_000, pino({ level: 'silent' }));
    for (const request of requests) recorder.requestFinished(request);
    await recorder.stop();
    return database.dataSource.query(`SELECT *, extract(epoch FROM started_at) * 1000 AS started_ms FROM request_log
      WHERE request_id = ANY($1) ORDER BY request_id`, [requests.map((request) => request.requestId)]);
  }

  it('writes every field of an owner request, its phases to the microsecond', async () => {
    const [row] = await written([base]);
    expect(row).toMatchObject({
      workspace_id: 'ws_recorder', request_id: 'req_one', api_key_id: 'key_recorder', deployment_id: 'dep_recorder', shared_model: null,
      replica_id: 'rep_recorder', batch_id: null, model: 'acme/chat-8b', endpoint: 'chat.completions', stream: true, outcome: 'succeeded',
      error_code: null, finish_reason: 'stop', prompt_tokens: 12, completion_tokens: 30, cached_tokens: 4, latency_ms: 41.5, ttft_ms: 7.25,
      trace_id: '0af7651916cd43dd8448eb211c80319c', adapter_id: null, adapter_name: null,
      request_body: null, request_body_truncated: false, response_body: null, response_body_truncated: false,
    });
    expect(Number(row.started_ms)).toBe(base.startedAt);
    // 0.0421 ms is 42.1 µs: kept to the whole microsecond.
    expect(row.phase_us).toEqual(['42', '1500', '2125', '7250', '41500']);
    expect(await phasesOf('req_one')).toEqual({ admittedMs: 0.042, dispatchedMs: 1.5, startedMs: 2.125, firstTokenMs: 7.25, endedMs: 41.5 });
  });

  it('keeps absent steps absent, no phases as null, and a guest\'s entry without the owner\'s deployment or replica', async () => {
    const rows = await written([
      { ...base, requestId: 'req_two', stream: false, ttftMs: null, phases: { admittedMs: 0, endedMs: 3 } },
      { ...base, requestId: 'req_three', phases: null, traceId: null, batchId: 'batch_1', outcome: 'failed', finishReason: null, errorCode: 'engine_error' },
      { ...base, requestId: 'req_four', sharedModel: 'shared/acme/chat-8b' },
    ]);
    expect(rows.map((row) => row.request_id)).toEqual(['req_four', 'req_three', 'req_two']);
    const [guest, failed, answered] = rows;
    expect(answered).toMatchObject({ stream: false, ttft_ms: null, phase_us: ['0', null, null, null, '3000'] });
    expect(await phasesOf('req_two')).toStrictEqual({ admittedMs: 0, endedMs: 3 });
    expect(await phasesOf('req_three')).toBeNull();
    expect(failed).toMatchObject({ phase_us: null, trace_id: null, batch_id: 'batch_1', outcome: 'failed', finish_reason: null, error_code: 'engine_error' });
    expect(guest).toMatchObject({ shared_model: 'shared/acme/chat-8b', deployment_id: null, replica_id: null });
  });

  it('keeps a batch line\'s steps hours after its arrival, and reads an entry written before phase_us from its jsonb', async () => {
    const hours = 5 * 3_600_000;
    await written([{ ...base, requestId: 'req_late', batchId: 'batch_2', phases: { admittedMs: 1, dispatchedMs: hours, startedMs: hours + 2, endedMs: hours + 9.5 } }]);
    expect(await phasesOf('req_late')).toStrictEqual({ admittedMs: 1, dispatchedMs: hours, startedMs: hours + 2, endedMs: hours + 9.5 });
    await database.dataSource.query(`INSERT INTO request_log (workspace_id, request_id, api_key_id, deployment_id, model, endpoint, stream, outcome,
      prompt_tokens, completion_tokens, cached_tokens, started_at, latency_ms, phases) VALUES ('ws_recorder', 'req_old', 'key_recorder', 'dep_recorder',
      'acme/chat-8b', 'chat.completions', false, 'succeeded', 1, 1, 0, now(), 5, '{"admittedMs": 0.5, "endedMs": 5}')`);
    expect(await phasesOf('req_old')).toStrictEqual({ admittedMs: 0.5, endedMs: 5 });
  });

  it('writes the adapter and stored bodies, NUL and bytes that are not UTF-8 as U+FFFD, and any text JSON must escape', async () => {
    const [row] = await written([{
      ...base, requestId: 'req_five', adapter: { id: 'adp_1', name: 'support-bot', revision: 2 },
      content: {
        request: Buffer.concat([Buffer.from('{"q":"a\u0000b \\"quoted\\" \u2028'), Buffer.from([0xff]), Buffer.from('"}')]), requestTruncated: true,
        response: Buffer.from('data: {"x":1}\n\n'), responseTruncated: false,
      },
    }]);
    expect(row).toMatchObject({
      adapter_id: 'adp_1', adapter_name: 'support-bot', request_body: '{"q":"a\uFFFDb \\"quoted\\" \u2028\uFFFD"}', request_body_truncated: true,
      response_body: 'data: {"x":1}\n\n', response_body_truncated: false,
    });
  });
});
