import fs from 'node:fs';
import type http from 'node:http';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** s3rver ships no types; this is the part the tests use. */
interface S3rverInstance {
  run(): Promise<net.AddressInfo>;
  close(): Promise<void>;
  httpServer?: http.Server;
}
type S3rverConstructor = new (options: Record<string, unknown>) => S3rverInstance;
const S3rver = require('s3rver') as S3rverConstructor;

/** s3rver's one built-in account; it checks the access key id but not SigV4 signatures. */
export const S3RVER_ACCESS_KEY_ID = 'S3RVER';
export const S3RVER_SECRET_ACCESS_KEY = 'S3RVER';

export interface TestS3 {
  /** `http://127.0.0.1:<port>` */
  readonly endpoint: string;
  readonly directory: string;
  stop(): Promise<void>;
}

/** A real S3-compatible server on port 0 with `buckets` created, data in a fresh temp dir. */
export async function startS3rver(buckets: string[]): Promise<TestS3> {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'inference-s3rver-'));
  const server = new S3rver({
    address: '127.0.0.1', port: 0, silent: true, directory,
    configureBuckets: buckets.map((name) => ({ name, configs: [] })),
  });
  const { port } = await server.run();
  return {
    endpoint: `http://127.0.0.1:${port}`,
    directory,
    async stop() {
      // SDK clients keep sockets alive; close() alone would wait for them to idle out.
      server.httpServer?.closeAllConnections();
      await server.close();
      fs.rmSync(directory, { recursive: true, force: true });
    },
  };
}
