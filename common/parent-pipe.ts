/**
 * `WORKER_EXIT_WITH_PARENT`: the agent lives only as long as the process that spawned it.
 *
 * The spawner (the server's local provider) gives the agent a pipe as stdin and never writes to
 * it or closes it. However the spawner ends, kill -9 included, the kernel closes its end and the
 * agent reads end-of-file at once: no polling, no timer, nothing the dying process must do. A
 * server killed with -9 used to leave its agents running with parent pid 1, redialling its gRPC
 * port forever and joining whatever server listened there next, beside the agents that server
 * spawned for the same replicas.
 *
 * Chosen over watching `process.ppid` for a change: that needs a polling interval (the exit time
 * is the interval), and under a subreaper or in a container where the spawner is pid 1 the
 * parent pid says nothing reliable. A pipe is closed by the kernel the moment its last holder
 * dies; libuv opens it close-on-exec, so other children of the spawner do not keep it open.
 */
import fs from 'node:fs';
import type { Readable } from 'node:stream';

/**
 * Why stdin (fd 0) cannot carry the parent's lifetime, or undefined when it can: it must be a
 * pipe or a socket (Node's `spawn` makes stdio pipes as socket pairs). A terminal or a file
 * would make the agent exit at its first read, or never.
 */
export function parentPipeProblem(fd = 0): string | undefined {
  let stat: fs.Stats;
  try {
    stat = fs.fstatSync(fd);
  } catch (error) {
    return `stdin is not open (${(error as Error).message})`;
  }
  if (stat.isFIFO() || stat.isSocket()) return undefined;
  const kind = stat.isCharacterDevice() ? 'a terminal or device' : stat.isFile() ? 'a file' : 'not a pipe';
  return `stdin is ${kind}; WORKER_EXIT_WITH_PARENT needs a pipe from the parent process, which the agent watches`;
}

/** Calls `onParentGone` once, when the parent's end of `stdin` closes. Whatever is written on the pipe is ignored. */
export function watchParentPipe(stdin: Readable, onParentGone: (how: string) => void): void {
  let gone = false;
  const once = (how: string) => {
    if (gone) return;
    gone = true;
    onParentGone(how);
  };
  stdin.on('data', () => {});
  stdin.on('end', () => once('stdin reached end-of-file'));
  stdin.on('close', () => once('stdin closed'));
  stdin.on('error', (error: Error) => once(`stdin failed: ${error.message}`));
  stdin.resume();
}
