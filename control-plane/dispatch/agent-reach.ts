import type { Logger } from 'pino';
import { hostPort, isLoopbackBind, localAddressOf } from '../network/bind-address';

/**
 * Where agents reach this server's gRPC port. It binds `GRPC_HOST`, 127.0.0.1 by default like
 * HTTP: the port admits agents and carries no TLS, so nothing outside this machine reaches it
 * unless the operator says so. Agents on other machines (external and static deployments, the
 * Kubernetes provider's pods) and peer servers relaying to a CLUSTER_ADDRESS then cannot
 * connect, and they would only retry, silently: so the server says at start where agents must
 * dial, and warns, naming what needs other machines, while it listens on loopback only.
 */
export class AgentReach {
  /** `host:port` that agents and servers on this machine dial (local and market agents, the default CLUSTER_ADDRESS). */
  readonly localAddress: string;
  readonly loopbackOnly: boolean;

  constructor(private readonly host: string, private readonly port: number, private readonly logger: Logger) {
    this.localAddress = hostPort(localAddressOf(host), port);
    this.loopbackOnly = isLoopbackBind(host);
  }

  /** Logs where agents dial; `remote` names what on this server needs other machines to reach it (a warning on loopback). */
  announce(remote: readonly string[]): void {
    const grpc = hostPort(this.host, this.port);
    if (!this.loopbackOnly) {
      const dial = localAddressOf(this.host) === this.host.replace(/^\[(.*)\]$/, '$1') ? grpc : `this machine's address, port ${this.port}`;
      this.logger.info({ grpc }, `agent gRPC server listening on ${grpc}: agents on other machines dial ${dial} (no TLS: a private network or a TLS-terminating proxy)`);
    } else {
      this.logger.info({ grpc }, `agent gRPC server listening on ${grpc}, this machine only: set GRPC_HOST=0.0.0.0 (or an interface address) for agents on other machines`);
    }
    if (remote.length > 0) this.needsRemoteAgents(remote.join(', '));
  }

  /** Warns, while gRPC listens on loopback only, that `what` needs other machines to reach it (agents, or peer servers relaying). */
  needsRemoteAgents(what: string): void {
    if (!this.loopbackOnly) return;
    const grpc = hostPort(this.host, this.port);
    this.logger.warn({ grpc }, `other machines cannot connect to the agent gRPC server (${what}): it listens on ${grpc}, this machine only; `
      + 'set GRPC_HOST=0.0.0.0 (or this machine\'s interface address) and restart');
  }
}
