/**
 * What a phase measures besides the samples: CPU per process role and of the whole machine,
 * event-loop delay of the server (its /metrics) and its own time to first byte.
 */
import os from 'node:os';
import { commandOf, cpuMicros, descendants, machineTicks } from '../processes';
import { mapValues, now, round3 } from './measure';

export interface Snapshot {
  at: number;
  cpu: Map<number, { role: string; micros: number }>;
  machine: { busy: number; steal: number; total: number };
  clientCpuMicros: number;
  serverMetrics: Map<string, number>;
}

function roleOf(pid: number, serverPid: number): string {
  if (pid === serverPid) return 'server';
  const command = commandOf(pid);
  if (command.includes('worker-agent/main.js')) return 'agents';
  if (command.includes('postgres')) return 'postgres';
  return 'other';
}

async function scrapeMetrics(baseUrl: string): Promise<Map<string, number>> {
  const values = new Map<string, number>();
  try {
    const text = await (await fetch(`${baseUrl}/metrics`)).text();
    for (const line of text.split('\n')) {
      if (!line.startsWith('inference_nodejs_eventloop_lag') && !line.startsWith('inference_time_to_first_token_seconds_sum') && !line.startsWith('inference_time_to_first_token_seconds_count')) continue;
      const space = line.lastIndexOf(' ');
      values.set(line.slice(0, space), Number(line.slice(space + 1)));
    }
  } catch {
    // no metrics this time
  }
  return values;
}

export async function snapshot(server: { baseUrl: string; pid: number }, others: ReadonlyArray<{ pid: number; role: string }>): Promise<Snapshot> {
  // The scrape resets the server's event-loop delay histogram (prom-client), so it opens a window too.
  const serverMetrics = await scrapeMetrics(server.baseUrl);
  const cpu = new Map<number, { role: string; micros: number }>();
  for (const pid of [server.pid, ...descendants(server.pid)]) cpu.set(pid, { role: roleOf(pid, server.pid), micros: cpuMicros(pid) });
  for (const { pid, role } of others) cpu.set(pid, { role, micros: cpuMicros(pid) });
  const usage = process.cpuUsage();
  return { at: now(), cpu, machine: machineTicks(), clientCpuMicros: usage.user + usage.system, serverMetrics };
}

export function cpuBetween(before: Snapshot, after: Snapshot) {
  const seconds = (after.at - before.at) / 1000;
  const roles: Record<string, number> = { 'owner client': (after.clientCpuMicros - before.clientCpuMicros) / 1e6 / seconds };
  for (const [pid, { role, micros }] of after.cpu) {
    roles[role] = (roles[role] ?? 0) + (micros - (before.cpu.get(pid)?.micros ?? 0)) / 1e6 / seconds;
  }
  const total = after.machine.total - before.machine.total;
  const cores = os.cpus().length;
  const busyCores = ((after.machine.busy - before.machine.busy) / total) * cores;
  const ours = Object.values(roles).reduce((sum, value) => sum + value, 0);
  return {
    /** CPU cores used on average, per role. */
    coresByRole: mapValues(roles, round3),
    machineBusyCores: round3(busyCores),
    /** Busy time of the machine not accounted for by our processes (other work on the VM). */
    otherBusyCores: round3(Math.max(0, busyCores - ours)),
    stealPercent: round3(((after.machine.steal - before.machine.steal) / total) * 100),
  };
}

export function serverLag(after: Snapshot) {
  const get = (name: string) => round3((after.serverMetrics.get(`inference_nodejs_eventloop_lag_${name}_seconds`) ?? NaN) * 1000);
  return { meanMs: get('mean'), p50Ms: get('p50'), p99Ms: get('p99'), maxMs: get('max') };
}

/** The server's own mean time to first byte per route over the window (its histogram's sum / count). */
export function serverFirstByteMs(before: Snapshot, after: Snapshot, route: string): number | null {
  const sum = `inference_time_to_first_token_seconds_sum{route="${route}"}`;
  const count = `inference_time_to_first_token_seconds_count{route="${route}"}`;
  const requests = (after.serverMetrics.get(count) ?? 0) - (before.serverMetrics.get(count) ?? 0);
  if (requests <= 0) return null;
  return round3((((after.serverMetrics.get(sum) ?? 0) - (before.serverMetrics.get(sum) ?? 0)) / requests) * 1000);
}

