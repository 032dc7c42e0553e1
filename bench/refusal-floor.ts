/**
 * The floor under a refused guest attempt (bench:shared's phase N): bare node:http on one
 * process that reads each request's body and answers with the bytes our server's refusal has
 * (status, headers, body, given in FLOOR_ANSWER as JSON), nothing else. Its CPU per attempt,
 * under the same flood and beside the same owner load, is what node:http and the kernel cost
 * for one keep-alive request and its answer on this machine; what our server spends over it
 * is our own code. Prints its port.
 */
import http from 'node:http';

interface Answer { status: number; headers: string[]; body: string }

const answer = JSON.parse(process.env.FLOOR_ANSWER ?? '') as Answer;
const body = Buffer.from(answer.body);
const headers = [...answer.headers, 'content-length', String(body.length)];

const server = http.createServer({ keepAliveTimeout: 65_000 }, (request, response) => {
  request.on('data', () => {});
  request.on('end', () => {
    response.writeHead(answer.status, headers);
    response.end(body);
  });
});
server.listen(0, '127.0.0.1', () => console.log((server.address() as { port: number }).port));
process.on('disconnect', () => process.exit(0));
