import { EventEmitter } from 'node:events';
import path from 'node:path';
import * as protoLoader from '@grpc/proto-loader';
import type { RelayServer } from '../../../control-plane/cluster/relay-server';
import { toRelayJob } from '../../../control-plane/dispatch/assign-mapping';
import type { DispatchRequest } from '../../../control-plane/dispatch/job';
import { RELAY_TOKEN_HEADER, type RelayEvents } from '../../../proto/cluster/v1';
import { LOADER_OPTIONS } from '../../../proto/worker/v1';

const definition = protoLoader.loadSync('cluster/v1/cluster.proto', { ...LOADER_OPTIONS, includeDirs: [path.resolve(__dirname, '../../../proto')] });
export const RelayJobType = definition['cluster.v1.RelayJob'] as protoLoader.MessageTypeDefinition<object, { replicaId?: string }>;
/** A request as the called server reads it off the wire. */
export const overTheWire = (dispatchRequest: DispatchRequest) => RelayJobType.deserialize(RelayJobType.serialize(toRelayJob(dispatchRequest)));

/** A peer's RelayService stream, in memory: the test pushes its requests, reads what was written back. */
export class FakeCall extends EventEmitter {
  readonly written: RelayEvents[] = [];
  cancelled = false;
  readonly metadata = { get: (header: string) => (header === RELAY_TOKEN_HEADER ? ['relay-secret'] : []) };

  write(message: RelayEvents): boolean {
    this.written.push(message);
    return true;
  }

  end(): void {}

  destroy(error: Error): void {
    this.emit('destroyed', error);
  }

  /** The replica each relayed job started on (its first event). */
  get startedOn(): Record<string, string> {
    const started: Record<string, string> = {};
    for (const message of this.written) {
      for (const event of message.events) if (event.event === 'replicaId') started[event.relayJobId] = event.replicaId!;
    }
    return started;
  }

  failures(): Array<{ relayJobId: string; code: string }> {
    return this.written.flatMap((message) => message.events).flatMap((event) =>
      event.event === 'jobEvent' && event.jobEvent.event === 'failed' ? [{ relayJobId: event.relayJobId, code: event.jobEvent.failed?.code ?? '' }] : []);
  }
}


/** A peer's stream opened on `relayServer` (token `relay-secret`), and how the peer relays a job on it: the id it used. */
export function peerStream(relayServer: RelayServer): { call: FakeCall; relay(dispatchRequest: DispatchRequest): string } {
  relayServer.setToken('relay-secret');
  const call = new FakeCall();
  relayServer.handlers.run(call as never);
  let sequence = 0;
  const relay = (dispatchRequest: DispatchRequest): string => {
    const relayJobId = `relay_${++sequence}`;
    call.emit('data', { request: 'job', relayJobId, job: overTheWire(dispatchRequest) });
    return relayJobId;
  };
  return { call, relay };
}
