/**
 * The attack phases of `bench:hostile`: issue 19's body bombs and issue 33's findings, each
 * with what its attacker needs set up and the figures of its report that say what it achieved.
 */
import type { AttackerNeeds } from './attacker-setup';

export interface PhaseSpec {
  readonly name: string;
  readonly title: string;
  /** What was found (the issue, the commit): what this phase measures again. */
  readonly finding: string;
  readonly needs: AttackerNeeds;
  /** The ordinary tenant also uploads a small file every second (it is what the attack denies). */
  readonly tenantUploads?: boolean;
  /** The attacker's figures that sum the phase up in one line (keys of its report's `achieved`). */
  readonly headline: string[];
}

export const PHASES: PhaseSpec[] = [
  {
    name: 'anonymous', title: 'body bombs without a key', finding: 'issue 19: worst-case bodies stalled /healthz 5.2 s (ccfb970)',
    needs: { workspaces: 'none' }, headline: ['bodies answered', 'still running at the end'],
  },
  {
    name: 'keyed', title: 'body bombs with a key', finding: 'issue 19: with a key, 12.6 s and 1,457 MiB (ccfb970)',
    needs: { workspaces: 'tenant' }, headline: ['bodies answered', 'still running at the end'],
  },
  {
    name: 'nested-batches', title: 'a batch of nested lines', finding: 'issue 33: a 100 MB file of nested lines froze /healthz 9.2 s, again at each new batch',
    needs: { workspaces: 1, credit: 'postpaid', deployment: 'external' }, headline: ['batches created', 'seconds in validating (each, the last one waited for after the window)'],
  },
  {
    name: 'subscriptions', title: '40,000 subscriptions from one key', finding: 'issue 33: one key was allowed 200,000 subscriptions; at 40,000 others\' chat took 16.8 s',
    needs: { workspaces: 1, credit: 'postpaid', deployment: 'local' }, headline: ['subscriptions held (no error, socket open)', 'subscriptions that received an event'],
  },
  {
    name: 'usage-aliases', title: '450-alias usage queries', finding: 'issue 33: one query took 5.4 s; four held the pool and others\' createApiKey waited 10 s',
    needs: { workspaces: 1, credit: 'postpaid', seedUsage: true }, headline: ['one query alone (before the phase)', 'queries answered', 'query p50 / max ms'],
  },
  {
    name: 'unread-downloads', title: '25 unread downloads of a 100 MB file', finding: 'issue 33: whole files buffered; 25 unread downloads took the server to 2.6 GB',
    needs: { workspaces: 1, credit: 'postpaid', deployment: 'external' }, headline: ['downloads held unread'],
  },
  {
    name: 'slow-bodies', title: '500 slow bodies from a zero-credit key', finding: 'issue 33: bodies read before credit: 500 held 2.1 GB with 3.7 s stalls',
    needs: { workspaces: 1, credit: 'zero', deployment: 'external' }, headline: ['bodies held unanswered', 'MiB written to held bodies (kernel buffers included)'],
  },
  {
    name: 'half-open', title: '20,000 half-open connections', finding: 'issue 33: no connection cap; 19,980 half-open connections took all 20,000 descriptors',
    needs: { workspaces: 'none' }, headline: ['held at once (peak)', 'held open at the end', 'closed by the server (then opened again)'],
  },
  {
    name: 'slow-uploads', title: 'uploads that send nothing', finding: 'issue 33: two workspaces held the 512 MiB upload budget for 300 s',
    needs: { workspaces: 2, credit: 'postpaid', deployment: 'external' }, tenantUploads: true,
    headline: ['uploads held at the end', 'MiB declared by held uploads (what the server holds for them)'],
  },
  {
    name: 'local-replicas', title: 'local replicas from a zero-credit key', finding: 'issue 33: a zero-credit workspace started 8 agent processes on the host',
    needs: { workspaces: 1, credit: 'zero' }, headline: ['deployments created', 'replicas asked for', 'agent processes started (counted on the host)'],
  },
];

export const PHASE_NAMES = PHASES.map((phase) => phase.name);

export function phaseNamed(name: string): PhaseSpec {
  const phase = PHASES.find((candidate) => candidate.name === name);
  if (!phase) throw new Error(`--phases: unknown phase ${name} (${PHASE_NAMES.join(', ')})`);
  return phase;
}
