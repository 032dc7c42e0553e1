import net from 'node:net';
import type { DataSource } from 'typeorm';
import { localAddressOf } from '../network/bind-address';
import { withTimeout } from './with-timeout';

/** One dependency a server needs to take traffic; `check` rejects when it is not there. */
export interface ReadinessProbe {
  readonly name: string;
  check(): Promise<void>;
  /** A failing advisory probe is reported as `degraded` with its reason, and the server stays ready. */
  readonly advisory?: boolean;
}

export interface ControlPlaneProbeTargets {
  dataSource: DataSource;
  /** The interface the agent gRPC server was asked to bind (`GRPC_HOST`). */
  grpcHost: string;
  /** Read at probe time: 0 until the agent server listens. */
  agentServer: { readonly port: number };
  /** Rate limits: degraded while Redis is away (the server keeps serving on in-process limits). */
  rateLimiter?: { degraded?(): string | null };
}

/** `database`: `SELECT 1` answers; `agent_server`: the agent gRPC port accepts a TCP connection. */
export function controlPlaneProbes(targets: ControlPlaneProbeTargets, timeoutMs = 1_000): ReadinessProbe[] {
  const rateLimits: ReadinessProbe = {
    name: 'rate_limits', advisory: true,
    check: async () => {
      const reason = targets.rateLimiter?.degraded?.();
      if (reason) throw new Error(reason);
    },
  };
  return [
    { name: 'database', check: async () => void await withTimeout(targets.dataSource.query('SELECT 1'), timeoutMs, 'the database') },
    {
      name: 'agent_server',
      check: async () => {
        const port = targets.agentServer.port;
        if (!port) throw new Error('the agent server has not started');
        await connectOnce(localAddressOf(targets.grpcHost), port, timeoutMs);
      },
    },
    rateLimits,
  ];
}

function connectOnce(host: string, port: number, timeoutMs: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const socket = net.connect({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no TCP connection to ${host}:${port} within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.destroy();
      resolve();
    });
    socket.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}
