import { spawnSync } from 'node:child_process';

/** Whether a command runs here: ffprobe/ffmpeg are on this CI machine but not on a fresh laptop. */
export function isInstalled(command: string): boolean {
  return !spawnSync(command, ['-version'], { stdio: 'ignore' }).error;
}
