import { fork, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import type { Sample } from './model';

/**
 * The guest flood runs in a client process of its own (guest-worker.ts, forked): a real owner does not
 * share an event loop with hundreds of guest refusals a second, so the owner's TTFT must not pay
 * for parsing them. Both client processes still share the machine's two cores with the server.
 * A job is one or more groups of guests: closed loops (`count`, a non-200 answer waits
 * `backoffMs`) or an open loop (`perSecond`), each with its workspace's key.
 */
export interface GuestGroup { who: string; key: string; count?: number; backoffMs?: number; perSecond?: number; maxInFlight?: number }
export interface GuestJob { url: string; body: string; groups: GuestGroup[] }

export class GuestClient {
  private readonly child: ChildProcess = fork(path.join(__dirname, 'guest-worker.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });

  /** `nice`: the guest client's CPU priority (0, as everything else, unless --guest-nice): a real flood's clients are not on the server's machine. */
  constructor(nice = 0) {
    if (nice !== 0) os.setPriority(this.child.pid!, nice);
  }

  get pid(): number {
    return this.child.pid!;
  }

  start(job: GuestJob): void {
    this.child.send({ start: job });
  }

  /** Stops the loops (in-flight requests finish) and returns every sample. */
  stop(): Promise<Sample[]> {
    return new Promise((resolve, reject) => {
      const exited = () => reject(new Error('the guest client exited'));
      this.child.once('exit', exited);
      this.child.once('message', (message: { samples: Sample[] }) => {
        this.child.off('exit', exited);
        resolve(message.samples);
      });
      this.child.send({ stop: true });
    });
  }

  close(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }
}

