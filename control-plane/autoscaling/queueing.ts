/**
 * M/M/c waiting times (Erlang C), the `slo` policy's queueing model: Poisson arrivals at
 * `arrivalsPerSecond`, `servers` slots each holding a request `holdSeconds` on average
 * (exponential), one FIFO queue. The share of requests that wait longer than `waitSeconds` is
 * C(c, a) · exp(−(c − a) · t / hold), with a = λ · hold the offered load in busy slots.
 */
export function waitTailProbability(servers: number, arrivalsPerSecond: number, holdSeconds: number, waitSeconds: number): number {
  const offered = arrivalsPerSecond * holdSeconds;
  if (offered <= 0) return 0;
  if (offered >= servers) return 1;
  return erlangC(servers, offered) * Math.exp((-(servers - offered) * waitSeconds) / holdSeconds);
}

/** Probability that an arrival waits at all, from Erlang B's stable recursion. */
export function erlangC(servers: number, offered: number): number {
  let blocking = 1;
  for (let count = 1; count <= servers; count++) blocking = (offered * blocking) / (count + offered * blocking);
  return (servers * blocking) / (servers - offered * (1 - blocking));
}

/**
 * The fewest replicas of `slots` slots each for which at most `missShare` of requests wait
 * longer than `waitSeconds`; `limit` when even that many do not suffice.
 */
export function replicasForWaitTail(
  arrivalsPerSecond: number, slots: number, holdSeconds: number, waitSeconds: number, missShare: number, limit: number,
): number {
  if (arrivalsPerSecond <= 0) return 0;
  const offered = arrivalsPerSecond * holdSeconds;
  for (let replicas = Math.max(1, Math.floor(offered / slots)); replicas <= limit; replicas++) {
    if (waitTailProbability(replicas * slots, arrivalsPerSecond, holdSeconds, waitSeconds) <= missShare) return replicas;
  }
  return limit;
}
