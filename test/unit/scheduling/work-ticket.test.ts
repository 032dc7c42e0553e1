/**
 * WorkTicket: every hold taken at admission goes back on every path a request ends by, once —
 * settled to the usage of the job's terminal event (an aborted stream is metered for what it
 * delivered), or released whole when no job was ever sent (and then no usage record).
 */
import type { Job, JobListener } from '../../../control-plane/dispatch/job';
import { AppError } from '../../../control-plane/errors/app-error';
import type { RateLimitDecision, TokenHold } from '../../../control-plane/rate-limits/rate-limit-decision';
import type { UsageInput } from '../../../control-plane/usage/usage-recorder';
import { WorkTicket, type TicketOwner, type TicketParts, type WorkOutcome } from '../../../control-plane/pipeline/work-ticket';
import type { Usage } from '../../../proto/worker/v1';
import { RecordingListener, thrownCode } from './fakes';

const HOLD = { apiKeyId: 'key_1', day: 20_000, tokens: 1_030, shared: false } as TokenHold;
const DECISION: RateLimitDecision = { remainingRequests: 59, resetRequestsSeconds: 60, remainingTokens: 900, resetTokensSeconds: 3_600, hold: HOLD };
const OWNER: TicketOwner = { workspaceId: 'ws_owner', apiKeyId: 'key_1', deploymentId: 'dep_owner', sharedModel: null, endpoint: 'chat.completions', stream: true, recordsReplica: true };
const USED: Usage = { promptTokens: 10, completionTokens: 30, totalTokens: 40 };

function ticket(options: { owner?: Partial<TicketOwner>; guest?: boolean; failSend?: AppError } = {}) {
  let clock = 5_000;
  const settles: Array<{ hold: TokenHold; used: number }> = [];
  const records: UsageInput[] = [];
  const tokens: unknown[][] = [];
  const sent: Array<{ listener: JobListener; body: Buffer | undefined }> = [];
  const finished: Array<[WorkOutcome, Usage | undefined]> = [];
  const firstTokens: number[] = [];
  const job = { id: 'job_1', replicaId: 'rep_1', finished: false, cancel() {}, consumed() {} } as unknown as Job;
  const parts: TicketParts = {
    send(listener, body) {
      if (options.failSend) throw options.failSend;
      sent.push({ listener, body });
      return job;
    },
    firstToken: (ms) => void firstTokens.push(ms),
    ...(options.guest ? { finish: (outcome: WorkOutcome, usage: Usage | undefined) => void finished.push([outcome, usage]) } : {}),
  };
  const settlement = {
    rateLimiter: { settle: (hold: TokenHold, used: number) => void settles.push({ hold, used }) },
    usage: { record: (input: UsageInput) => void records.push(input) },
    metrics: { recordTokens: (label: string, prompt: number, completion: number) => void tokens.push([label, prompt, completion]) },
    now: () => clock,
  };
  const work = new WorkTicket(DECISION, { ...OWNER, ...options.owner }, parts, settlement, 4_000);
  return { work, job, settles, records, tokens, sent, finished, firstTokens, advance: (ms: number) => (clock += ms) };
}

describe('WorkTicket settlement', () => {
  test('settle replaces the hold by the usage, writes one record and the token metrics; later settles and close do nothing', () => {
    const { work, job, settles, records, tokens } = ticket();
    expect(work.dispatch(new RecordingListener())).toBe(job);
    work.settle('succeeded', USED, 'rep_3');
    work.settle('failed', { promptTokens: 1, completionTokens: 1, totalTokens: 2 }, 'rep_4');
    work.close();
    expect(settles).toEqual([{ hold: HOLD, used: 40 }]);
    expect(settles[0].hold).toBe(HOLD);
    expect(records).toEqual([{
      workspaceId: 'ws_owner', apiKeyId: 'key_1', deploymentId: 'dep_owner', sharedModel: null, replicaId: 'rep_3', endpoint: 'chat.completions', status: 'succeeded',
      stream: true, promptTokens: 10, completionTokens: 30, totalTokens: 40, latencyMs: 1_000, createdAt: new Date(4_000),
    }]);
    expect(tokens).toEqual([['dep_owner', 10, 30]]);
  });

  test('a terminal event without usage settles to 0 and records zeros, without token metrics', () => {
    const { work, settles, records, tokens } = ticket();
    work.dispatch(new RecordingListener());
    work.settle('failed', undefined, 'rep_3');
    expect(settles).toEqual([{ hold: HOLD, used: 0 }]);
    expect(records).toMatchObject([{ status: 'failed', promptTokens: 0, completionTokens: 0, totalTokens: 0, replicaId: 'rep_3' }]);
    expect(tokens).toEqual([]);
  });

  test('a guest\'s record names the owner\'s deployment and the shared model, never the replica; its label is the shared model; the guest is finished after the record', () => {
    const { work, records, tokens, finished } = ticket({ owner: { deploymentId: 'dep_provider', sharedModel: 'shared/acme/chat-8b', recordsReplica: false }, guest: true });
    expect(work.label).toBe('shared/acme/chat-8b');
    work.dispatch(new RecordingListener());
    work.settle('canceled', USED, 'rep_provider');
    expect(records).toMatchObject([{ deploymentId: 'dep_provider', sharedModel: 'shared/acme/chat-8b', replicaId: null, status: 'canceled', totalTokens: 40 }]);
    expect(tokens).toEqual([['shared/acme/chat-8b', 10, 30]]);
    expect(finished).toEqual([['canceled', USED]]);
  });

  test('each dispatch sends one job with its own body (embedding batches); one settle covers them all', () => {
    const { work, sent, records, settles } = ticket({ owner: { endpoint: 'embeddings', stream: false } });
    const listener = new RecordingListener();
    const bodies = [Buffer.from('a'), Buffer.from('b')];
    for (const body of bodies) work.dispatch(listener, body);
    expect(sent).toEqual(bodies.map((body) => ({ listener, body })));
    work.settle('succeeded', USED, 'rep_1');
    work.close();
    expect(records).toHaveLength(1);
    expect(settles).toHaveLength(1);
  });

  test('firstToken passes the milliseconds on', () => {
    const { work, firstTokens } = ticket();
    work.firstToken(320);
    expect(firstTokens).toEqual([320]);
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
    const { work, settles, records, finished, advance } = ticket({ guest: true });
    work.dispatch(new RecordingListener());
    work.close(); // the client left; the route canceled the job
    expect(settles).toEqual([]);
    expect(records).toEqual([]);
    expect(finished).toEqual([]);
    advance(2_000);
    work.settle('canceled', USED, 'rep_1');
    expect(settles).toEqual([{ hold: HOLD, used: 40 }]);
    expect(records).toMatchObject([{ status: 'canceled', totalTokens: 40, completionTokens: 30, latencyMs: 3_000 }]);
    expect(finished).toEqual([['canceled', USED]]);
    work.close();
    expect(settles).toHaveLength(1);
  });

  test('a settle after a release (a stray late event) changes nothing', () => {
    const { work, settles, records } = ticket();
    work.close();
    work.settle('succeeded', USED, 'rep_1');
    expect(settles).toEqual([{ hold: HOLD, used: 0 }]);
    expect(records).toEqual([]);
  });
});
