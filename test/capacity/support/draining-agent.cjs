// A stand-in worker agent for the local provider's stop tests: it prints its drain timeout, and
// on SIGTERM acts out a drain of DRAIN_FOR_MS (a request still streaming) before exiting 0;
// DRAIN_FOR_MS=never ignores SIGTERM (a job that does not finish). It exits with its parent's pipe.
const drainFor = process.env.DRAIN_FOR_MS;
console.log(`ready drain=${process.env.WORKER_DRAIN_TIMEOUT_MS ?? 'default'}`);
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
process.on('SIGTERM', () => {
  if (drainFor !== 'never') setTimeout(() => process.exit(0), Number(drainFor));
});
setInterval(() => {}, 60_000);
