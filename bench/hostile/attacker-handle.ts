/** The benchmark's side of the attacker process (attacker-process.ts): fork, prepare, go, stop. */
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { AttackJob, AttackReport } from './attack';

export interface AttackerHandle {
  readonly pid: number;
  /** Starts the attack; resolves with the seconds its ramp-up took (it may never, for an attack still ramping up when stopped). */
  go(): Promise<number>;
  stop(): Promise<AttackReport>;
  /** SIGKILL, for an interrupted benchmark. */
  kill(): void;
}

interface Message { prepared?: true; ready?: number; report?: AttackReport; failed?: string }

/** Forks the attacker and has it prepare `job`; resolves once it is prepared. */
export function startAttacker(job: AttackJob): Promise<AttackerHandle> {
  const child: ChildProcess = fork(path.join(__dirname, 'attacker-process.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const waiting = new Map<keyof Message, { resolve: (value: any) => void; reject: (error: Error) => void }>();
  let failure: Error | null = null;
  const failAll = (error: Error) => {
    failure ??= error;
    for (const { reject } of waiting.values()) reject(error);
    waiting.clear();
  };
  const expect = <T>(kind: keyof Message): Promise<T> => new Promise<T>((resolve, reject) => {
    if (failure) return reject(failure);
    waiting.set(kind, { resolve, reject });
  });
  child.on('message', (message: Message) => {
    if (message.failed !== undefined) return failAll(new Error(`the attacker failed: ${message.failed}`));
    for (const kind of ['prepared', 'ready', 'report'] as const) {
      if (message[kind] === undefined) continue;
      const waiter = waiting.get(kind);
      waiting.delete(kind);
      waiter?.resolve(message[kind]);
    }
  });
  child.once('exit', (code, signal) => failAll(new Error(`the attacker process exited (${signal ?? code})`)));
  const prepared = expect<true>('prepared');
  child.send({ prepare: job });
  return prepared.catch((error: Error) => {
    child.kill('SIGKILL');
    throw error;
  }).then(() => ({
    pid: child.pid!,
    go() {
      const ready = expect<number>('ready');
      child.send({ go: true });
      return ready;
    },
    async stop() {
      const report = expect<AttackReport>('report');
      child.send({ stop: true });
      const result = await report;
      child.removeAllListeners('exit');
      child.disconnect();
      return result;
    },
    kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  }));
}
