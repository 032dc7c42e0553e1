/** What the numbers were measured on. */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { PROJECT_ROOT } from './targets';

/** The first line a tool prints about itself: `wrk --version` exits 1, `nginx -v` writes to stderr. */
function version(command: string, args: string[]): string {
  const result = spawnSync(command, args, { encoding: 'utf8' });
  if (result.error) return `${command}: not installed`;
  return `${result.stdout}\n${result.stderr}`.split('\n').map((line) => line.trim()).find(Boolean) ?? command;
}

export function describeMachine(): Record<string, string | number> {
  const model = fs.readFileSync('/proc/cpuinfo', 'utf8').split('\n').find((line) => line.startsWith('model name'))?.split(':')[1]?.trim() ?? 'unknown';
  let gitSha = 'unknown';
  try {
    gitSha = execFileSync('git', ['rev-parse', '--short', 'HEAD']).toString().trim();
  } catch {
    // not a checkout
  }
  return {
    cpu: model, cores: os.cpus().length, memoryGiB: Math.round(os.totalmem() / 2 ** 30), kernel: os.release(),
    node: process.version, wrk: version('wrk', ['--version']), nginx: version('nginx', ['-v']), gitSha,
  };
}

/** The commit measured, and what was changed outside bench/ (uncommitted server code makes the figures its own). */
export function sourceState() {
  try {
    const git = (...args: string[]) => execFileSync('git', ['--no-optional-locks', ...args], { cwd: PROJECT_ROOT, encoding: 'utf8' });
    const changed = git('status', '--porcelain').split('\n').filter(Boolean);
    return { commit: git('rev-parse', 'HEAD').trim(), changedOutsideBench: changed.filter((line) => !line.slice(3).startsWith('bench/')).map((line) => line.trim()) };
  } catch {
    return { commit: 'unknown', changedOutsideBench: ['(not a git checkout)'] };
  }
}
