import type { Logger } from 'pino';
import { AgentReach } from '../../control-plane/dispatch/agent-reach';

function logged() {
  const lines: string[] = [];
  const logger = {
    info: (_fields: unknown, message: string) => lines.push(`info: ${message}`),
    warn: (_fields: unknown, message: string) => lines.push(`warn: ${message}`),
  };
  return { logger: logger as unknown as Logger, lines };
}

describe('AgentReach: where agents dial the gRPC port, and who cannot', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1:50051', true],
    ['localhost', 'localhost:50051', true],
    ['::1', '[::1]:50051', true],
    ['0.0.0.0', '127.0.0.1:50051', false],
    ['::', '[::1]:50051', false],
    ['[::]', '[::1]:50051', false],
    ['10.1.2.3', '10.1.2.3:50051', false],
    ['fd00::2', '[fd00::2]:50051', false],
  ])('GRPC_HOST=%s: agents on this machine dial %s (loopback only: %s)', (host, local, loopbackOnly) => {
    const reach = new AgentReach(host, 50051, logged().logger);
    expect([reach.localAddress, reach.loopbackOnly]).toEqual([local, loopbackOnly]);
  });

  it('warns on loopback when external deployments, static hosts or the Kubernetes provider need agents on other machines', () => {
    const { logger, lines } = logged();
    new AgentReach('127.0.0.1', 50051, logger).announce(['2 external deployment(s)', 'the Kubernetes provider (KUBERNETES_CONFIG_FILE)']);
    expect(lines).toEqual([
      'info: agent gRPC server listening on 127.0.0.1:50051, this machine only: set GRPC_HOST=0.0.0.0 (or an interface address) for agents on other machines',
      'warn: other machines cannot connect to the agent gRPC server (2 external deployment(s), the Kubernetes provider (KUBERNETES_CONFIG_FILE)): it listens on 127.0.0.1:50051, this machine only; set GRPC_HOST=0.0.0.0 (or this machine\'s interface address) and restart',
    ]);
  });

  it('only says where to dial when the port is open beyond loopback, and says nothing more on loopback when nothing needs it', () => {
    const open = logged();
    new AgentReach('0.0.0.0', 50051, open.logger).announce(['1 static host(s)']);
    expect(open.lines).toEqual([
      'info: agent gRPC server listening on 0.0.0.0:50051: agents on other machines dial this machine\'s address, port 50051 (no TLS: a private network or a TLS-terminating proxy)',
    ]);
    const quiet = logged();
    new AgentReach('127.0.0.1', 50051, quiet.logger).announce([]);
    expect(quiet.lines).toHaveLength(1);
  });
});
