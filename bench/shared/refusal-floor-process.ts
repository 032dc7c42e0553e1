import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { PROJECT_ROOT } from '../targets';

/** Phase N's bare node:http server (bench/refusal-floor.ts), answering every request with our refusal's bytes. */
export class RefusalFloor {
  private constructor(private readonly child: ChildProcess, readonly url: string) {}

  /** Asks our server for the refusal a guest without credit gets, and starts the floor answering with exactly it. */
  static async start(serverUrl: string, brokeKey: string, body: string): Promise<RefusalFloor> {
    const refused = await fetch(`${serverUrl}/shared/v1/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${brokeKey}`, 'content-type': 'application/json' }, body,
    });
    const kept = ['content-type', 'retry-after', 'x-request-id'];
    const headers = [...refused.headers].filter(([name]) => kept.includes(name)).flat();
    const answer = { status: refused.status, headers, body: await refused.text() };
    const child = spawn(process.execPath, [path.join(PROJECT_ROOT, 'dist/bench/refusal-floor.js')], {
      env: { PATH: process.env.PATH, FLOOR_ANSWER: JSON.stringify(answer) }, stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    });
    const port = await new Promise<string>((resolve, reject) => {
      child.once('exit', () => reject(new Error('the refusal floor exited')));
      child.stdout!.once('data', (part: Buffer) => resolve(part.toString().trim()));
    });
    return new RefusalFloor(child, `http://127.0.0.1:${port}`);
  }

  get pid(): number {
    return this.child.pid!;
  }

  close(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }
}

