/**
 * The transport floor of our path for `npm run bench` (issue 24): the same two processes and
 * the same wire as the real gateway and agent, with none of their logic. A gateway that reads
 * the body and sends it as an Assign on a `worker.v1` gRPC stream (@grpc/grpc-js, Assigns of
 * one event-loop turn in one AssignBatch), and an agent that forwards it to the upstream on
 * undici's dispatch API and answers with Output + Completed or Chunk events (one JobEventBatch
 * per turn, a job's chunks of one turn merged): no auth, limits, parsing, metering or routing.
 * Our path minus this floor is what our own code costs; the floor minus the bare Koa hop is
 * what two processes and gRPC cost whatever the code does.
 * Usage: node dist/bench/grpc-floor.js gateway --port N --grpc-port M
 *        node dist/bench/grpc-floor.js agent --grpc-port M --upstream http://127.0.0.1:K
 */
import http from 'node:http';
import { parseArgs } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { Pool, type Dispatcher } from 'undici';
import { loadWorkerService, type AgentFrame, type ControlFrame, type JobEvent } from '../proto/worker/v1';

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { port: { type: 'string' }, 'grpc-port': { type: 'string' }, upstream: { type: 'string' } },
});
const Service = loadWorkerService();
// A normal exit on the bench's SIGTERM, so --cpu-prof writes its profile.
process.on('SIGTERM', () => process.exit(0));

/** Frames produced in one event-loop turn, written as one. */
function turnBatcher<T>(write: (items: T[]) => void): (item: T) => void {
  let pending: T[] = [];
  return (item) => {
    pending.push(item);
    if (pending.length === 1) {
      setImmediate(() => {
        const items = pending;
        pending = [];
        write(items);
      });
    }
  };
}

function gateway(port: number, grpcPort: number): void {
  const waiting = new Map<string, http.ServerResponse>();
  let agent: grpc.ServerDuplexStream<AgentFrame, ControlFrame> | null = null;
  let nextId = 0;
  const assign = turnBatcher<ControlFrame['assign']>((assigns) => agent?.write(assigns.length === 1
    ? { frame: 'assign', assign: assigns[0] } as ControlFrame
    : { frame: 'assignBatch', assignBatch: { assigns } } as ControlFrame));

  const onEvent = (event: JobEvent): void => {
    const response = waiting.get(event.jobId);
    if (!response) return;
    if (event.output) {
      response.writeHead(200, { 'content-type': event.output.contentType, 'content-length': String(event.output.data.length) });
      response.end(event.output.data);
      waiting.delete(event.jobId);
    } else if (event.chunk) {
      if (!response.headersSent) response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      response.write(event.chunk.data);
    } else if (event.completed || event.failed) {
      if (!response.headersSent) response.writeHead(event.failed ? 502 : 200);
      response.end();
      waiting.delete(event.jobId);
    }
  };

  const server = new grpc.Server();
  server.addService(Service.service, {
    connect: (call: grpc.ServerDuplexStream<AgentFrame, ControlFrame>) => {
      agent = call;
      call.on('data', (frame: AgentFrame) => {
        if (frame.jobEvent) onEvent(frame.jobEvent);
        else if (frame.jobEvents) for (const event of frame.jobEvents.events) onEvent(event);
      });
      call.on('error', () => (agent = null));
    },
  });
  server.bindAsync(`127.0.0.1:${grpcPort}`, grpc.ServerCredentials.createInsecure(), (error) => {
    if (error) throw error;
  });

  http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (!agent) {
        response.writeHead(503).end();
        return;
      }
      const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
      const jobId = String(nextId++);
      waiting.set(jobId, response);
      // The floor does not parse: a streamed request is told by its bytes.
      const stream = body.includes('"stream":true');
      assign({ jobId, body, stream } as ControlFrame['assign']);
    });
  }).listen(port, '127.0.0.1');
}

function agentProcess(grpcPort: number, upstream: string): void {
  const pool = new Pool(upstream, { connections: 256, pipelining: 1 });
  const client = new Service(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure()) as unknown as {
    connect(): grpc.ClientDuplexStream<AgentFrame, ControlFrame>;
  };
  const call = client.connect();
  const send = turnBatcher<JobEvent>((all) => {
    // As the real agent's EventWriter: a job's consecutive chunks of one turn travel as one event.
    const events: JobEvent[] = [];
    for (const event of all) {
      const last = events[events.length - 1];
      if (event.chunk && last?.chunk && last.jobId === event.jobId) last.chunk.data = Buffer.concat([last.chunk.data, event.chunk.data]);
      else events.push(event);
    }
    call.write(events.length === 1 ? { frame: 'jobEvent', jobEvent: events[0] } as AgentFrame : { frame: 'jobEvents', jobEvents: { events } } as AgentFrame);
  });

  const run = (assign: NonNullable<ControlFrame['assign']>): void => {
    const parts: Buffer[] = [];
    let status = 0;
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart: () => {},
      onResponseStart: (_controller, statusCode) => {
        status = statusCode;
      },
      onResponseData: (_controller, chunk) => {
        if (assign.stream) send({ jobId: assign.jobId, chunk: { data: chunk } } as JobEvent);
        else parts.push(chunk);
      },
      onResponseEnd: () => {
        if (!assign.stream) send({ jobId: assign.jobId, output: { data: parts.length === 1 ? parts[0] : Buffer.concat(parts), contentType: 'application/json', objectKey: '' } } as JobEvent);
        send({ jobId: assign.jobId, completed: { finishReason: status === 200 ? 'stop' : 'error' } } as JobEvent);
      },
      onResponseError: () => send({ jobId: assign.jobId, failed: { code: 'engine_error', message: 'upstream failed' } } as JobEvent),
    };
    pool.dispatch({
      method: 'POST', path: '/v1/chat/completions', body: assign.body,
      headers: { 'content-type': 'application/json' },
    }, handler);
  };

  call.on('data', (frame: ControlFrame) => {
    if (frame.assign) run(frame.assign);
    else if (frame.assignBatch) for (const assign of frame.assignBatch.assigns) run(assign);
  });
  call.on('error', () => process.exit(1));
}

if (positionals[0] === 'gateway' && values.port && values['grpc-port']) gateway(Number(values.port), Number(values['grpc-port']));
else if (positionals[0] === 'agent' && values['grpc-port'] && values.upstream) agentProcess(Number(values['grpc-port']), values.upstream);
else throw new Error('usage: grpc-floor.js gateway --port N --grpc-port M | agent --grpc-port M --upstream URL');
