/**
 * TypeScript shapes of the `cluster.v1` messages as @grpc/proto-loader decodes them (the
 * worker.v1 loader options), derived from the types generated from cluster.proto
 * (proto/generated, `npm run gen:proto`), and the service loader. No logic beyond loading the file.
 */
import fs from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { RelayEvent__Output } from '../../generated/cluster/v1/RelayEvent';
import type { RelayEvents__Output } from '../../generated/cluster/v1/RelayEvents';
import type { RelayJob__Output } from '../../generated/cluster/v1/RelayJob';
import type { RelayRequest__Output } from '../../generated/cluster/v1/RelayRequest';
import type { Cases, Override } from '../../wire-shapes';
import { LOADER_OPTIONS, type Assign, type JobEvent } from '../../worker/v1';

/** The source `proto/` folder, from both `proto/cluster/v1` (ts) and `dist/proto/cluster/v1`. */
const PROTO_ROOTS = [path.resolve(__dirname, '../..'), path.resolve(__dirname, '../../../../proto')];

/** A relayed job always carries its Assign. */
export type RelayJob = Override<RelayJob__Output, { assign: Assign }>;

/** One case per `request` member: `job`, `cancel` or `credit`. */
export type RelayRequest = Cases<Override<RelayRequest__Output, { job?: RelayJob }>, 'request'>;

/** One case per `event` member: `replicaId` or `jobEvent`. */
export type RelayEvent = Cases<Override<RelayEvent__Output, { jobEvent?: JobEvent }>, 'event'>;

export type RelayEvents = Override<RelayEvents__Output, { events: RelayEvent[] }>;

/** Metadata key of the cluster's relay token. */
export const RELAY_TOKEN_HEADER = 'x-relay-token';

export function loadRelayService(): grpc.ServiceClientConstructor {
  const root = PROTO_ROOTS.find((candidate) => fs.existsSync(path.join(candidate, 'cluster/v1/cluster.proto')))!;
  const definition = protoLoader.loadSync('cluster/v1/cluster.proto', { ...LOADER_OPTIONS, includeDirs: [root] });
  return (grpc.loadPackageDefinition(definition) as any).cluster.v1.RelayService as grpc.ServiceClientConstructor;
}
