import net from 'node:net';
import os from 'node:os';
import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';
import { loadFullControlPlaneConfig } from '../../control-plane/full-config';
import { loadGatewayConfig } from '../../gateway/gateway-config';
import { startTestServer, type TestServer } from '../support/test-server';
import { graphql, OPERATOR_TOKEN } from './support/security-client';

/** This machine's first address that is not loopback, or null (then the reachability checks cannot run). */
const EXTERNAL_ADDRESS = Object.values(os.networkInterfaces()).flat()
  .find((entry) => entry && entry.family === 'IPv4' && !entry.internal)?.address ?? null;

/** 'connected' or the connection error's code. */
function connectTo(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    socket.setTimeout(5_000, () => {
      socket.destroy();
      resolve('timeout');
    });
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}

/** A pino logger whose lines land in `lines` (level and message). */
function capturingLogger(): { logger: Logger; lines: Array<{ level: number; msg: string }> } {
  const lines: Array<{ level: number; msg: string }> = [];
  const destination = new Writable({
    write(chunk, _encoding, callback) {
      for (const line of String(chunk).split('\n')) if (line) lines.push(JSON.parse(line));
      callback();
    },
  });
  return { logger: pino({ level: 'info' }, destination), lines };
}

const WARN = 40;

/**
 * The agent gRPC port admits agents and carries no TLS, yet it bound 0.0.0.0 while HTTP bound
 * 127.0.0.1: every interface of the machine exposed it. It binds 127.0.0.1 by default now;
 * GRPC_HOST opens it (0.0.0.0 or an interface address, which agents on this machine then dial
 * too), and the server says at start where agents must dial, warning when something that needs
 * agents on other machines is configured while it listens on loopback only.
 */
describe('the agent gRPC port listens on loopback unless GRPC_HOST says otherwise', () => {
  if (!EXTERNAL_ADDRESS) {
    console.warn('grpc-bind.test.ts: this machine has no non-loopback IPv4 address; the reachability checks are skipped');
  }
  const withExternalAddress = EXTERNAL_ADDRESS ? it : it.skip;

  it('defaults to 127.0.0.1, as HTTP does', () => {
    expect(loadFullControlPlaneConfig({}).grpcHost).toBe('127.0.0.1');
    expect(loadGatewayConfig({}).host).toBe('127.0.0.1');
    expect(loadFullControlPlaneConfig({ GRPC_HOST: '0.0.0.0' }).grpcHost).toBe('0.0.0.0');
  });

  describe('on the defaults', () => {
    let test: TestServer;
    let lines: Array<{ level: number; msg: string }>;

    beforeAll(async () => {
      const captured = capturingLogger();
      lines = captured.lines;
      test = await startTestServer({ logger: captured.logger, controlPlane: { localAgents: false, operatorToken: OPERATOR_TOKEN } });
    });

    afterAll(async () => {
      await test?.stop();
    });

    withExternalAddress('is not reachable on this machine\'s other addresses, only on loopback', async () => {
      const port = test.server.controlPlane.agentServer.port;
      expect(await connectTo('127.0.0.1', port)).toBe('connected');
      expect(await connectTo(EXTERNAL_ADDRESS!, port)).toBe('ECONNREFUSED');
    });

    it('says at start that agents on other machines need GRPC_HOST, and warns when a static host is registered', async () => {
      const port = test.server.controlPlane.agentServer.port;
      expect(lines.filter((line) => line.msg.startsWith('agent gRPC server listening'))).toEqual([expect.objectContaining({
        msg: `agent gRPC server listening on 127.0.0.1:${port}, this machine only: set GRPC_HOST=0.0.0.0 (or an interface address) for agents on other machines`,
      })]);
      expect(lines.filter((line) => line.level >= WARN && line.msg.includes('GRPC_HOST'))).toEqual([]);
      const registered = await graphql(test.url, `Bearer ${OPERATOR_TOKEN}`,
        'mutation { registerStaticHost(input: {name: "gpu-1", gpuName: "RTX 4090", gpuMemoryGb: 24, region: "us-east", pricePerHour: 0.5}) { host { id } } }');
      expect(registered.body.errors).toBeUndefined();
      expect(lines.filter((line) => line.level >= WARN).map((line) => line.msg)).toEqual([
        `other machines cannot connect to the agent gRPC server (static host gpu-1): it listens on 127.0.0.1:${port}, this machine only; set GRPC_HOST=0.0.0.0 (or this machine's interface address) and restart`,
      ]);
    });
  });

  it('warns at start when CLUSTER_ADDRESS sends peer servers to another machine while it listens on loopback', async () => {
    const captured = capturingLogger();
    const test = await startTestServer({ logger: captured.logger, controlPlane: { localAgents: false, clusterAddress: '10.9.8.7:50051' } });
    try {
      const port = test.server.controlPlane.agentServer.port;
      expect(captured.lines.filter((line) => line.level >= WARN).map((line) => line.msg)).toEqual([
        `other machines cannot connect to the agent gRPC server (peer servers relaying to CLUSTER_ADDRESS 10.9.8.7:50051): it listens on 127.0.0.1:${port}, this machine only; set GRPC_HOST=0.0.0.0 (or this machine's interface address) and restart`,
      ]);
    } finally {
      await test.stop();
    }
  });

  describe('with GRPC_HOST set to an interface address', () => {
    let test: TestServer;
    let lines: Array<{ level: number; msg: string }>;

    beforeAll(async () => {
      if (!EXTERNAL_ADDRESS) return;
      const captured = capturingLogger();
      lines = captured.lines;
      test = await startTestServer({ logger: captured.logger, controlPlane: { grpcHost: EXTERNAL_ADDRESS } });
    });

    afterAll(async () => {
      await test?.stop();
    });

    withExternalAddress('is reachable there, and this machine\'s own agents dial it there too', async () => {
      const port = test.server.controlPlane.agentServer.port;
      expect(await connectTo(EXTERNAL_ADDRESS!, port)).toBe('connected');
      expect(test.server.controlPlane.grpcAddress).toBe(`${EXTERNAL_ADDRESS}:${port}`);
      const workspace = await test.createWorkspace();
      const deployment = await test.createDeployment(workspace);
      await test.waitForReplicas(deployment.id, 1);
      expect(lines.filter((line) => line.msg.startsWith('agent gRPC server listening')).map((line) => line.msg)).toEqual([
        `agent gRPC server listening on ${EXTERNAL_ADDRESS}:${port}: agents on other machines dial ${EXTERNAL_ADDRESS}:${port} (no TLS: a private network or a TLS-terminating proxy)`,
      ]);
    });
  });
});
