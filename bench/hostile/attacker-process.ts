/**
 * The attacker of one `bench:hostile` phase, in a process of its own (forked by
 * attacker-handle.ts), so the ordinary tenant's latencies do not include the attacker's own
 * event loop and the attacker's file descriptors are not the benchmark's (the half-open
 * connections take nearly all of a process's). Only ever connects to 127.0.0.1.
 *
 * IPC: {prepare: AttackJob} → {prepared} (or {failed}); {go} → {ready: seconds} once the attack
 * holds what it set out to; {stop} → {report}. The process exits when the benchmark goes away,
 * or 30 s after the job's deadline whatever happens.
 */
import type { AttackJob, AttackReport, HostileAttack } from './attack';
import { bodyBombs } from './attacks/body-bombs';
import { halfOpenConnections } from './attacks/half-open';
import { localReplicas } from './attacks/local-replicas';
import { nestedBatches } from './attacks/nested-batches';
import { slowBodies } from './attacks/slow-bodies';
import { slowUploads } from './attacks/slow-uploads';
import { subscriptions } from './attacks/subscriptions';
import { unreadDownloads } from './attacks/unread-downloads';
import { usageAliases } from './attacks/usage-aliases';

const ATTACKS: Record<string, (job: AttackJob) => HostileAttack> = {
  anonymous: bodyBombs, keyed: bodyBombs, 'nested-batches': nestedBatches, subscriptions, 'usage-aliases': usageAliases,
  'unread-downloads': unreadDownloads, 'slow-bodies': slowBodies, 'half-open': halfOpenConnections, 'slow-uploads': slowUploads,
  'local-replicas': localReplicas,
};

function worker(): void {
  let attack: HostileAttack | null = null;
  let report: Promise<AttackReport> | null = null;
  const stop = () => (report ??= attack!.stop());
  const send = (message: unknown) => process.connected && process.send!(message);
  process.on('message', (message: { prepare?: AttackJob; go?: true; stop?: true }) => {
    if (message.prepare) {
      const job = message.prepare;
      void (async () => {
        const make = ATTACKS[job.attack];
        if (!make) throw new Error(`no attack named ${job.attack}`);
        attack = make(job);
        await attack.prepare?.();
        // Bounded whatever the benchmark does: the attack stops at the deadline, the process 30 s later.
        setTimeout(() => void stop().finally(() => setTimeout(() => process.exit(0), 30_000)), job.deadlineMs).unref();
        send({ prepared: true });
      })().catch((error: Error) => send({ failed: error.stack ?? error.message }));
    } else if (message.go && attack) {
      const startedAt = performance.now();
      void attack.go().then(() => send({ ready: (performance.now() - startedAt) / 1000 }), (error: Error) => send({ failed: error.stack ?? error.message }));
    } else if (message.stop) {
      void stop().then((result) => send({ report: result }), (error: Error) => send({ failed: error.stack ?? error.message }));
    }
  });
  process.on('disconnect', () => process.exit(0));
}

if (require.main === module) worker();
