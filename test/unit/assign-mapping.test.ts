/**
 * The one request-to-wire mapping (control-plane/dispatch/assign-mapping.ts): the Assign an
 * agent gets, and the RelayJob a peer gets and turns back into the same request. Checked on
 * encoded bytes, since proto3 sends a field that is set to its default (`false`, `0`) and
 * leaves out one that is unset.
 */
import path from 'node:path';
import * as protoLoader from '@grpc/proto-loader';
import { fromRelayJob, toAssign, toRelayJob } from '../../control-plane/dispatch/assign-mapping';
import type { DispatchRequest } from '../../control-plane/dispatch/job';
import { LOADER_OPTIONS } from '../../proto/worker/v1';

const definition = protoLoader.loadSync('cluster/v1/cluster.proto', { ...LOADER_OPTIONS, includeDirs: [path.resolve(__dirname, '../../proto')] });
const AssignType = definition['worker.v1.Assign'] as protoLoader.MessageTypeDefinition;
const RelayJobType = definition['cluster.v1.RelayJob'] as protoLoader.MessageTypeDefinition;
const bytes = (type: protoLoader.MessageTypeDefinition, message: object): string => type.serialize(message).toString('hex');

const TEXT: DispatchRequest = {
  deploymentId: 'dep_1', kind: 'JOB_KIND_CHAT_COMPLETION', body: Buffer.from('{"messages":[]}'), stream: true, includeUsage: true,
  model: 'acme/chat', deadlineUnixMs: 1_700_000_000_000, streamWindowBytes: 4096,
};
const TEXT_FIELDS = {
  kind: TEXT.kind, deadlineUnixMs: TEXT.deadlineUnixMs, body: TEXT.body, stream: true, includeUsage: true, model: TEXT.model,
};

describe('toAssign', () => {
  it('sends the request as it is, unset fields left off the wire', () => {
    expect(bytes(AssignType, toAssign('job_1', TEXT, true))).toBe(bytes(AssignType, { jobId: 'job_1', ...TEXT_FIELDS, streamWindowBytes: 4096 }));
  });

  it('gives the window only to a flow-control agent, and only for a streamed job', () => {
    expect(toAssign('job_1', TEXT, false).streamWindowBytes).toBe(0);
    expect(toAssign('job_1', { ...TEXT, stream: false }, true).streamWindowBytes).toBe(0);
    expect(toAssign('job_1', { ...TEXT, streamWindowBytes: undefined }, true).streamWindowBytes).toBe(0);
  });

  it('carries media files, the guest flag and the embedding spec', () => {
    const media: DispatchRequest = {
      ...TEXT, kind: 'JOB_KIND_IMAGE_EDIT', stream: false, inlineOutputs: true, guest: false,
      inputs: [{ name: 'image', url: 'https://in', contentType: 'image/png' }],
      uploads: [{ url: 'https://out', headers: { 'content-type': 'image/png' }, objectKey: 'k/0.png', contentType: 'image/png' }],
    };
    const decoded = AssignType.deserialize(AssignType.serialize(toAssign('job_2', media, true)));
    expect(decoded).toMatchObject({ jobId: 'job_2', inputs: media.inputs, uploads: media.uploads, inlineOutputs: true, guest: false, streamWindowBytes: 0 });
    const embedding = { dimensions: 384, maxInputTokens: 512 };
    expect(toAssign('job_3', { ...TEXT, kind: 'JOB_KIND_EMBEDDING', embedding }, true).embedding).toEqual(embedding);
  });
});

describe('the cache salt', () => {
  const SALT = 'c'.repeat(43);

  it('goes on the Assign of a job that has one, and stays off the wire for one that has none', () => {
    expect(toAssign('job_1', { ...TEXT, cacheSalt: SALT }, true).cacheSalt).toBe(SALT);
    expect(bytes(AssignType, toAssign('job_1', { ...TEXT, cacheSalt: SALT }, true)))
      .toBe(bytes(AssignType, { jobId: 'job_1', ...TEXT_FIELDS, streamWindowBytes: 4096, cacheSalt: SALT }));
    expect('cacheSalt' in toAssign('job_1', TEXT, true)).toBe(false);
  });

  it('crosses to a peer and back unchanged: the peer does not derive its own', () => {
    const received = RelayJobType.deserialize(RelayJobType.serialize(toRelayJob({ ...TEXT, guest: true, cacheSalt: SALT })));
    expect(fromRelayJob(received as never).cacheSalt).toBe(SALT);
    const unsalted = RelayJobType.deserialize(RelayJobType.serialize(toRelayJob(TEXT)));
    expect('cacheSalt' in fromRelayJob(unsalted as never)).toBe(false);
  });
});

describe('toRelayJob / fromRelayJob', () => {
  it('relays the request without a job id, its window as it is', () => {
    expect(bytes(RelayJobType, toRelayJob({ ...TEXT, stream: false })))
      .toBe(bytes(RelayJobType, { deploymentId: 'dep_1', assign: { jobId: '', ...TEXT_FIELDS, stream: false, streamWindowBytes: 4096 } }));
  });

  it('gives the peer back the same request', () => {
    for (const request of [TEXT, { ...TEXT, guest: true, streamWindowBytes: undefined }, { ...TEXT, kind: 'JOB_KIND_EMBEDDING' as const, stream: false, embedding: { dimensions: 8, maxInputTokens: 16 } }]) {
      const received = RelayJobType.deserialize(RelayJobType.serialize(toRelayJob(request)));
      expect(fromRelayJob(received as never)).toEqual({ guest: false, embedding: undefined, ...request, streamWindowBytes: request.streamWindowBytes ?? 0 });
    }
  });
});
