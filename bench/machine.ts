/** What the numbers were measured on. */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';

function version(command: string, args: string[]): string {
  try {
    return execFileSync(command, args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString().trim().split('\n')[0]
      || execFileSync(command, args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
  } catch (error) {
    const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
    return stderr?.split('\n')[0] || 'not installed';
  }
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
