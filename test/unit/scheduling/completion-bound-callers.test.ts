/**
 * How many tokens a request can produce is one answer for every hold that counts it: the TPD
 * hold of a live request and of a batch line, and a guest's credit screen and credit hold, each
 * equal to what the engine may write for the body it is sent. The guest cases run the real
 * InferencePipeline over the real SharedServing and SharedPool; only the rate limiter and the
 * billing are recording fakes. (Before pipeline/completion-bound.ts, a guest request without a
 * bound held TPD for 1,024 completion tokens while its credit and its body said the guest
 * default, and a TPD clamp could lift its bound above that default.)
 */
import type { AuthenticatedKey } from '../../../control-plane/api-keys/api-key.service';
import type { Batch } from '../../../control-plane/batches/batch.entities';
import type { ClaimedLine } from '../../../control-plane/batches/batch-store';
import { readLineInput } from '../../../control-plane/batches/line-input';
import type { SharedPrices } from '../../../control-plane/deployments/sharing-eligibility';
import type { DispatchRequest, Job } from '../../../control-plane/dispatch/job';
import { InferencePipeline, type PipelineParts, type TextWork } from '../../../control-plane/pipeline/inference-pipeline';
import type { RateLimitDecision, TokenHold } from '../../../control-plane/rate-limits/rate-limit-decision';
import { SharedServing, type Reservation } from '../../../control-plane/sharing/shared-serving';
import { RecordingListener } from './fakes';
import { chatModel, deployment, SHARED_MODEL, sharingWorld } from './sharing-fixtures';

const GUEST: AuthenticatedKey = { id: 'key_guest', workspaceId: 'ws_guest', rpmLimit: 60, tpdLimit: 1_000_000, creditExhausted: false };
const OWNER: AuthenticatedKey = { id: 'key_owner', workspaceId: 'ws_owner', rpmLimit: 60, tpdLimit: 1_000_000, creditExhausted: false };
/** The guests' default bound in these tests (SHARED_DEFAULT_MAX_TOKENS), unlike the 1,024 an owner's unbounded request is held for. */
const GUEST_DEFAULT = 256;
/** Completion tokens an owner's request without a bound is held for (DEFAULT_COMPLETION_HOLD). */
const OWNER_ASSUMED = 1_024;
const MESSAGES = [{ role: 'user', content: 'how many tokens may you write?' }];

/** The most the engine will write for a job: its body's bound (max_completion_tokens, else max_tokens) × n, read from what it is sent. */
function engineBound(request: DispatchRequest): number {
  const body = JSON.parse(request.body.toString());
  return (body.max_completion_tokens ?? body.max_tokens) * (body.n ?? 1);
}

function world(options: { tpdLeft?: number } = {}) {
  const sharing = sharingWorld({ config: { defaultGuestMaxTokens: GUEST_DEFAULT } });
  sharing.update({ workspaceId: 'ws_owner' });
  sharing.replica({ max: 16 });
  const billing = {
    screened: [] as Array<{ promptBytes: number; completion: number }>,
    reserved: [] as Array<{ promptBytes: number; completion: number }>,
    screen(_workspaceId: string, promptBytes: number, completion: number) {
      billing.screened.push({ promptBytes, completion });
      return true;
    },
    reserve(workspaceId: string, promptBytes: number, completion: number): Reservation {
      billing.reserved.push({ promptBytes, completion });
      return { id: `res_${billing.reserved.length}`, workspaceId, amount: '0.001', prepaid: true };
    },
    settle(_reservation: Reservation, _usage: unknown, _prices: SharedPrices) {},
    release() {},
  };
  const shared = new SharedServing(sharing.pool, sharing.dispatcher, billing, sharing.config, sharing.log.logger, null);
  // The day's budget: a hold past what is left of it is reported over (the pipeline then clamps the completion).
  const rate = {
    /** The tokens each admission holds, after any clamp lowered them. */
    holds: [] as number[],
    async admit(key: AuthenticatedKey, holdTokens = 0): Promise<RateLimitDecision> {
      rate.holds.push(holdTokens);
      const hold = { apiKeyId: key.id, day: 20_000, tokens: holdTokens, shared: false } as TokenHold;
      const overLimitTokens = Math.max(0, holdTokens - (options.tpdLeft ?? Number.POSITIVE_INFINITY));
      return { remainingRequests: 59, resetRequestsSeconds: 60, remainingTokens: 1_000, resetTokensSeconds: 3_600, hold, overLimitTokens };
    },
    resize(hold: TokenHold, tokens: number): TokenHold {
      rate.holds[rate.holds.length - 1] = tokens;
      return { ...hold, tokens };
    },
    settle() {},
    refusalNow: () => null,
  };
  const sent: DispatchRequest[] = [];
  const jobs = {
    dispatch(request: DispatchRequest) {
      sent.push(request);
      return { id: 'job_owner', request } as unknown as Job;
    },
  };
  const pipeline = new InferencePipeline({
    catalog: { find: (id: string) => (id === SHARED_MODEL ? chatModel() : undefined) },
    deployments: { findBySlug: async () => null },
    rateLimiter: rate, jobs, shared, requests: {}, usage: { record() {} },
    metrics: { recordTimeToFirstToken() {} },
    cacheSalts: { of: (workspaceId: string) => `salt-of-${workspaceId}` },
  } as unknown as PipelineParts);
  return { pipeline, rate, billing, sent };
}

function work(fields: Record<string, unknown>, model: string | undefined): TextWork {
  return {
    endpoint: 'chat.completions', body: Buffer.from(JSON.stringify(fields)), fields, model, stream: false, includeUsage: false,
    deadlineUnixMs: 9_000_000, streamWindowBytes: 0, servedBy: () => 'POST /v1/chat/completions',
  };
}

/** A guest's chat through the gateway's steps: the screen on the scanned fields, then admission and dispatch of the parsed body. */
async function guestRequest(bound: Record<string, unknown>, options: { tpdLeft?: number } = {}) {
  const { pipeline, rate, billing } = world(options);
  const fields = { model: `shared/${SHARED_MODEL}`, messages: MESSAGES, ...bound };
  const scanned = Object.fromEntries(['model', 'max_tokens', 'max_completion_tokens', 'n'].filter((name) => name in fields).map((name) => [name, fields[name as keyof typeof fields]]));
  const body = Buffer.from(JSON.stringify(fields));
  const { model, refusal } = pipeline.screenShared(GUEST, { model: fields.model, fields: scanned, bodyBytes: body.length }, () => {});
  expect(refusal).toBeNull();
  const ticket = await pipeline.admitShared(GUEST, work(fields, fields.model), () => {}, model);
  const job = ticket.dispatch(new RecordingListener());
  return { engine: job.request, tpdHold: rate.holds[0], screened: billing.screened[0], reserved: billing.reserved[0] };
}

describe('every hold counts the same completion bound', () => {
  test.each<[string, Record<string, unknown>, number]>([
    ['max_tokens', { max_tokens: 100 }, 100],
    ['only max_completion_tokens', { max_completion_tokens: 40 }, 40],
    ['max_completion_tokens and max_tokens', { max_completion_tokens: 40, max_tokens: 100 }, 40],
    ['neither: the guest default, written into the body', {}, GUEST_DEFAULT],
    ['neither, n = 3', { n: 3 }, 3 * GUEST_DEFAULT],
    ['max_completion_tokens, n = 2', { max_completion_tokens: 40, n: 2 }, 80],
  ])('a guest\'s request with %s: the TPD hold, the credit screen and the credit hold count what the engine may write', async (_name, bound, expected) => {
    const { engine, tpdHold, screened, reserved } = await guestRequest(bound);
    expect(engineBound(engine)).toBe(expected);
    expect({ tpdHold, screened: screened.completion, reserved }).toEqual({
      tpdHold: engine.body.length + expected,
      screened: expected,
      reserved: { promptBytes: engine.body.length, completion: expected },
    });
  });

  // The clamp lowers only the completion, by how far the hold passes what is left of the day
  // beyond its body's bytes (the bytes are far above the prompt's tokens).
  test.each<[string, number, number]>([
    ['500 tokens left: the guest default fits, nothing is clamped (lowering from 1,024 gave it 500, above its default)', 500, GUEST_DEFAULT],
    ['156 tokens left: the default is lowered to 156', 156, 156],
  ])('a guest\'s request without a bound on a day with %s; the TPD and credit holds count the same', async (_name, tpdLeft, expected) => {
    const { engine, tpdHold, reserved } = await guestRequest({}, { tpdLeft });
    expect(engineBound(engine)).toBe(expected);
    expect(tpdHold).toBe(engine.body.length + expected);
    expect(reserved).toEqual({ promptBytes: engine.body.length, completion: expected });
  });

  test.each<[string, Record<string, unknown>, number]>([
    ['only max_completion_tokens', { max_completion_tokens: 40 }, 40],
    ['neither (the engine is not told; the hold assumes 1,024)', {}, OWNER_ASSUMED],
    ['n = 3', { max_tokens: 10, n: 3 }, 30],
  ])('an owner\'s request and the same request as a batch line hold the same tokens: %s', async (_name, bound, completion) => {
    const { pipeline, rate, sent } = world();
    const fields = { messages: MESSAGES, ...bound };
    const live = work(fields, undefined);
    const ticket = await pipeline.admitText(OWNER, deployment({ id: 'dep_owner', workspaceId: 'ws_owner', sharing: 'not_shared' }), live);
    ticket.dispatch(new RecordingListener());
    expect(sent[0].body).toBe(live.body); // an owner's body goes to the engine as it came
    const line = await readLineInput(
      { body: async () => live.body }, { check: () => ({ ok: true, fields }) },
      { endpoint: '/v1/chat/completions' } as Batch, chatModel(), {} as ClaimedLine,
    );
    expect({ live: rate.holds[0], line }).toEqual({ live: live.body.length + completion, line: { kind: 'ready', body: live.body, holdTokens: live.body.length + completion } });
  });
});
