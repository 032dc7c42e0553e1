import * as grpc from '@grpc/grpc-js';
import { loadRelayService, RELAY_TOKEN_HEADER, type RelayEvents, type RelayRequest } from '../../proto/cluster/v1';
import { toRelayJob } from '../dispatch/assign-mapping';
import { Job, type DispatchRequest, type JobCarrier, type JobListener } from '../dispatch/job';
import { deliverJobEvent, type DeliveryHooks } from '../dispatch/job-event-delivery';
import type { Peer } from './server-registry';

type RelayStream = grpc.ClientDuplexStream<RelayRequest, RelayEvents>;

/**
 * The calling side of `cluster.v1.RelayService`: runs jobs on peers that hold replicas of their
 * deployments, over one long-lived stream per peer. A relayed job looks like a local one to the
 * gateway: the same listener calls in the same order, cancel included (the terminal event still
 * brings the usage to meter). A job the peer sends back `agent_draining` before it produced
 * anything (its replicas left since this server's view of them, a heartbeat old) goes to
 * `onDraining`'s handler to run elsewhere, as a local job on a draining replica is retried.
 */
export class RelayClient {
  private readonly Service = loadRelayService();
  private readonly links = new Map<string, PeerLink>();
  private sequence = 0;
  private hooks: ((peerId: string) => DeliveryHooks) | null = null;

  constructor(private readonly token: () => string, private readonly serverId: string) {}

  /** Where a job sent back `agent_draining` before producing anything goes (JobRouter.replace); unset, it fails with that. */
  onDraining(replace: (job: Job, fromPeerId: string) => void): void {
    this.hooks = (peerId) => ({ retry: (job) => replace(job, peerId) });
  }

  run(peer: Peer, request: DispatchRequest, listener: JobListener): Job {
    const link = this.linkTo(peer);
    const relayJobId = (this.sequence++).toString(36);
    const job = new Job(`relay_${this.serverId}_${relayJobId}`, request, listener, new RelayCarrier(link, relayJobId, peer.id));
    link.start(relayJobId, job, request);
    return job;
  }

  /** Sends a job already under way (sent back by another peer) to `peer`, as a new relayed job there. */
  move(peer: Peer, job: Job): void {
    const link = this.linkTo(peer);
    const relayJobId = (this.sequence++).toString(36);
    job.carrier = new RelayCarrier(link, relayJobId, peer.id);
    link.start(relayJobId, job, job.request);
  }

  private linkTo(peer: Peer): PeerLink {
    let link = this.links.get(peer.relayAddress);
    if (!link || link.broken) {
      link = new PeerLink(this.open(peer.relayAddress), peer.id, this.hooks?.(peer.id));
      this.links.set(peer.relayAddress, link);
    }
    return link;
  }

  close(): void {
    for (const link of this.links.values()) link.end();
    this.links.clear();
  }

  private open(address: string): RelayStream {
    const metadata = new grpc.Metadata();
    metadata.set(RELAY_TOKEN_HEADER, this.token());
    const client = new this.Service(address, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': 64 * 1024 * 1024 });
    const stream = (client as any).run(metadata) as RelayStream;
    stream.on('close', () => client.close());
    return stream;
  }
}

/** One stream to a peer and the jobs it carries; a broken one fails them all and the next job opens another. */
class PeerLink {
  broken = false;
  private readonly jobs = new Map<string, Job>();

  constructor(private readonly stream: RelayStream, private readonly peerId: string, hooks: DeliveryHooks | undefined) {
    stream.on('data', (message: RelayEvents) => {
      for (const event of message.events) {
        const job = this.jobs.get(event.relayJobId);
        if (!job) continue;
        const carrier = job.carrier;
        if (event.event === 'replicaId') (carrier as RelayCarrier).replicaId = event.replicaId;
        else deliverJobEvent(job, event.jobEvent, hooks);
        // Ended, or sent on elsewhere (hooks.retry): no longer this link's.
        if (job.finished || job.carrier !== carrier) this.jobs.delete(event.relayJobId);
      }
    });
    stream.on('error', (error: grpc.ServiceError) => this.lost(`the server holding the replica went away: ${error.details || error.message}`));
    stream.on('end', () => this.lost('the server holding the replica ended the relay stream'));
  }

  start(relayJobId: string, job: Job, request: DispatchRequest): void {
    this.jobs.set(relayJobId, job);
    this.write({ relayJobId, request: 'job', job: toRelayJob(request) });
  }

  cancel(relayJobId: string, reason: string): void {
    if (this.jobs.has(relayJobId)) this.write({ relayJobId, request: 'cancel', cancel: { reason } });
  }

  credit(relayJobId: string, bytes: number): void {
    if (this.jobs.has(relayJobId)) this.write({ relayJobId, request: 'credit', credit: { bytes } });
  }

  end(): void {
    this.broken = true;
    this.stream.end();
  }

  private write(request: RelayRequest): void {
    if (!this.broken) this.stream.write(request);
  }

  /** The peer crashed or the network broke: every job still open failed like one on a crashed host. */
  private lost(message: string): void {
    this.broken = true;
    const jobs = [...this.jobs.values()];
    this.jobs.clear();
    for (const job of jobs) {
      if (job.finished) continue;
      job.finished = true;
      job.listener.onFailed({ code: 'pod_crash', message: `${message} (${this.peerId})`, engineStatus: 0, engineBody: null, usage: undefined });
    }
  }
}

/** Where a relayed job runs: a peer, which names the replica in the job's first event. */
class RelayCarrier implements JobCarrier {
  replicaId = '';

  constructor(private readonly link: PeerLink, private readonly relayJobId: string, readonly peerId: string) {}

  cancelJob(_job: Job, reason: string): void {
    this.link.cancel(this.relayJobId, reason);
  }

  creditJob(_job: Job, bytes: number): void {
    this.link.credit(this.relayJobId, bytes);
  }
}

