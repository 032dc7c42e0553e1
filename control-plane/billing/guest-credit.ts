import type { Logger } from 'pino';
import type { ClusterNotifier } from '../events/cluster-notifier';
import { moneyOf, tokenCost, unitPrices, unitsOf, type UnitPrices, type Units } from './credit-units';
import {
  announceAvailable, checkPrices, checkSettlement, checkTokens, leaseAmounts, writeLeases,
  type LeaseState, type Reservation, type SettlementItem, type SharedBilling, type SharedUsage, type TokenPrices,
} from './shared-billing';

export interface GuestCreditOptions {
  /** How often settled guest requests are written to the ledger (one transaction for all of them). */
  settleIntervalMs: number;
  /** A lease stops counting this long after it was last written (a crashed server's leases). */
  leaseTtlMs: number;
  /** A lease with no guest request in flight is given back after this long without an admission. */
  leaseIdleMs: number;
  /** A lease that must grow takes room for this many more requests like the one that needed it. */
  leaseRequests: number;
  /** Settlements written per transaction, at most. @default 1000 */
  maxBatch?: number;
  now?: () => number;
}

/** What this server knows of one guest workspace's credit. All amounts in ledger units (credit-units.ts). */
interface Account {
  readonly workspaceId: string;
  /** This server's lease of the workspace's credit: its row in `credit_reservations`. */
  readonly leaseId: string;
  /** undefined: not read yet (or forgotten); true: postpaid (nothing is held, nothing refused). */
  postpaid: boolean | undefined;
  /** The lease's amount, as this server last wrote it. */
  lease: Units;
  /** Worst cases of the requests admitted against the lease and not yet settled or released. */
  held: Units;
  /** Costs of requests settled in memory and not yet written to the ledger: still covered by the lease. */
  pending: Units;
  /** The balance minus every hold in the cluster (this lease included) as last announced; null when unknown. */
  available: Units | null;
  /** Until when `available` holds without a new announcement: the first of the holds it counted expires then (a crashed server's lease). */
  availableUntil: number;
  lastAdmitAt: number;
  lastWrittenAt: number;
  /** The lease is being given back: admissions wait for that transaction (they take the growth path). */
  releasing: boolean;
}

/** A request's hold against its server's lease. */
interface LeaseHold extends Reservation {
  readonly units: Units;
  done: boolean;
}

interface Queued {
  readonly item: SettlementItem;
  readonly account: Account;
  /** In memory, to the unit what the ledger will write. */
  readonly cost: Units;
  readonly prepaid: boolean;
  /** Batches it was in that failed. */
  failures: number;
}

const ONE_UNIT = 1n;
/** A settlement in this many failed batches is written alone next; alone, after MAX_FAILURES, it is given up (logged with its id). */
const SUSPECT_AFTER = 2;
const MAX_FAILURES = 5;
const MAX_ACCOUNTS = 100_000;
/** An account with nothing leased, held or pending is forgotten after this long unused. */
const ACCOUNT_IDLE_MS = 600_000;

/**
 * Guest credit decided in memory, written in batches. Each server leases part of a prepaid
 * guest workspace's credit (one hold row per server and workspace, `lease_<server>_<workspace>`,
 * taken under the workspace's row lock like any hold, so leases and holds of all servers never
 * add up to more than the balance) and admits guest requests against it in memory: a request
 * holds its worst case from the lease, its settlement moves that hold to `pending`, and every
 * `settleIntervalMs` one transaction writes every pending settlement (`SharedBilling.settleMany`:
 * idempotent per request) and shrinks each lease by exactly what its guest was charged there,
 * so the balance falls and the lease shrinks together. The request path touches PostgreSQL
 * only when a lease must grow (room for `leaseRequests` more requests at a time).
 *
 * What each server also knows, to refuse in memory (402) what the credit cannot cover: the
 * workspace's `available` credit (balance minus every hold, every server's lease included),
 * which every transaction that changes it announces on the cluster channel (`guest-credit`,
 * delivered on commit, in commit order) and which a top-up (the key cache's `*` notification)
 * or a lost notification connection makes unknown again (the next request reads it).
 *
 * Crash safety: a lease is a hold, never a charge; a crashed server's leases expire after
 * `leaseTtlMs` (the credit comes back, nothing was taken). Settlements not yet written when a
 * server crashes (at most `settleIntervalMs` of them) are lost on both sides alike, the guest not
 * debited and the owner not credited, so the ledger still balances; a graceful stop writes them.
 * A batch whose outcome is unknown (the connection broke on COMMIT) is written again: rows that
 * made it are skipped, and balances and leases move only by the rows written then.
 */
export class GuestCredit {
  private readonly accounts = new Map<string, Account>();
  private queue: Queued[] = [];
  private readonly prices = new WeakMap<TokenPrices, UnitPrices>();
  /** Database work (lease growth, batches) runs one at a time: each sees what the one before it left in memory. */
  private chain: Promise<unknown> = Promise.resolve();
  private flushQueued = false;
  private timer: NodeJS.Timeout | undefined;
  private sequence = 0;
  private idleTicks = 0;
  private stopped = false;
  private readonly now: () => number;
  private readonly maxBatch: number;

  constructor(
    private readonly billing: Pick<SharedBilling, 'leaseCredit' | 'settleMany'>,
    private readonly serverId: string,
    notifier: Pick<ClusterNotifier, 'on' | 'onReset'> | null,
    private readonly logger: Logger,
    private readonly options: GuestCreditOptions,
  ) {
    this.now = options.now ?? Date.now;
    this.maxBatch = options.maxBatch ?? 1_000;
    notifier?.on('guest-credit', (payload) => this.announced(payload));
    notifier?.onReset(() => this.forgetAvailable());
  }

  start(): void {
    this.timer = setInterval(() => this.scheduleFlush(), this.options.settleIntervalMs);
    this.timer.unref();
  }

  /** Writes what is pending and gives back every lease with nothing in flight. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.stopped = true;
    await this.serial(() => this.flush());
    // A batch cut at maxBatch leaves the rest for one more (a failed one is logged and left: its holds expire).
    while (this.queue.length > 0) {
      const before = this.queue.length;
      await this.serial(() => this.flush());
      if (this.queue.length >= before) break;
    }
  }

  /**
   * In memory only: false when the guest's credit surely cannot hold this request's worst case
   * (the request is refused with 402 without a database round trip). True when it can, or when
   * this server does not know yet (admission then asks the database).
   */
  screen(workspaceId: string, maxPromptTokens: number, maxCompletionTokens: number, prices: TokenPrices): boolean {
    const account = this.accounts.get(workspaceId);
    if (!account) return true;
    return this.verdict(account, tokenCost(maxPromptTokens, maxCompletionTokens, this.unitPrices(prices))) !== 'refuse';
  }

  /**
   * Holds the request's worst case (`maxPromptTokens × input + maxCompletionTokens × output`
   * per 1M) against this server's lease: synchronously when the lease has room, else after one
   * transaction that grows it (null when the credit cannot hold it: 402). A postpaid guest's
   * reservation holds nothing.
   */
  reserve(workspaceId: string, maxPromptTokens: number, maxCompletionTokens: number, prices: TokenPrices, _ttlMs?: number): Reservation | null | Promise<Reservation | null> {
    checkTokens(maxPromptTokens, 'maxPromptTokens');
    checkTokens(maxCompletionTokens, 'maxCompletionTokens');
    const cost = tokenCost(maxPromptTokens, maxCompletionTokens, this.unitPrices(prices));
    const account = this.account(workspaceId);
    const decided = this.decide(account, cost);
    return decided === 'grow' ? this.grow(account, cost) : decided;
  }

  /**
   * The request used `usage`: its cost is pending (the ledger gets it with the next batch) and
   * its hold goes back to the lease. Once per reservation; a second call changes nothing.
   */
  settle(reservation: Reservation, usage: SharedUsage, prices: TokenPrices): void {
    const hold = reservation as LeaseHold;
    if (hold.done) return;
    const item: SettlementItem = { ...usage, guestWorkspaceId: reservation.workspaceId, prices };
    try {
      checkSettlement(item);
    } catch (error) {
      // Nothing to write: the hold goes back (it would otherwise keep the lease forever).
      this.release(reservation);
      throw error;
    }
    hold.done = true;
    const account = this.account(reservation.workspaceId);
    const cost = tokenCost(usage.promptTokens, usage.completionTokens, this.unitPrices(prices));
    if (hold.prepaid) {
      account.held -= hold.units;
      account.pending += cost;
    }
    this.queue.push({ item, account, cost, prepaid: hold.prepaid, failures: 0 });
    if (this.queue.length >= this.maxBatch) this.scheduleFlush();
  }

  /** A request that never ran or failed on the platform's side: its hold goes back, nothing is charged. */
  release(reservation: Reservation): void {
    const hold = reservation as LeaseHold;
    if (hold.done) return;
    hold.done = true;
    if (hold.prepaid) this.account(reservation.workspaceId).held -= hold.units;
  }

  /** Writes pending settlements now (tests; the timer does it every `settleIntervalMs`). */
  flushNow(): Promise<void> {
    return this.serial(() => this.flush());
  }

  /** A top-up or a missed notification: what is known of available credit and postpaid state is read again. */
  forgetAvailable(): void {
    for (const account of this.accounts.values()) {
      account.available = null;
      // A top-up turns a postpaid workspace prepaid; nothing turns a prepaid one postpaid.
      if (account.postpaid === true) account.postpaid = undefined;
    }
  }

  /** What this server holds for a workspace, in decimal text (tests, diagnostics). */
  describe(workspaceId: string): { lease: string; held: string; pending: string; available: string | null; postpaid: boolean | undefined } | null {
    const account = this.accounts.get(workspaceId);
    if (!account) return null;
    return {
      lease: moneyOf(account.lease), held: moneyOf(account.held), pending: moneyOf(account.pending),
      available: account.available === null ? null : moneyOf(account.available), postpaid: account.postpaid,
    };
  }

  get pendingSettlements(): number {
    return this.queue.length;
  }

  /** Takes the hold when memory can decide (room in the lease, a postpaid guest), null when it surely cannot be held, else 'grow'. */
  private decide(account: Account, cost: Units): LeaseHold | null | 'grow' {
    const verdict = this.verdict(account, cost);
    if (verdict === 'postpaid') return this.hold(account, cost, false);
    if (verdict === 'room') return this.hold(account, cost, true);
    return verdict === 'refuse' ? null : 'grow';
  }

  /** What memory knows, without taking anything. */
  private verdict(account: Account, cost: Units): 'postpaid' | 'room' | 'refuse' | 'grow' {
    if (account.postpaid === true) return 'postpaid';
    if (account.postpaid === undefined) return 'grow';
    const need = max(cost, ONE_UNIT);
    const free = account.lease - account.held - account.pending;
    if (!account.releasing && need <= free) return 'room';
    const available = this.knownAvailable(account);
    return available !== null && need > free + available ? 'refuse' : 'grow';
  }

  private hold(account: Account, cost: Units, prepaid: boolean): LeaseHold {
    if (prepaid) account.held += cost;
    account.lastAdmitAt = this.now();
    return { id: `${account.leaseId}.${++this.sequence}`, workspaceId: account.workspaceId, amount: moneyOf(cost), prepaid, units: prepaid ? cost : 0n, done: false };
  }

  /** The lease cannot hold the request: grow it (one transaction), then decide again; twice at most, as others may take the room meanwhile. */
  private async grow(account: Account, cost: Units): Promise<Reservation | null> {
    for (let attempt = 0; attempt < 2; attempt++) {
      await this.serial(() => this.growLease(account, cost));
      const decided = this.decide(account, cost);
      if (decided !== 'grow') return decided;
    }
    return null;
  }

  private async growLease(account: Account, cost: Units): Promise<void> {
    // Another request's growth (or a batch) may have made room while this one waited its turn.
    if (this.verdict(account, cost) !== 'grow') return;
    const need = max(cost, ONE_UNIT);
    const decide = (state: LeaseState): string | null => {
      const balance = unitsOf(state.balance);
      const mine = unitsOf(state.mine);
      const room = balance - unitsOf(state.others);
      // What this lease must cover anyway: requests in flight and settlements not yet written (a
      // lease that expired while they ran is restored as far as the credit allows).
      const covered = max(mine, min(room, account.held + account.pending));
      const wanted = account.held + account.pending + need;
      if (room < wanted) return covered === mine ? null : moneyOf(covered);
      return moneyOf(max(mine, min(room, wanted + need * BigInt(this.options.leaseRequests))));
    };
    const outcome = await this.billing.leaseCredit(account.workspaceId, account.leaseId, this.options.leaseTtlMs, decide, this.serverId);
    if (outcome.postpaid) {
      account.postpaid = true;
      return;
    }
    account.postpaid = false;
    account.lease = unitsOf(outcome.lease);
    this.learn(account, outcome.available, outcome.validForMs);
    account.lastWrittenAt = this.now();
  }

  private scheduleFlush(): void {
    if (this.flushQueued) return;
    this.flushQueued = true;
    void this.serial(() => {
      this.flushQueued = false;
      return this.flush();
    });
  }

  /**
   * One transaction: the pending settlements (up to maxBatch), and the leases that change with
   * them (shrunk by what their guest was charged), that are renewed (a third of their TTL old),
   * or given back (nothing in flight for `leaseIdleMs`); then the available credit announced.
   */
  private async flush(): Promise<void> {
    const now = this.now();
    // A settlement that keeps failing is written alone, so one bad row cannot hold up every other guest's.
    const batch = this.queue.length > 0 && this.queue[0].failures >= SUSPECT_AFTER ? this.queue.slice(0, 1) : this.queue.slice(0, this.maxBatch);
    const touched = new Set<Account>();
    for (const queued of batch) if (queued.account.lease > 0n || queued.prepaid) touched.add(queued.account);
    for (const account of this.leased()) {
      const idle = account.held === 0n && (this.stopped || now - account.lastAdmitAt >= this.options.leaseIdleMs);
      if (idle) account.releasing = true;
      if (idle || now - account.lastWrittenAt >= this.options.leaseTtlMs / 3) touched.add(account);
    }
    if (batch.length === 0 && touched.size === 0) {
      this.evictIdle(now);
      return;
    }
    const accounts = [...touched];
    const batchCost = new Map<Account, Units>();
    for (const queued of batch) if (queued.prepaid) batchCost.set(queued.account, (batchCost.get(queued.account) ?? 0n) + queued.cost);
    try {
      const { result } = await this.billing.settleMany(batch.map((queued) => queued.item), {
        lockAlso: accounts.map((account) => account.workspaceId),
        within: async (manager, charged) => {
          const current = await leaseAmounts(manager, accounts.map((account) => account.leaseId));
          const leases = accounts.map((account) => {
            let amount = unitsOf(current.get(account.leaseId) ?? '0') - unitsOf(charged.get(account.workspaceId) ?? '0');
            // Given back: only what settlements after this batch still need stays (none, unless the batch was cut at maxBatch).
            if (account.releasing) amount = min(amount, account.pending - (batchCost.get(account) ?? 0n));
            return { id: account.leaseId, workspaceId: account.workspaceId, amount: moneyOf(max(amount, 0n)) };
          });
          await writeLeases(manager, leases, this.options.leaseTtlMs);
          const prepaidGuests = new Set([...batchCost.keys()].map((account) => account.workspaceId));
          for (const account of accounts) prepaidGuests.add(account.workspaceId);
          const available = await announceAvailable(manager, [...prepaidGuests], this.serverId);
          return { leases, available };
        },
      });
      this.queue = this.queue.slice(batch.length);
      for (const [account, cost] of batchCost) account.pending -= cost;
      for (const lease of result!.leases) {
        const account = this.accounts.get(lease.workspaceId)!;
        account.lease = unitsOf(lease.amount);
        account.lastWrittenAt = now;
        account.releasing = false;
      }
      for (const [workspaceId, { available, validForMs }] of result!.available) {
        const account = this.accounts.get(workspaceId);
        if (account) {
          this.learn(account, available, validForMs);
          account.postpaid = false;
        }
      }
    } catch (error) {
      for (const account of accounts) account.releasing = false;
      for (const queued of batch) queued.failures++;
      // Everything stays pending (and covered by the leases, which did not move): the next batch writes it.
      this.logger.error({ err: error, settlements: batch.length }, 'could not write guest settlements; retrying with the next batch');
      const [alone] = batch;
      if (batch.length === 1 && alone.failures >= MAX_FAILURES) {
        // Given up, as a single settlement that failed always was: its id is in the log for a manual settlement.
        this.queue = this.queue.filter((queued) => queued !== alone);
        if (alone.prepaid) alone.account.pending -= alone.cost;
        this.logger.error({ sharedRequestId: alone.item.sharedRequestId }, 'could not settle a guest request');
      }
    }
  }

  private leased(): Account[] {
    return [...this.accounts.values()].filter((account) => account.lease > 0n);
  }

  private evictIdle(now: number): void {
    // A scan now and then (every 256 idle ticks), or when the map is full.
    if (this.accounts.size < MAX_ACCOUNTS && ++this.idleTicks % 256 !== 0) return;
    for (const [workspaceId, account] of this.accounts) {
      const empty = account.lease === 0n && account.held === 0n && account.pending === 0n;
      if (empty && now - account.lastAdmitAt > ACCOUNT_IDLE_MS) this.accounts.delete(workspaceId);
    }
  }

  /** `<workspace>|<available>|<server>|<valid ms>` from another server's transaction (ours are already applied). */
  private announced(payload: string): void {
    const [workspaceId, available, origin, validMs] = payload.split('|');
    if (origin === this.serverId) return;
    const account = this.accounts.get(workspaceId);
    if (!account) return;
    try {
      this.learn(account, available, validMs ? Number(validMs) : null);
      account.postpaid = false;
    } catch {
      account.available = null;
    }
  }

  private learn(account: Account, available: string, validForMs: number | null): void {
    account.available = unitsOf(available);
    account.availableUntil = validForMs === null || !Number.isFinite(validForMs) ? Number.POSITIVE_INFINITY : this.now() + validForMs;
  }

  /** The available credit as last announced, while no hold it counted has expired since; null otherwise (the next request asks the database). */
  private knownAvailable(account: Account): Units | null {
    if (account.available === null || this.now() >= account.availableUntil) return null;
    return account.available;
  }

  private account(workspaceId: string): Account {
    let account = this.accounts.get(workspaceId);
    if (!account) {
      if (this.accounts.size >= MAX_ACCOUNTS) this.evictIdle(this.now());
      account = {
        workspaceId, leaseId: `lease_${this.serverId}_${workspaceId}`, postpaid: undefined, lease: 0n, held: 0n, pending: 0n,
        available: null, availableUntil: 0, lastAdmitAt: this.now(), lastWrittenAt: 0, releasing: false,
      };
      this.accounts.set(workspaceId, account);
    }
    return account;
  }

  /** Kept by the prices object: a shared model's prices are one object (SharedPool.priced), screened on every guest attempt. */
  private unitPrices(prices: TokenPrices): UnitPrices {
    let units = this.prices.get(prices);
    if (!units) {
      // Invalid prices (not an object included) are refused here, before anything is cached.
      const [inputPerMillion, outputPerMillion] = checkPrices(prices);
      units = unitPrices({ inputPerMillion, outputPerMillion });
      this.prices.set(prices, units);
    }
    return units;
  }

  private serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.chain.then(work, work);
    this.chain = next.catch(() => {});
    return next;
  }
}

function max(left: Units, right: Units): Units {
  return left > right ? left : right;
}

function min(left: Units, right: Units): Units {
  return left < right ? left : right;
}
