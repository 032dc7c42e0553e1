/**
 * TypeScript shapes of the `cluster.v1` messages as @grpc/proto-loader decodes them (the
 * worker.v1 loader options), and the service loader. No logic beyond loading the file.
 */
import fs from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { LOADER_OPTIONS, type Assign, type JobEvent } from '../../worker/v1';

/** The source `proto/` folder, from both `proto/cluster/v1` (ts) and `dist/proto/cluster/v1`. */
const PROTO_ROOTS = [path.resolve(__dirname, '../..'), path.resolve(__dirname, '../../../../proto')];

export interface RelayJob { deploymentId: string; assign: Assign }

export type RelayRequest = { relayJobId: string } & (
  | { request: 'job'; job: RelayJob }
  | { request: 'cancel'; cancel: { reason: string } }
  | { request: 'credit'; credit: { bytes: number } });

export type RelayEvent = { relayJobId: string } & (
  | { event: 'replicaId'; replicaId: string }
  | { event: 'jobEvent'; jobEvent: JobEvent });

export interface RelayEvents { events: RelayEvent[] }

/** Metadata key of the cluster's relay token. */
export const RELAY_TOKEN_HEADER = 'x-relay-token';

export function loadRelayService(): grpc.ServiceClientConstructor {
  const root = PROTO_ROOTS.find((candidate) => fs.existsSync(path.join(candidate, 'cluster/v1/cluster.proto')))!;
  const definition = protoLoader.loadSync('cluster/v1/cluster.proto', { ...LOADER_OPTIONS, includeDirs: [root] });
  return (grpc.loadPackageDefinition(definition) as any).cluster.v1.RelayService as grpc.ServiceClientConstructor;
}
