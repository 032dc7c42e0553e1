/**
 * WorkTicket: every hold taken at admission goes back on every path a request ends by, once —
 * settled to the usage its jobs' terminal events report (an aborted stream is metered for what
 * it delivered; an embeddings request's batches summed into one record), or released whole
 * when no job was ever sent (and then no usage record). The ticket meters a job's terminal
 * event itself, before the sink hears it: no transport settles anything.
 */
import type { Job, JobFailure, JobListener } from '../../../control-plane/dispatch/job';
import { AppError } from '../../../control-plane/errors/app-error';
import type { RateLimitDecision, TokenHold } from '../../../control-plane/rate-limits/rate-limit-decision';
import type { UsageInput } from '../../../control-plane/usage/usage-recorder';
import { WorkTicket, type SettleWhen, type TicketOwner, type TicketParts, type WorkOutcome } from '../../../control-plane/pipeline/work-ticket';
import type { Usage } from '../../../proto/worker/v1';
import type { FinishedRequest } from '../../../control-plane/pipeline/finished-request';
import { RecordingListener, thrownCode } from './fakes';

const HOLD = { apiKeyId: 'key_1', day: 20_000, tokens: 1_030, shared: false } as TokenHold;
const DECISION: RateLimitDecision = { remainingRequests: 59, resetRequestsSeconds: 60, remainingTokens: 900, resetTokensSeconds: 3_600, hold: HOLD };
const OWNER: TicketOwner = {
  workspaceId: 'ws_owner', apiKeyId: 'key_1', deploymentId: 'dep_owner', sharedModel: null, endpoint: 'chat.completions', stream: true, recordsReplica: true,
  model: 'org/model-1', requestId: 'req_1',
};
const USED: Usage = { promptTokens: 10, completionTokens: 30, totalTokens: 40 };
const canceledWith = (usage?: Usage): JobFailure => ({ code: 'canceled', message: 'canceled', usage } as JobFailure);

function ticket(options: { owner?: Partial<TicketOwner>; guest?: boolean; failSend?: AppError; settleWhen?: SettleWhen } = {}) {
  let clock = 5_000;
  const log: string[] = [];
  const settles: Array<{ hold: TokenHold; used: number }> = [];
  const records: UsageInput[] = [];
  const tokens: unknown[][] = [];
  const sent: Array<{ listener: JobListener; body: Buffer | undefined; job: Job }> = [];
  const finished: Array<[WorkOutcome, Usage | undefined]> = [];
  const firstTokens: number[] = [];
  const observed: FinishedRequest[] = [];
  const parts: TicketParts = {
    send(listener, body) {
      if (options.failSend) throw options.failSend;
      const job = { id: `job_${sent.length + 1}`, replicaId: `rep_${sent.length + 1}`, finished: false, canceled: false, cancel() {}, consumed() {} } as unknown as Job;
      sent.push({ listener, body, job });
      return job;
    },
    firstToken: (ms) => void firstTokens.push(ms),
    ...(options.guest ? { finish: (outcome: WorkOutcome, usage: Usage | undefined) => void finished.push([outcome, usage]) } : {}),
  };
  const settlement = {
    rateLimiter: { settle: (hold: TokenHold, used: number) => void settles.push({ hold, used }) },
    usage: { record: (input: UsageInput) => { log.push('record'); records.push(input); } },
    observer: {
      requestFinished: (request: FinishedRequest) => {
        observed.push(request);
        // What the token metrics count of it (request-metrics.ts): under the request's label, when it reported usage.
        if (request.promptTokens + request.completionTokens > 0) tokens.push([request.sharedModel ?? request.deploymentId, request.promptTokens, request.completionTokens]);
      },
    },
    now: () => clock,
  };
  const work = new WorkTicket(DECISION, { ...OWNER, ...options.owner }, parts, settlement, 4_000, options.settleWhen);
  return { work, log, settles, records, tokens, sent, finished, firstTokens, observed, advance: (ms: number) => (clock += ms) };
}

/** A listener that logs its terminal event into `log`, to see it comes after the record. */
function loggingListener(log: string[]): RecordingListener {
  const listener = new RecordingListener();
  const completed = listener.onCompleted.bind(listener);
  listener.onCompleted = (usage, reason) => {
    log.push('listener.completed');
    completed(usage, reason);
  };
  return listener;
}

describe('WorkTicket: one job, settled at its terminal event', () => {
  test('the terminal event settles the hold to the usage and writes one record (replica, clock latency) before the listener hears it; later events and close do nothing', () => {
    const { work, log, settles, records, tokens, sent } = ticket();
    const listener = loggingListener(log);
    const job = work.dispatch(listener);
    expect(job).toBe(sent[0].job);
    sent[0].listener.onChunk(Buffer.from('data: x\n\n'));
    expect(listener.chunks).toEqual([Buffer.from('data: x\n\n')]);
    sent[0].listener.onCompleted(USED, 'stop');
    sent[0].listener.onFailed(canceledWith({ promptTokens: 1, completionTokens: 1, totalTokens: 2 }));
    work.close();
    expect(log).toEqual(['record', 'listener.completed']);
    expect(settles).toEqual([{ hold: HOLD, used: 40 }]);
    expect(settles[0].hold).toBe(HOLD);
    expect(records).toEqual([{
      workspaceId: 'ws_owner', apiKeyId: 'key_1', deploymentId: 'dep_owner', sharedModel: null, replicaId: 'rep_1', endpoint: 'chat.completions', status: 'succeeded',
      stream: true, promptTokens: 10, completionTokens: 30, totalTokens: 40, latencyMs: 1_000, createdAt: new Date(4_000),
    }]);
    expect(tokens).toEqual([['dep_owner', 10, 30]]);
    expect(listener.completedWith).toEqual({ usage: USED, finishReason: 'stop' });
  });

  test.each<[string, (listener: JobListener, job: Job) => void, WorkOutcome]>([
    ['completed', (listener) => listener.onCompleted(USED, 'stop'), 'succeeded'],
    ['completed after a cancel (client left, deadline)', (listener, job) => { (job as { canceled: boolean }).canceled = true; listener.onCompleted(USED, 'stop'); }, 'canceled'],
    ['failed with code canceled', (listener) => listener.onFailed(canceledWith(USED)), 'canceled'],
    ['failed on the engine', (listener) => listener.onFailed({ code: 'upstream_error', message: 'boom', usage: USED } as JobFailure), 'failed'],
  ])('%s → %s', (_name, end, outcome) => {
    const { work, records, sent } = ticket();
    work.dispatch(new RecordingListener());
    end(sent[0].listener, sent[0].job);
    expect(records).toMatchObject([{ status: outcome, totalTokens: 40 }]);
  });

  test('a terminal event without usage settles to 0 and records zeros, without token metrics', () => {
    const { work, settles, records, tokens, sent } = ticket();
    work.dispatch(new RecordingListener());
    sent[0].listener.onFailed({ code: 'pod_crash', message: 'gone' } as JobFailure);
    expect(settles).toEqual([{ hold: HOLD, used: 0 }]);
    expect(records).toMatchObject([{ status: 'failed', promptTokens: 0, completionTokens: 0, totalTokens: 0, replicaId: 'rep_1' }]);
    expect(tokens).toEqual([]);
  });

  test('a guest\'s record names the owner\'s deployment and the shared model, never the replica; its label is the shared model; the guest is finished after the record', () => {
    const { work, records, tokens, finished, sent } = ticket({ owner: { deploymentId: 'dep_provider', sharedModel: 'shared/acme/chat-8b', recordsReplica: false }, guest: true });
    expect(work.label).toBe('shared/acme/chat-8b');
    work.dispatch(new RecordingListener());
    sent[0].listener.onFailed(canceledWith(USED));
    expect(records).toMatchObject([{ deploymentId: 'dep_provider', sharedModel: 'shared/acme/chat-8b', replicaId: null, status: 'canceled', totalTokens: 40 }]);
    expect(tokens).toEqual([['shared/acme/chat-8b', 10, 30]]);
    expect(finished).toEqual([['canceled', USED]]);
  });

  test('firstToken passes the milliseconds on', () => {
    const { work, firstTokens } = ticket();
    work.firstToken(320);
    expect(firstTokens).toEqual([320]);
  });
});

describe('WorkTicket: several jobs (embedding batches), settled once when closed and all ended', () => {
  test('each dispatch sends its own body; the record waits for close and the last job, sums their usage, and takes the worst outcome', () => {
    const { work, sent, records, settles } = ticket({ owner: { endpoint: 'embeddings', stream: false }, settleWhen: 'closed' });
    const listener = new RecordingListener();
    const bodies = [Buffer.from('a'), Buffer.from('b')];
    for (const body of bodies) work.dispatch(listener, body);
    expect(sent.map(({ body }) => body)).toEqual(bodies);
    sent[0].listener.onFailed({ code: 'upstream_error', message: 'bad input', usage: { promptTokens: 3, completionTokens: 0, totalTokens: 3 } } as JobFailure);
    work.close(); // the answer was an error; the other batch was canceled and still runs
    expect(records).toEqual([]);
    sent[1].listener.onFailed(canceledWith({ promptTokens: 5, completionTokens: 0, totalTokens: 5 }));
    expect(records).toMatchObject([{ status: 'failed', promptTokens: 8, totalTokens: 8, replicaId: 'rep_1' }]);
    expect(settles).toEqual([{ hold: HOLD, used: 8 }]);
    expect(listener.terminals).toHaveLength(2);
  });

  test('every job ended before close: close settles, once', () => {
    const { work, sent, records } = ticket({ owner: { endpoint: 'embeddings', stream: false }, settleWhen: 'closed' });
    work.dispatch(new RecordingListener(), Buffer.from('a'));
    sent[0].listener.onCompleted({ promptTokens: 4, completionTokens: 0, totalTokens: 4 }, 'stop');
    expect(records).toEqual([]);
    work.close();
    work.close();
    expect(records).toMatchObject([{ status: 'succeeded', totalTokens: 4 }]);
  });
});

describe('WorkTicket: settled by its holder (a batch line)', () => {
  test('terminal events do not settle; settle does, once; release after it changes nothing; `endedUsage` sums what the jobs reported', () => {
    const { work, sent, records, settles } = ticket({ owner: { batchId: 'batch_1', recordsReplica: false, stream: false }, settleWhen: 'explicit' });
    work.dispatch(new RecordingListener(), Buffer.from('line'));
    sent[0].listener.onCompleted(USED, 'stop');
    work.close();
    expect(records).toEqual([]);
    expect(work.endedUsage).toEqual(USED);
    work.settle('failed', USED, null);
    work.release();
    expect(records).toMatchObject([{ status: 'failed', totalTokens: 40, batchId: 'batch_1', replicaId: null }]);
    expect(settles).toEqual([{ hold: HOLD, used: 40 }]);
  });

  test('release gives the hold back whole with no record', () => {
    const { work, records, settles } = ticket({ settleWhen: 'explicit' });
    work.release();
    work.settle('succeeded', USED, null);
    expect(records).toEqual([]);
    expect(settles).toEqual([{ hold: HOLD, used: 0 }]);
  });
});

describe('WorkTicket release rules', () => {
  test('close without any dispatch releases the hold whole, once, with no usage record', () => {
    const { work, settles, records, tokens } = ticket();
    work.close();
    work.close();
    expect(settles).toEqual([{ hold: HOLD, used: 0 }]);
    expect(records).toEqual([]);
    expect(tokens).toEqual([]);
  });

  test('a guest closed without dispatch has its credit hold released (finish failed, no usage)', () => {
    const { work, settles, finished, records } = ticket({ guest: true });
    work.close();
    expect(settles).toEqual([{ hold: HOLD, used: 0 }]);
    expect(finished).toEqual([['failed', undefined]]);
    expect(records).toEqual([]);
  });

  test('a dispatch that throws sent nothing: close releases the hold', () => {
    const { work, settles, records } = ticket({ failSend: new AppError('no_replica_available', 'none ready') });
    expect(thrownCode(() => work.dispatch(new RecordingListener()))).toBe('no_replica_available');
    expect(settles).toEqual([]);
    work.close();
    expect(settles).toEqual([{ hold: HOLD, used: 0 }]);
    expect(records).toEqual([]);
  });

  test('an aborted stream is metered for what it delivered: close leaves the hold to the canceled job\'s terminal event', () => {
    const { work, settles, records, finished, advance, sent } = ticket({ guest: true });
    work.dispatch(new RecordingListener());
    work.close(); // the client left; the sink canceled the job
    expect(settles).toEqual([]);
    expect(records).toEqual([]);
    expect(finished).toEqual([]);
    advance(2_000);
    sent[0].listener.onFailed(canceledWith(USED));
    expect(settles).toEqual([{ hold: HOLD, used: 40 }]);
    expect(records).toMatchObject([{ status: 'canceled', totalTokens: 40, completionTokens: 30, latencyMs: 3_000 }]);
    expect(finished).toEqual([['canceled', USED]]);
    work.close();
    expect(settles).toHaveLength(1);
  });

  test('a terminal event after a release (a stray late event) changes nothing', () => {
    const { work, settles, records } = ticket();
    work.close();
    work.settle('succeeded', USED, 'rep_1');
    expect(settles).toEqual([{ hold: HOLD, used: 0 }]);
    expect(records).toEqual([]);
  });
});

describe('WorkTicket: the FinishedRequest its observer hears', () => {
  test('a completed stream: its model, finish reason, first-token latency, replica, request id and cached tokens, once', () => {
    const { work, sent, observed, advance } = ticket();
    work.dispatch(new RecordingListener());
    advance(120);
    work.firstToken(120);
    work.firstToken(300);
    advance(880);
    sent[0].listener.onCompleted({ ...USED, cachedTokens: 6 }, 'length');
    work.close();
    expect(observed).toEqual([{
      workspaceId: 'ws_owner', apiKeyId: 'key_1', deploymentId: 'dep_owner', sharedModel: null, model: 'org/model-1', adapter: null, endpoint: 'chat.completions',
      stream: true, batchId: undefined, outcome: 'succeeded', finishReason: 'length', errorCode: null, promptTokens: 10, completionTokens: 30,
      cachedTokens: 6, startedAt: 4_000, latencyMs: 2_000, ttftMs: 120, replicaId: 'rep_1', requestId: 'req_1', traceId: null,
      // Made at 5,000 (admitted) and dispatched at once; not queued by its agent, so it started as it arrived there.
      phases: { admittedMs: 1_000, dispatchedMs: 1_000, startedMs: 1_000, endedMs: 2_000 },
    }]);
  });

  test('a stream\'s time to first token is its first chunk\'s, known at settlement (the route learns its first byte only after the answer ends)', () => {
    const { work, sent, observed, advance, firstTokens } = ticket();
    const listener = new RecordingListener();
    work.dispatch(listener);
    advance(150);
    sent[0].listener.onChunk(Buffer.from('data: a\n\n'));
    advance(500);
    sent[0].listener.onChunk(Buffer.from('data: b\n\n'));
    advance(350);
    sent[0].listener.onCompleted(USED, 'stop');
    // As InferencePipeline.run does: the sink's first-byte latency comes once carry resolves, after settlement.
    work.firstToken(151);
    work.close();
    expect(listener.chunks).toHaveLength(2);
    expect(observed).toHaveLength(1);
    // The ticket's clock: admitted at 4 000, now 5 000 when dispatched.
    expect(observed[0]).toMatchObject({ ttftMs: 1_150, latencyMs: 2_000 });
    expect(firstTokens).toEqual([151]);
  });

  test('a request answered in one piece has no time to first token, whatever chunk-like event it sees', () => {
    const { work, sent, observed, advance } = ticket({ owner: { stream: false } });
    work.dispatch(new RecordingListener());
    advance(100);
    sent[0].listener.onChunk(Buffer.from('x'));
    sent[0].listener.onCompleted(USED, 'stop');
    expect(observed[0].ttftMs).toBeNull();
  });

  test('a failed job gives its code and no finish reason; a guest\'s request still names its replica to observers (they decide what a guest sees)', () => {
    const { work, sent, observed } = ticket({ owner: { sharedModel: 'shared/m', recordsReplica: false }, guest: true });
    work.dispatch(new RecordingListener());
    sent[0].listener.onFailed({ code: 'engine_error', message: 'boom', engineStatus: 500, engineBody: null, usage: undefined });
    expect(observed).toHaveLength(1);
    expect(observed[0]).toMatchObject({ outcome: 'failed', errorCode: 'engine_error', finishReason: null, ttftMs: null, replicaId: 'rep_1', sharedModel: 'shared/m' });
  });

  test('a client that left: canceled, with what the engine made metered', () => {
    const { work, sent, observed } = ticket();
    const job = work.dispatch(new RecordingListener());
    (job as { canceled: boolean }).canceled = true;
    sent[0].listener.onCompleted(USED, 'stop');
    expect(observed[0]).toMatchObject({ outcome: 'canceled', errorCode: 'canceled', completionTokens: 30 });
  });

  test('a request that never ran is released: no FinishedRequest (nothing ran, nothing to observe)', () => {
    const { work, observed } = ticket();
    work.close();
    expect(observed).toEqual([]);
  });
});

describe('WorkTicket: the request\'s phases (marked whether or not tracing is on)', () => {
  test('a job its agent queued: started at its accepted{queued: false}, first token at its first chunk (once), ended at settlement', () => {
    const { work, sent, observed, advance } = ticket();
    advance(3);
    work.dispatch(new RecordingListener());
    advance(10);
    sent[0].listener.onAccepted!(true);
    advance(200);
    sent[0].listener.onAccepted!(false);
    advance(30);
    sent[0].listener.onChunk(Buffer.from('data: a\n\n'));
    advance(70);
    sent[0].listener.onChunk(Buffer.from('data: b\n\n'));
    sent[0].listener.onCompleted(USED, 'stop');
    expect(observed[0].phases).toEqual({ admittedMs: 1_000, dispatchedMs: 1_003, startedMs: 1_213, firstTokenMs: 1_243, endedMs: 1_313 });
  });

  test('a job that waited in its agent\'s queue and ended there (its deadline): no start, no first token', () => {
    const { work, sent, observed, advance } = ticket();
    work.dispatch(new RecordingListener());
    sent[0].listener.onAccepted!(true);
    advance(500);
    sent[0].listener.onFailed({ code: 'deadline_exceeded', message: 'job deadline passed', engineStatus: 0, engineBody: null, usage: undefined });
    expect(observed[0].phases).toEqual({ admittedMs: 1_000, dispatchedMs: 1_000, endedMs: 1_500 });
  });

  test('a batch line settled without a job (answered by the runner): admitted and ended only', () => {
    const { work, observed, advance } = ticket({ settleWhen: 'explicit' });
    advance(20);
    work.settle('failed', undefined, null, { errorCode: 'invalid_request' });
    expect(observed[0].phases).toEqual({ admittedMs: 1_000, endedMs: 1_020 });
  });
});
