/**
 * SharedServing: a guest's request is admitted in a fixed order (credit flag, then the pool in
 * memory, then the credit hold in billing) so refusals stay cheap; a local slot is held while
 * credit is reserved so two guests never both take the last one; the worst-case cost held is
 * the bound the pipeline computed (completion-bound-callers.test.ts); a hold is released on every path the guest does
 * not pay for (refused after reserving, never dispatched, failed on the platform's side, no
 * tokens) and settled for what was used otherwise (succeeded, or canceled after tokens were sent). Billing is an in-memory fake; the pool is the real SharedPool (sharing-fixtures).
 */
import type { AuthenticatedKey } from '../../../control-plane/api-keys/api-key.service';
import type { Peer } from '../../../control-plane/cluster/server-registry';
import { Job, type DispatchRequest, type JobListener } from '../../../control-plane/dispatch/job';
import type { SharedPrices } from '../../../control-plane/deployments/sharing-eligibility';
import { SharedServing, type GuestBilling, type Reservation } from '../../../control-plane/sharing/shared-serving';
import { deferred, flush, RecordingListener, rejectedWith } from './fakes';
import { guestPeer, SHARED_MODEL, sharingWorld } from './sharing-fixtures';

const GUEST: AuthenticatedKey = { id: 'key_guest', workspaceId: 'ws_guest', rpmLimit: 60, tpdLimit: 1_000_000, creditExhausted: false };

/** Billing that holds credit in memory; a test may make `reserve` wait, refuse, or throw. */
class FakeBilling implements GuestBilling {
  readonly reserved: Array<{ workspaceId: string; promptBytes: number; maxCompletionTokens: number; ttlMs: number }> = [];
  readonly released: Reservation[] = [];
  readonly settled: Array<{ reservation: Reservation; usage: Parameters<GuestBilling['settle']>[1]; prices: SharedPrices }> = [];
  /** Decides each reservation: a hold (default), null (too little credit), or an error. */
  next: () => Promise<Reservation | null> = async () => this.hold();
  failSettlement = false;
  /** What `screen` answers (true: the credit may hold it), and what it was asked. */
  screenAnswer = true;
  readonly screened: Array<{ workspaceId: string; promptBytes: number; maxCompletionTokens: number }> = [];
  private sequence = 0;

  screen(workspaceId: string, maxPromptTokens: number, maxCompletionTokens: number): boolean {
    this.screened.push({ workspaceId, promptBytes: maxPromptTokens, maxCompletionTokens });
    return this.screenAnswer;
  }

  hold(): Reservation {
    return { id: `res_${++this.sequence}`, workspaceId: 'ws_guest', amount: '0.001', prepaid: true };
  }

  async reserve(workspaceId: string, maxPromptTokens: number, maxCompletionTokens: number, _prices: SharedPrices, ttlMs: number) {
    this.reserved.push({ workspaceId, promptBytes: maxPromptTokens, maxCompletionTokens, ttlMs });
    return await this.next();
  }

  async settle(reservation: Reservation, usage: Parameters<GuestBilling['settle']>[1], prices: SharedPrices): Promise<string> {
    if (this.failSettlement) throw new Error('ledger unavailable');
    this.settled.push({ reservation, usage, prices });
    return '0.0001';
  }

  async release(reservation: Reservation): Promise<void> {
    this.released.push(reservation);
  }

  /** Holds neither released nor settled. */
  get outstanding(): number {
    return this.reserved.length - this.released.length - this.settled.length;
  }
}

class FakeRelay {
  readonly runs: Array<{ peer: string; request: DispatchRequest }> = [];

  run(peer: Peer, request: DispatchRequest, listener: JobListener): Job {
    this.runs.push({ peer: peer.id, request });
    return new Job('relayed', request, listener, { replicaId: `${peer.id}/r`, cancelJob: () => {}, creditJob: () => {} });
  }
}

function serving(options: { peers?: Peer[]; relay?: boolean } = {}) {
  const world = sharingWorld({ peers: options.peers, config: { defaultGuestMaxTokens: 256, busyRetryAfterSeconds: 3 } });
  world.update({ workspaceId: 'ws_owner' });
  const billing = new FakeBilling();
  const relay = new FakeRelay();
  const shared = new SharedServing(world.pool, world.dispatcher, billing, world.config, world.log.logger, options.relay === false ? null : relay);
  const model = shared.resolve(`shared/${SHARED_MODEL}`);
  const body = (fields: Record<string, unknown>) => Buffer.from(JSON.stringify(fields));
  /** A guest's request bounded by `maxTokens` (the pipeline computed that bound and wrote it into the body). */
  const admit = (maxTokens = 100, key: AuthenticatedKey = GUEST) => shared.admit(key, model, maxTokens, body({ messages: [], max_tokens: maxTokens }));
  return { ...world, billing, relay, shared, model, admit };
}

const JOB = { kind: 'JOB_KIND_CHAT_COMPLETION', stream: true, includeUsage: true, deadlineUnixMs: 0 } as const;

describe('SharedServing model resolution', () => {
  test.each<[string, unknown, string]>([
    ['a model without the shared/ prefix', SHARED_MODEL, 'invalid_request'],
    ['a model that is not a string', 42, 'invalid_request'],
    ['a shared model nobody can share', 'shared/acme/unknown', 'model_not_found'],
  ])('refuses %s', (_name, id, code) => {
    const { shared } = serving();
    let caught: { code: string; param: string | null } | null = null;
    try {
      shared.resolve(id, 'model');
    } catch (error) {
      caught = error as { code: string; param: string | null };
    }
    expect(caught).toMatchObject({ code, param: 'model' });
  });

  test('resolves shared/<model-id> to the catalog model and its prices', () => {
    const { shared } = serving();
    expect(shared.resolve(`shared/${SHARED_MODEL}`)).toEqual({ modelId: SHARED_MODEL, prices: { inputPerMillion: '0.1', outputPerMillion: '0.4' } });
  });
});

describe('SharedServing admission', () => {
  test('admits onto the replica with a guest slot, naming its owner; the slot is held from admission until the job is on the agent', async () => {
    const world = serving();
    const connection = world.replica({ max: 8, workspaceId: 'ws_owner' });
    const reserving = deferred<Reservation | null>();
    world.billing.next = () => reserving.promise;
    const admitting = world.admit();
    expect(connection.reserved).toBe(1);
    expect(world.pool.guestSlots(connection)).toBe(5);
    reserving.resolve(world.billing.hold());
    const admission = await admitting;
    // Still held: between admission and dispatch no other guest may take it.
    expect(connection.reserved).toBe(1);
    expect(admission).toMatchObject({ deploymentId: 'dep_a', ownerWorkspaceId: 'ws_owner', workspaceId: 'ws_guest', target: { kind: 'replica', connection } });
    expect(admission.id).toMatch(/^shr_/);
    expect(world.pool.trafficOf(SHARED_MODEL).measures()).toMatchObject({ admitted: 1, refused: 0 });
    world.shared.dispatch(admission, JOB, new RecordingListener());
    expect([connection.reserved, connection.guestInFlight]).toEqual([0, 1]);
  });

  test('a hold the billing answers in memory admits without waiting; shared request ids never repeat', async () => {
    const world = serving();
    const connection = world.replica({ max: 16 });
    const sync = { ...world.billing.hold() };
    (world.billing as { reserve: unknown }).reserve = () => sync;
    const admissions = await Promise.all([world.admit(), world.admit(), world.admit()]);
    expect(admissions.map((admission) => admission.reservation)).toEqual([sync, sync, sync]);
    expect(new Set(admissions.map((admission) => admission.id)).size).toBe(3);
    expect(connection.reserved).toBe(3);
    for (const admission of admissions) await world.shared.finish(admission, 'failed', undefined);
    expect(connection.reserved).toBe(0); // finished unsent: each slot given back once
  });

  test('two guests racing for the last guest slot: the second is refused while the first reserves credit', async () => {
    const world = serving();
    world.replica({ max: 4, owners: 2 }); // headroom 1: one guest slot
    const reserving = deferred<Reservation | null>();
    world.billing.next = () => reserving.promise;
    const first = world.admit();
    const second = await rejectedWith(world.admit());
    expect(second.code).toBe('shared_pool_busy');
    expect(second.retryAfterSeconds).toBe(3);
    reserving.resolve(world.billing.hold());
    await expect(first).resolves.toMatchObject({ target: { kind: 'replica' } });
    expect(world.billing.reserved).toHaveLength(1);
  });

  test.each<[string, AuthenticatedKey, (world: ReturnType<typeof serving>) => void, string, number]>([
    ['no provider is left', GUEST, () => {}, 'shared_model_unavailable', 0],
    ['every provider is busy (counted as refused)', GUEST, (world) => world.replica({ max: 8, owners: 6 }), 'shared_pool_busy', 1],
  ])('refuses without reserving credit when %s', async (_name, key, setUp, code, refused) => {
    const world = serving();
    setUp(world);
    expect((await rejectedWith(world.admit(10, key))).code).toBe(code);
    expect(world.billing.reserved).toEqual([]);
    expect(world.pool.trafficOf(SHARED_MODEL).measures().refused).toBe(refused);
  });

  test('402 when credit cannot hold the worst case; the slot is given back and nothing is held', async () => {
    const world = serving();
    const connection = world.replica({ max: 8 });
    world.billing.next = async () => null;
    expect((await rejectedWith(world.admit())).code).toBe('insufficient_quota');
    expect(connection.reserved).toBe(0);
    expect(world.billing.released).toEqual([]);
    expect(world.pool.trafficOf(SHARED_MODEL).measures().admitted).toBe(0);
  });

  test('a billing error propagates and still gives the slot back', async () => {
    const world = serving();
    const connection = world.replica({ max: 8 });
    world.billing.next = async () => {
      throw new Error('database unreachable');
    };
    await expect(world.admit()).rejects.toThrow('database unreachable');
    expect(connection.reserved).toBe(0);
  });

  test.each<[string, 'draining' | 'closed']>([
    ['starts draining', 'draining'],
    ['disconnects', 'closed'],
  ])('the replica %s while credit is reserved: the hold is released and the guest told busy', async (_name, field) => {
    const world = serving();
    const connection = world.replica({ max: 8 });
    const reserving = deferred<Reservation | null>();
    world.billing.next = () => reserving.promise;
    const admitting = world.admit();
    connection[field] = true;
    const hold = world.billing.hold();
    reserving.resolve(hold);
    expect((await rejectedWith(admitting)).code).toBe('shared_pool_busy');
    expect(world.billing.released).toEqual([hold]);
    expect(connection.reserved).toBe(0);
    expect(world.pool.trafficOf(SHARED_MODEL).measures()).toMatchObject({ admitted: 0, refused: 1 });
  });

  test('holds the worst case it is given (the body\'s bytes of prompt, the completion bound) for the reservation TTL, and sends the body as it is', async () => {
    const world = serving();
    const connection = world.replica({ max: 8 });
    const body = Buffer.from('{"messages":[],"max_tokens":7,"n":3}');
    const admission = await world.shared.admit(GUEST, world.model, 21, body);
    expect(world.billing.reserved).toEqual([{ workspaceId: 'ws_guest', promptBytes: body.length, maxCompletionTokens: 21, ttlMs: 180_000 }]);
    expect(admission.body).toBe(body);
    const job = world.shared.dispatch(admission, JOB, new RecordingListener());
    expect(job.request.body).toBe(body);
    expect(connection.guestInFlight).toBe(1);
    // What the pipeline writes into a body that sets no bound (pipeline/completion-bound.ts).
    expect(world.shared.defaultMaxTokens).toBe(256);
  });

  test('admits onto a peer\'s replica when none here has a slot, without holding a local slot', async () => {
    const world = serving({ peers: [guestPeer('p1', { dep_a: { guestReady: 1, guestSlots: 2 } })] });
    const local = world.replica({ max: 8, owners: 7 });
    const admission = await world.admit();
    expect(admission).toMatchObject({ target: { kind: 'peer', deploymentId: 'dep_a' }, deploymentId: 'dep_a', ownerWorkspaceId: 'ws_owner' });
    expect(local.reserved).toBe(0);
  });
});

describe('SharedServing dispatch', () => {
  test('a guest job runs on the admitted replica, at guest priority, with the admitted body and model', async () => {
    const world = serving();
    const connection = world.replica({ max: 8 });
    const admission = await world.admit();
    const job = world.shared.dispatch(admission, JOB, new RecordingListener());
    expect(job.carrier).toBe(connection);
    expect(job.request).toMatchObject({ guest: true, deploymentId: 'dep_a', model: SHARED_MODEL, stream: true });
    expect(job.request.body).toBe(admission.body);
    expect(connection.guestInFlight).toBe(1);
    expect(connection.reserved).toBe(0);
  });

  test('a peer placement is relayed to that peer; without a relay client the guest is told busy', async () => {
    const peers = [guestPeer('p1', { dep_a: { guestReady: 1, guestSlots: 2 } })];
    const world = serving({ peers });
    const admission = await world.admit();
    world.shared.dispatch(admission, JOB, new RecordingListener());
    expect(world.relay.runs).toEqual([{ peer: 'p1', request: expect.objectContaining({ guest: true, deploymentId: 'dep_a', model: SHARED_MODEL }) }]);

    const alone = serving({ peers, relay: false });
    const stranded = await alone.admit();
    let code: string | undefined;
    try {
      alone.shared.dispatch(stranded, JOB, new RecordingListener());
    } catch (error) {
      code = (error as { code: string }).code;
    }
    expect(code).toBe('shared_pool_busy');
    // The caller then finishes it unsucceeded: the hold is released.
    await alone.shared.finish(stranded, 'failed', undefined);
    expect(alone.billing.released).toEqual([stranded.reservation]);
  });
});

describe('SharedServing settlement', () => {
  const USED = { promptTokens: 12, completionTokens: 30 };
  test.each<[string, 'succeeded' | 'failed' | 'canceled', { promptTokens: number; completionTokens: number } | undefined, 'released' | 'settled']>([
    ['never dispatched (the caller finishes it as failed)', 'failed', undefined, 'released'],
    ['failed on the platform\'s side after generating tokens: costs nothing', 'failed', USED, 'released'],
    ['canceled (the client left) after being sent tokens: charged for them', 'canceled', USED, 'settled'],
    ['canceled before any token', 'canceled', { promptTokens: 0, completionTokens: 0 }, 'released'],
    ['canceled without a usage report', 'canceled', undefined, 'released'],
    ['succeeded without a usage report', 'succeeded', undefined, 'released'],
    ['succeeded with usage', 'succeeded', USED, 'settled'],
  ])('%s', async (_name, outcome, usage, expected) => {
    const world = serving();
    world.replica({ max: 8 });
    const admission = await world.admit();
    await world.shared.finish(admission, outcome, usage);
    expect(world.billing.outstanding).toBe(0);
    if (expected === 'released') {
      expect(world.billing.released).toEqual([admission.reservation]);
      expect(world.billing.settled).toEqual([]);
    } else {
      expect(world.billing.released).toEqual([]);
      expect(world.billing.settled).toEqual([{
        reservation: admission.reservation,
        usage: { sharedRequestId: admission.id, ownerWorkspaceId: 'ws_owner', deploymentId: 'dep_a', modelId: SHARED_MODEL, ...USED },
        prices: { inputPerMillion: '0.1', outputPerMillion: '0.4' },
      }]);
    }
  });

  test('a job that fails on its agent ends with its hold released (agent → listener → finish)', async () => {
    const world = serving();
    const connection = world.replica({ max: 8 });
    const admission = await world.admit();
    const heard: string[] = [];
    const listener: JobListener = {
      onChunk: () => heard.push('chunk'),
      onOutput: () => heard.push('output'),
      onCompleted: () => heard.push('completed'),
      onFailed: (failure) => {
        heard.push(`failed:${failure.code}`);
        void world.shared.finish(admission, 'failed', failure.usage);
      },
    };
    const job = world.shared.dispatch(admission, JOB, listener);
    connection.onJobEvent({ jobId: job.id, event: 'failed', failed: { code: 'engine_error', message: 'boom', engineStatus: 500, engineBody: Buffer.alloc(0) } });
    await flush(1);
    expect(heard).toEqual(['failed:engine_error']);
    expect(world.billing.released).toEqual([admission.reservation]);
    expect(world.billing.settled).toEqual([]);
    expect(connection.guestInFlight).toBe(0);
  });

  test('a settlement error is logged with the request id, not thrown (the hold expires by itself)', async () => {
    const world = serving();
    world.replica({ max: 8 });
    const admission = await world.admit();
    world.billing.failSettlement = true;
    await expect(world.shared.finish(admission, 'succeeded', { promptTokens: 1, completionTokens: 1 })).resolves.toBeUndefined();
    expect(world.log.errors).toEqual(['could not settle a guest request']);
  });

  test('time to first token feeds the pool\'s measure', async () => {
    const world = serving();
    world.replica({ max: 16 });
    for (const ms of [100, 200, 300, 400, 500]) world.shared.firstToken(await world.admit(), ms);
    expect(world.pool.trafficOf(SHARED_MODEL).measures().recentTtftMs).toBe(300);
  });
});

describe('SharedServing screens (in memory, before the body is parsed)', () => {
  const OTHER: AuthenticatedKey = { ...GUEST, id: 'key_other', workspaceId: 'ws_other' };

  test('no provider: 503; no idle slot: 429 counted as refused; neither asks billing; each refusal is one error object per model', () => {
    const world = serving();
    const unavailable = [0, 1].map(() => world.shared.refusalNow(GUEST, world.model, 1, 10));
    expect(unavailable.map((error) => error?.code)).toEqual(['shared_model_unavailable', 'shared_model_unavailable']);
    expect(unavailable[0]).toBe(unavailable[1]);
    world.replica({ max: 8, owners: 6 });
    const busy = [0, 1].map(() => world.shared.refusalNow(GUEST, world.model, 1, 10));
    expect(busy.map((error) => [error?.code, error?.retryAfterSeconds])).toEqual([['shared_pool_busy', 3], ['shared_pool_busy', 3]]);
    expect(busy[0]).toBe(busy[1]);
    expect(world.pool.trafficOf(SHARED_MODEL).measures().refused).toBe(2);
    expect(world.billing.reserved).toEqual([]);
    expect(world.billing.screened).toEqual([]);
  });

  test('an idle slot passes the pool screen', () => {
    const world = serving();
    world.replica({ max: 8 });
    expect(world.shared.refusalNow(GUEST, world.model, 1, 10)).toBeNull();
  });

  test('credit screen asks billing in memory with the worst case it is given', () => {
    const world = serving();
    world.replica({ max: 8 });
    expect(world.shared.refusalNow(GUEST, world.model, 10, 321)).toBeNull();
    expect(world.billing.screened).toEqual([{ workspaceId: 'ws_guest', promptBytes: 321, maxCompletionTokens: 10 }]);
  });

  test('credit screen: a workspace without credit left (the key cache\'s flag) is 402 without asking billing, one error object per model', () => {
    const world = serving();
    world.replica({ max: 8 });
    const broke = { ...GUEST, creditExhausted: true };
    const errors = [0, 1].map(() => world.shared.refusalNow(broke, world.model, 1, 10));
    expect(errors[0]).toMatchObject({ code: 'insufficient_quota', message: 'the workspace has no credit left; add credit to continue' });
    expect(errors[1]).toBe(errors[0]);
    expect(world.billing.screened).toEqual([]);
  });

  test('credit screen: 402 insufficient_quota when billing says the credit cannot hold it', () => {
    const world = serving();
    world.replica({ max: 8 });
    world.billing.screenAnswer = false;
    expect(world.shared.refusalNow(GUEST, world.model, 1, 10)).toMatchObject({ code: 'insufficient_quota' });
  });

  test('the pool is screened before the credit: no idle slot is a 429 even for a workspace without credit, and billing is not asked', () => {
    const world = serving();
    world.replica({ max: 8, owners: 6 });
    world.billing.screenAnswer = false;
    expect(world.shared.refusalNow({ ...GUEST, creditExhausted: true }, world.model, 1, 10)).toMatchObject({ code: 'shared_pool_busy' });
    expect(world.billing.screened).toEqual([]);
  });

  test('fair share: a guest holding more slots than another that is waiting is refused the idle slot; the waiting one gets it', async () => {
    const world = serving();
    world.replica({ max: 8 }); // 6 guest slots
    const flooder = [];
    for (let index = 0; index < 6; index++) flooder.push(await world.admit(1, OTHER));
    // The pool is full: the small guest is refused for want of a slot, so it contends for the next one.
    expect((await rejectedWith(world.admit(1, GUEST))).code).toBe('shared_pool_busy');
    await world.shared.finish(flooder.pop()!, 'failed', undefined);
    const refused = world.shared.refusalNow(OTHER, world.model, 1, 10);
    expect(refused).toMatchObject({ code: 'shared_pool_busy', message: expect.stringMatching(/fair share/) });
    expect((await rejectedWith(world.admit(1, OTHER))).message).toMatch(/fair share/);
    const small = await world.admit(1, GUEST);
    expect(small.workspaceId).toBe('ws_guest');
  });

  test('fair share holds nothing back when no other guest is asking: a lone guest takes every idle slot', async () => {
    const world = serving();
    world.replica({ max: 8 });
    for (let index = 0; index < 6; index++) await world.admit(1, OTHER);
    expect((await rejectedWith(world.admit(1, OTHER))).message).toMatch(/no idle capacity now/);
  });
});
