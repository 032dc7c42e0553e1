import * as grpc from '@grpc/grpc-js';
import { relayToken } from '../../control-plane/cluster/server-registry';
import { loadRelayService, RELAY_TOKEN_HEADER } from '../../proto/cluster/v1';
import { startTestServer, type TestServer } from '../support/test-server';

/** Generous: the status comes back in milliseconds; the old code never sent one. */
const STATUS_BOUND_MS = 10_000;

interface Ended {
  code: number | 'none';
  details: string;
}

/** The calls this process's gRPC servers hold open (channelz: started minus ended). */
async function callsInFlight(): Promise<number> {
  const handlers = grpc.getChannelzHandlers();
  const servers = await new Promise<Array<{ data: { calls_started: string; calls_succeeded: string; calls_failed: string } }>>((resolve, reject) =>
    handlers.GetServers({ request: { start_server_id: '0', max_results: '100' } } as never, ((error: unknown, answer: { server: never[] }) =>
      (error ? reject(error) : resolve(answer.server))) as never));
  return servers.reduce((sum, server) => sum + Number(server.data.calls_started) - Number(server.data.calls_succeeded) - Number(server.data.calls_failed), 0);
}

/**
 * cluster.v1 RelayService is served on the agents' gRPC port, which remote agents reach. A call
 * without the cluster's relay token used to be destroyed without a status: the caller hung and
 * the server held the call until the caller gave up. It now ends at once with UNAUTHENTICATED,
 * holding nothing; a call with the token stays open (the control).
 */
describe('the cluster relay refuses a bad token with UNAUTHENTICATED at once', () => {
  let test: TestServer;
  let client: grpc.Client;
  const Relay = loadRelayService();

  beforeAll(async () => {
    test = await startTestServer({ controlPlane: { localAgents: false } });
    client = new Relay(`127.0.0.1:${test.server.controlPlane.agentServer.port}`, grpc.credentials.createInsecure());
  });

  afterAll(async () => {
    client?.close();
    await test?.stop();
  });

  const open = (token: string | null) => {
    const metadata = new grpc.Metadata();
    if (token !== null) metadata.set(RELAY_TOKEN_HEADER, token);
    return (client as unknown as { run(metadata: grpc.Metadata): grpc.ClientDuplexStream<unknown, unknown> }).run(metadata);
  };

  const ending = (call: grpc.ClientDuplexStream<unknown, unknown>): Promise<Ended> => {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        call.cancel();
        resolve({ code: 'none', details: `no status within ${STATUS_BOUND_MS} ms` });
      }, STATUS_BOUND_MS);
      call.on('error', () => undefined); // the status below says it
      call.on('data', () => undefined);
      call.on('status', (status: grpc.StatusObject) => {
        clearTimeout(timer);
        resolve({ code: status.code, details: status.details });
      });
    });
  };

  it('ends every bad-token call (none, empty, wrong, the right one mistyped) with UNAUTHENTICATED and holds none of them', async () => {
    expect(await callsInFlight()).toBe(0);
    const token = await relayToken(test.server.controlPlane.dataSource, 'unused');
    const control = open(token);
    const controlEnded = ending(control);

    const badTokens = [null, '', 'rt-not-the-token', `${token.slice(0, -1)}${token.endsWith('a') ? 'b' : 'a'}`];
    // 25 of each at once on one channel: none may wait on another, none may stay open.
    const outcomes = await Promise.all(Array.from({ length: 100 }, (_, index) => ending(open(badTokens[index % badTokens.length]))));
    expect(outcomes).toEqual(outcomes.map(() => ({ code: grpc.status.UNAUTHENTICATED, details: 'bad relay token' })));
    // The control with the cluster's token is still open (a relay stream lives as long as its peer), and nothing else is.
    expect(await callsInFlight()).toBe(1);

    control.end();
    expect(await controlEnded).toMatchObject({ code: grpc.status.OK });
    expect(await callsInFlight()).toBe(0);
  });
});
