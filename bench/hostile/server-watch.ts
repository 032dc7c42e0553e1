/**
 * What the server's processes hold during a phase, from /proc: the gateway's RSS every 100 ms;
 * every second its agents (count and RSS summed), its embedded PostgreSQL's RSS, and the
 * gateway's open file descriptors; CPU by role over the phase.
 */
import fs from 'node:fs';
import os from 'node:os';
import { commandOf, cpuMicros, descendants, rssBytes } from '../processes';

const MiB = 2 ** 20;
const mib = (bytes: number) => Math.round((bytes / MiB) * 10) / 10;

export interface ProcessesNow { agents: number; agentsBytes: number; postgresBytes: number; fds: number }

export interface WatchSummary {
  gatewayRssMiB: { start: number; peak: number; end: number };
  agents: { start: number; peak: number; rssStartMiB: number; rssPeakMiB: number };
  postgresRssPeakMiB: number;
  gatewayFds: { start: number; peak: number };
  /** Gateway + agents, the peak of their sum over the 1-second samples. */
  serverRssPeakMiB: number;
  cpuCores: Record<string, number>;
  loadAverage1m: { start: number; end: number };
  /** [seconds, gateway MiB, agents, agents MiB, gateway fds] each second. */
  timeline: Array<[number, number, number, number, number]>;
}

/** The gateway's agents and PostgreSQL, told by their command lines, and its descriptors. */
export function processesOf(serverPid: number): ProcessesNow {
  const now: ProcessesNow = { agents: 0, agentsBytes: 0, postgresBytes: 0, fds: openFds(serverPid) };
  for (const pid of descendants(serverPid)) {
    const command = commandOf(pid);
    if (command.includes('worker-agent')) {
      now.agents++;
      now.agentsBytes += rssBytes(pid);
    } else if (command.includes('postgres')) {
      now.postgresBytes += rssBytes(pid);
    }
  }
  return now;
}

function openFds(pid: number): number {
  try {
    return fs.readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return 0;
  }
}

/** CPU so far of each process of the server's tree, the attacker and this process, by pid with its role. */
function cpuByPid(serverPid: number, attackerPid: number | null): Map<number, { role: string; micros: number }> {
  const snapshot = new Map<number, { role: string; micros: number }>();
  snapshot.set(serverPid, { role: 'server', micros: cpuMicros(serverPid) });
  for (const pid of descendants(serverPid)) {
    const command = commandOf(pid);
    snapshot.set(pid, { role: command.includes('worker-agent') ? 'agents' : command.includes('postgres') ? 'postgres' : 'other children', micros: cpuMicros(pid) });
  }
  if (attackerPid) snapshot.set(attackerPid, { role: 'attacker', micros: cpuMicros(attackerPid) });
  const usage = process.cpuUsage();
  snapshot.set(process.pid, { role: 'ordinary tenant', micros: usage.user + usage.system });
  return snapshot;
}

/** Starts watching; `stop` (given the attacker's pid, whose CPU counts from its start) ends it. */
export function watchServer(serverPid: number, attackerPid: number | null) {
  const startedAt = performance.now();
  const loadStart = os.loadavg()[0];
  const cpuBefore = cpuByPid(serverPid, attackerPid);
  const gatewayStart = rssBytes(serverPid);
  let gatewayPeak = gatewayStart;
  const first = processesOf(serverPid);
  let agentsPeak = first.agents;
  let agentsBytesPeak = first.agentsBytes;
  let postgresPeak = first.postgresBytes;
  let fdsPeak = first.fds;
  let serverPeak = gatewayStart + first.agentsBytes;
  const timeline: WatchSummary['timeline'] = [];
  const fast = setInterval(() => (gatewayPeak = Math.max(gatewayPeak, rssBytes(serverPid))), 100);
  const sample = () => {
    const gateway = rssBytes(serverPid);
    const now = processesOf(serverPid);
    gatewayPeak = Math.max(gatewayPeak, gateway);
    agentsPeak = Math.max(agentsPeak, now.agents);
    agentsBytesPeak = Math.max(agentsBytesPeak, now.agentsBytes);
    postgresPeak = Math.max(postgresPeak, now.postgresBytes);
    fdsPeak = Math.max(fdsPeak, now.fds);
    serverPeak = Math.max(serverPeak, gateway + now.agentsBytes);
    timeline.push([Math.round((performance.now() - startedAt) / 100) / 10, mib(gateway), now.agents, mib(now.agentsBytes), now.fds]);
  };
  const slow = setInterval(sample, 1_000);
  return {
    stop(): WatchSummary {
      clearInterval(fast);
      clearInterval(slow);
      sample();
      const seconds = (performance.now() - startedAt) / 1000;
      // Per process, so that one that started in the window counts from 0 and one that ended is left out (rather than subtracted).
      const cpuCores: Record<string, number> = {};
      for (const [pid, { role, micros }] of cpuByPid(serverPid, attackerPid)) {
        cpuCores[role] = (cpuCores[role] ?? 0) + (micros - (cpuBefore.get(pid)?.micros ?? 0)) / 1e6 / seconds;
      }
      for (const role of Object.keys(cpuCores)) cpuCores[role] = Math.round(cpuCores[role] * 100) / 100;
      return {
        gatewayRssMiB: { start: mib(gatewayStart), peak: mib(gatewayPeak), end: mib(rssBytes(serverPid)) },
        agents: { start: first.agents, peak: agentsPeak, rssStartMiB: mib(first.agentsBytes), rssPeakMiB: mib(agentsBytesPeak) },
        postgresRssPeakMiB: mib(postgresPeak), gatewayFds: { start: first.fds, peak: fdsPeak },
        serverRssPeakMiB: mib(Math.max(serverPeak, gatewayPeak + first.agentsBytes)), cpuCores,
        loadAverage1m: { start: Math.round(loadStart * 100) / 100, end: Math.round(os.loadavg()[0] * 100) / 100 }, timeline,
      };
    },
  };
}
