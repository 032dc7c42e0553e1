/** bench:shared's summary (medians over repetitions, verdicts) and its results files. */
import fs from 'node:fs';
import path from 'node:path';
import { percentile } from '../paced-client';
import { median } from '../report';
import { PROJECT_ROOT } from '../targets';
import { round3 } from './measure';
import { computedIdleSlots, MODEL, PHASES, type Options, type Phase, type PhaseResult } from './model';

export function describePhase(result: PhaseResult): string {
  const { owner, guest } = result;
  const guestText = guest
    ? ` | ${result.guests} guests: ${guest.attemptsPerSecond} attempts/s, ${guest.requestsPerSecond} req/s, refused ${percent(guest.refused429 + guest.refused402, guest.refused429 + guest.refused402 + guest.succeeded + guest.failed)}, ttft p50 ${guest.ttftMs.p50}`
    : '';
  const fairText = result.byGuest ? ` | small ${result.byGuest.small.requestsPerSecond} req/s of ${result.byGuest.small.attemptsPerSecond} attempts/s, large ${result.byGuest.large.requestsPerSecond} of ${result.byGuest.large.attemptsPerSecond}` : '';
  return `rep ${result.repetition} ${result.phase}: owner ttft p50 ${owner.ttftMs.p50} p90 ${owner.ttftMs.p90} p99 ${owner.ttftMs.p99} ms, ${owner.requestsPerSecond} req/s, ${owner.tokensPerSecond} tok/s` +
    `${guestText}${fairText} | idle slots ${result.idleGuestSlots.samples.join(',')} | cpu ${JSON.stringify(result.cpu.coresByRole)} other ${result.cpu.otherBusyCores} | server lag p99 ${result.serverEventLoopDelay.p99Ms} ms`;
}

/** A − B in percent of A. */
function risePercent(base: number, value: number): number {
  return round3(((value - base) / base) * 100);
}

export function summarise(phases: PhaseResult[], options: Options) {
  const of = (phase: Phase) => phases.filter((result) => result.phase === phase);
  const med = (phase: Phase, pick: (result: PhaseResult) => number | null | undefined) => round3(median(of(phase).map((result) => pick(result) ?? NaN)));
  const pooled = (phase: Phase) => {
    const all = of(phase).flatMap((result) => result.ownerTtfts).sort((a, b) => a - b);
    return { count: all.length, p50: round3(percentile(all, 0.5)), p90: round3(percentile(all, 0.9)), p99: round3(percentile(all, 0.99)) };
  };
  const side = (phase: Phase) => ({
    ownerTtftP50: med(phase, (result) => result.owner.ttftMs.p50), ownerTtftP90: med(phase, (result) => result.owner.ttftMs.p90),
    ownerTtftP99: med(phase, (result) => result.owner.ttftMs.p99), ownerRequestsPerSecond: med(phase, (result) => result.owner.requestsPerSecond),
    ownerTokensPerSecond: med(phase, (result) => result.owner.tokensPerSecond), ownerLatencyP99: med(phase, (result) => result.owner.latencyMs.p99),
    ownerFailed: of(phase).reduce((sum, result) => sum + result.owner.failed + result.owner.refused429 + result.owner.refused402, 0),
    ownerTtftPooled: pooled(phase),
    serverFirstByteMeanMs: med(phase, (result) => result.serverFirstByteMeanMs.owner),
    serverLagP99Ms: med(phase, (result) => result.serverEventLoopDelay.p99Ms), serverLagMaxMs: med(phase, (result) => result.serverEventLoopDelay.maxMs),
    clientLagP99Ms: med(phase, (result) => result.clientEventLoopDelay.p99Ms), clientLagMaxMs: med(phase, (result) => result.clientEventLoopDelay.maxMs),
    cores: Object.fromEntries(['owner client', 'guest client', 'server', 'agents', 'postgres'].map((role) => [role, med(phase, (result) => result.cpu.coresByRole[role] ?? 0)])),
    machineBusyCores: med(phase, (result) => result.cpu.machineBusyCores), otherBusyCores: med(phase, (result) => result.cpu.otherBusyCores),
    stealPercent: med(phase, (result) => result.cpu.stealPercent),
  });
  const a = side('A');
  const baseOf = (result: PhaseResult) => phases.find((other) => other.repetition === result.repetition && other.phase === 'A')!;
  const ranPhases = (['B', 'H', 'R', 'N', 'F'] as const).filter((phase) => of(phase).length > 0);
  const withGuests = Object.fromEntries(ranPhases.map((phase) => {
    const owner = side(phase);
    const runs = of(phase);
    const refusedPerSecond = (result: PhaseResult) => (result.guest!.refused429 + result.guest!.refused402) / result.windowSeconds;
    const serverMicrosPerSecond = (result: PhaseResult) => result.serverCpuMicros / result.windowSeconds;
    // The server's CPU over the owner alone (the A of the same repetition), per refused attempt: an upper bound, since the admitted guests' streams are in it too.
    const perRefused = runs.map((result) => round3((serverMicrosPerSecond(result) - serverMicrosPerSecond(baseOf(result))) / refusedPerSecond(result)));
    // The same, less the admitted guests costed each as an owner request of that A (server CPU of A / its owner requests; background loops included, so an overestimate).
    const perRefusedNet = runs.map((result) => {
      const base = baseOf(result);
      const perRequest = serverMicrosPerSecond(base) / base.owner.requestsPerSecond;
      return round3((serverMicrosPerSecond(result) - serverMicrosPerSecond(base) - perRequest * result.guest!.requestsPerSecond) / refusedPerSecond(result));
    });
    const guest = {
      guests: median(runs.map((result) => result.guests)),
      idleGuestSlots: median(runs.map((result) => result.idleGuestSlots.used)),
      attemptsPerSecond: round3(median(runs.map((result) => result.guest!.attemptsPerSecond))),
      refusedPerSecond: round3(median(runs.map(refusedPerSecond))),
      refusedPercent: round3(median(runs.map((result) => ((result.guest!.refused429 + result.guest!.refused402) / Math.max(1, result.guest!.refused429 + result.guest!.refused402 + result.guest!.succeeded + result.guest!.failed)) * 100))),
      requestsPerSecond: round3(median(runs.map((result) => result.guest!.requestsPerSecond))),
      tokensPerSecond: round3(median(runs.map((result) => result.guest!.tokensPerSecond))),
      ttftP50: round3(median(runs.map((result) => result.guest!.ttftMs.p50))),
      ttftP99: round3(median(runs.map((result) => result.guest!.ttftMs.p99))),
      failed: runs.reduce((sum, result) => sum + result.guest!.failed, 0),
      errors: runs.reduce<Record<string, number>>((all, result) => {
        for (const [error, count] of Object.entries(result.guest!.errors)) all[error] = (all[error] ?? 0) + count;
        return all;
      }, {}),
      serverMicrosPerRefused: { perRepetition: perRefused, median: round3(median(perRefused)) },
      serverMicrosPerRefusedNet: { perRepetition: perRefusedNet, median: round3(median(perRefusedNet)) },
      guestClientMicrosPerAttempt: round3(median(runs.map((result) => ((result.cpu.coresByRole['guest client'] ?? 0) * 1e6) / result.guest!.attemptsPerSecond))),
      // N: what bare node:http spent per attempt (its process does nothing else).
      floorMicrosPerAttempt: phase === 'N' ? round3(median(runs.map((result) => ((result.cpu.coresByRole.floor ?? 0) * 1e6) / result.guest!.attemptsPerSecond))) : null,
    };
    const perRepetition = runs.map((result) => ({
      repetition: result.repetition,
      p50: risePercent(baseOf(result).owner.ttftMs.p50, result.owner.ttftMs.p50),
      p99: risePercent(baseOf(result).owner.ttftMs.p99, result.owner.ttftMs.p99),
    }));
    const rise = { p50: risePercent(a.ownerTtftP50, owner.ownerTtftP50), p99: risePercent(a.ownerTtftP99, owner.ownerTtftP99) };
    const fairness = phase === 'F' ? (() => {
      const shares = runs.map((result) => round3(result.byGuest!.small.succeeded / Math.max(1, result.byGuest!.small.succeeded + result.byGuest!.large.succeeded) * 100));
      const ratios = runs.map((result) => round3(result.byGuest!.large.attemptsPerSecond / Math.max(0.001, result.byGuest!.small.attemptsPerSecond)));
      const served = runs.map((result) => ({ small: result.byGuest!.small.requestsPerSecond, large: result.byGuest!.large.requestsPerSecond }));
      return { smallSharePercent: { perRepetition: shares, median: round3(median(shares)) }, attemptRatio: ratios, served, verdict: Math.min(...shares) >= 40 ? 'PASS' : 'FAIL' };
    })() : null;
    return [phase, {
      owner, rise, perRepetition, pooledP99Rise: risePercent(a.ownerTtftPooled.p99, owner.ownerTtftPooled.p99), guest, fairness,
      verdict: {
        p99: rise.p99 <= 10 ? 'PASS' : 'FAIL', p50: rise.p50 <= 2 ? 'PASS' : 'FAIL',
        microsPerRefused: phase === 'N' ? 'n/a' : guest.serverMicrosPerRefused.median <= 50 ? 'PASS' : 'FAIL',
      },
    }];
  }));
  return { a, phases: withGuests, expectedIdleGuestSlots: computedIdleSlots(options) };
}

export function write(results: any): void {
  const stamp = `${new Date().toISOString().slice(0, 10)}-shared-${results.machine.gitSha}`;
  const directory = path.join(PROJECT_ROOT, 'bench/results');
  fs.writeFileSync(path.join(directory, `${stamp}.json`), JSON.stringify(results, null, 2));
  const { options, summary } = results;
  const { a } = summary;
  const signed = (value: number) => `${value >= 0 ? '+' : ''}${value}`;
  const rise = (left: number, right: number) => `${signed(risePercent(left, right))} %`;
  const ran = Object.keys(summary.phases) as Phase[];
  const cores = (side: typeof a) => `owner client ${side.cores['owner client']}, guest client ${side.cores['guest client']}, server ${side.cores.server}, agents ${side.cores.agents}, postgres ${side.cores.postgres}; machine ${side.machineBusyCores} (other work ${side.otherBusyCores}, steal ${side.stealPercent} %)`;
  const phaseOf = (phase: Phase) => summary.phases[phase];
  const markdown = [
    `# Shared serving benchmark ${stamp}`, '',
    `Machine: ${results.machine.cpu}, ${results.machine.cores} cores, ${results.machine.memoryGiB} GiB, Linux ${results.machine.kernel}; Node ${results.machine.node}; ${results.database}; 1-minute load ${results.loadAverage1m.before} before, ${results.loadAverage1m.after} after.`,
    `Commit: ${results.machine.gitSha}${results.workingTree ? ` with ${results.workingTree} (uncommitted)` : ''}.`,
    `Settings: one owner deployment of ${MODEL}, ${options.replicas} replicas × ${options.slots} slots (CPU engine: TTFT ${options.ttftMs} ms, ${options.tokensPerSecond} tokens/s), ` +
    `shareIdleCapacity on; owner headroom ${options.headroomFraction} of each replica's slots (${Math.max(1, Math.ceil(options.slots * options.headroomFraction))}), at most ${options.maxGuestsPerReplica} guests per replica. ` +
    `Owner: ${options.ownerConcurrency} closed loops of streamed chats (max_tokens ${options.maxTokens}) on its endpoint, started staggered over one request's duration, each waiting a random 0–${options.ownerThinkMs} ms after an answer. ` +
    `Idle guest slots (GraphQL sharedModels with the owner load running) expected ${summary.expectedIdleGuestSlots}.`,
    `Phases: ${ran.length + 1} per repetition, interleaved (${['A', ...ran].join(', ')}), on the same replicas: ` + ['A', ...ran].map((phase) => `**${phase}** ${PHASES[phase as Phase]}`).join('; ') + '. ' +
    `B: ${options.guestMultiplier} × the idle guest slots closed loops, a 429 waits ${options.guestBackoffMs} ms (not Retry-After); H: ${options.heavyMultiplier} × as many loops; R: as many as H, of a workspace without credit; ` +
    `F: two guest workspaces sending ${options.fairSmallPerSecond} and ${options.fairSmallPerSecond * options.fairRatio} attempts/s (open loops, at most 256 in flight each).`,
    `Guest client priority: nice ${options.guestNice}. Method: ${options.reps} repetitions, each started on a quiet machine (other work under ${options.maxOtherCores} cores for 5 s) and run again when other work took more during it (${results.discarded.length / (options.phases.length)} discarded); each phase ${options.seconds} s measured after ${options.warmup + options.settleMs / 1000} s of load; medians over repetitions; a phase is compared with the A of its repetition. ` +
    `TTFT is client-side, request sent → first SSE chunk with content. Clients: the owner loops run in this benchmark's process, the guests in a second client process; the server (gateway + control plane), its agents and PostgreSQL are child processes of their own. ` +
    `Server CPU is utime + stime of the server process from /proc. Whole run ${results.wallSeconds} s${options.profiled ? '; server and agents ran with --cpu-prof' : ''}.`, '',
    '## Targets', '',
    '| phase | owner TTFT p50 A → phase | p50 change (≤ +2 %) | owner TTFT p99 A → phase | p99 change (≤ +10 %) | per repetition p50 / p99 | server CPU per refused attempt (≤ 50 µs) |', '|---|---|---:|---|---:|---|---:|',
    ...ran.map((phase) => {
      const summaryOf = phaseOf(phase);
      const reps = summaryOf.perRepetition.map((rep: { p50: number; p99: number }) => `${signed(rep.p50)} / ${signed(rep.p99)} %`).join('; ');
      const cpu = phase === 'N'
        ? `floor: ${summaryOf.guest.floorMicrosPerAttempt} µs per attempt in bare node:http`
        : `${summaryOf.guest.serverMicrosPerRefused.median} µs **${summaryOf.verdict.microsPerRefused}** (net of admitted guests ~${summaryOf.guest.serverMicrosPerRefusedNet.median})`;
      return `| ${phase} | ${a.ownerTtftP50} → ${summaryOf.owner.ownerTtftP50} ms | ${signed(summaryOf.rise.p50)} % **${summaryOf.verdict.p50}** | ${a.ownerTtftP99} → ${summaryOf.owner.ownerTtftP99} ms | ${signed(summaryOf.rise.p99)} % **${summaryOf.verdict.p99}** | ${reps} | ${cpu} |`;
    }),
    '',
    ...(phaseOf('R') && phaseOf('N') ? [
      `Refused attempt vs the node:http floor: our server ${phaseOf('R').guest.serverMicrosPerRefused.median} µs (R), bare node:http answering the same bytes ${phaseOf('N').guest.floorMicrosPerAttempt} µs (N, same flood, same owner load): ` +
      `${round3(phaseOf('R').guest.serverMicrosPerRefused.median - phaseOf('N').guest.floorMicrosPerAttempt)} µs is ours (authentication, the body scan, the screen, metrics).`, ''] : []),
    ...(phaseOf('F') ? [
      `Fairness (F): the smaller guest workspace got ${phaseOf('F').fairness.smallSharePercent.median} % of the served guest requests (per repetition ${phaseOf('F').fairness.smallSharePercent.perRepetition.join(', ')} %; goal ≥ 40 %: **${phaseOf('F').fairness.verdict}**), ` +
      `at attempt ratios ${phaseOf('F').fairness.attemptRatio.join(', ')} (large / small); served req/s small / large ${phaseOf('F').fairness.served.map((served: { small: number; large: number }) => `${served.small} / ${served.large}`).join('; ')}.`, ''] : []),
    '## Owner', '',
    `| measure | A (owner alone) | ${ran.map((phase) => `${phase}`).join(' | ')} |`, `|---|---:|${ran.map(() => '---:').join('|')}|`,
    `| TTFT p50 ms | ${a.ownerTtftP50} | ${ran.map((phase) => `${phaseOf(phase).owner.ownerTtftP50} (${rise(a.ownerTtftP50, phaseOf(phase).owner.ownerTtftP50)})`).join(' | ')} |`,
    `| TTFT p90 ms | ${a.ownerTtftP90} | ${ran.map((phase) => `${phaseOf(phase).owner.ownerTtftP90} (${rise(a.ownerTtftP90, phaseOf(phase).owner.ownerTtftP90)})`).join(' | ')} |`,
    `| TTFT p99 ms | ${a.ownerTtftP99} | ${ran.map((phase) => `${phaseOf(phase).owner.ownerTtftP99} (${rise(a.ownerTtftP99, phaseOf(phase).owner.ownerTtftP99)})`).join(' | ')} |`,
    `| TTFT p99 pooled ms (requests) | ${a.ownerTtftPooled.p99} (${a.ownerTtftPooled.count}) | ${ran.map((phase) => `${phaseOf(phase).owner.ownerTtftPooled.p99} (${phaseOf(phase).owner.ownerTtftPooled.count})`).join(' | ')} |`,
    `| whole stream p99 ms | ${a.ownerLatencyP99} | ${ran.map((phase) => `${phaseOf(phase).owner.ownerLatencyP99}`).join(' | ')} |`,
    `| requests/s | ${a.ownerRequestsPerSecond} | ${ran.map((phase) => `${phaseOf(phase).owner.ownerRequestsPerSecond}`).join(' | ')} |`,
    `| failed (all repetitions) | ${a.ownerFailed} | ${ran.map((phase) => `${phaseOf(phase).owner.ownerFailed}`).join(' | ')} |`,
    `| server's own mean time to first byte ms | ${a.serverFirstByteMeanMs} | ${ran.map((phase) => `${phaseOf(phase).owner.serverFirstByteMeanMs}`).join(' | ')} |`,
    `| server event-loop delay p99 / max ms | ${a.serverLagP99Ms} / ${a.serverLagMaxMs} | ${ran.map((phase) => `${phaseOf(phase).owner.serverLagP99Ms} / ${phaseOf(phase).owner.serverLagMaxMs}`).join(' | ')} |`,
    `| client event-loop delay p99 / max ms | ${a.clientLagP99Ms} / ${a.clientLagMaxMs} | ${ran.map((phase) => `${phaseOf(phase).owner.clientLagP99Ms} / ${phaseOf(phase).owner.clientLagMaxMs}`).join(' | ')} |`, '',
    '## Guests', '',
    '| phase | guests | attempts/s | refused/s (429, 402) | refused | served req/s | tokens/s | TTFT p50 / p99 ms | other failures | server µs per refused attempt (per repetition) | guest client µs per attempt |',
    '|---|---:|---:|---:|---:|---:|---:|---|---:|---|---:|',
    ...ran.map((phase) => {
      const { guest } = phaseOf(phase);
      return `| ${phase} | ${guest.guests}${phase === 'F' ? ' attempts/s' : ' loops'} | ${guest.attemptsPerSecond} | ${guest.refusedPerSecond} | ${guest.refusedPercent} % | ${guest.requestsPerSecond} | ${guest.tokensPerSecond} | ${guest.ttftP50} / ${guest.ttftP99} | ${guest.failed} | ` +
        `${guest.serverMicrosPerRefused.median} (${guest.serverMicrosPerRefused.perRepetition.join(', ')}); net ~${guest.serverMicrosPerRefusedNet.median} | ${guest.guestClientMicrosPerAttempt} |`;
    }),
    '',
    'Server µs per refused attempt: (server CPU in the phase − server CPU in the A of the same repetition) ÷ refused attempts, so the admitted guests\' streams are in it too (an upper bound); "net" also takes off the admitted guests, each costed as one owner request of that A (whose server CPU includes the idle loops, so it overstates them).', '',
    '## CPU (cores used on average during the measured window, medians)', '',
    `- A: ${cores(a)}`, ...ran.map((phase) => `- ${phase}: ${cores(phaseOf(phase).owner)}`), '',
    '## Phases', '',
    '| rep | phase | owner TTFT p50 / p90 / p99 ms | owner req/s | guests | guest attempts/s | refused % | guest req/s | server cores | server lag p99 ms | machine busy / other cores | load 1m |', '|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|',
    ...results.phases.map((result: PhaseResult) => `| ${result.repetition} | ${result.phase} | ${result.owner.ttftMs.p50} / ${result.owner.ttftMs.p90} / ${result.owner.ttftMs.p99} | ${result.owner.requestsPerSecond} | ${result.guests} | ` +
      `${result.guest?.attemptsPerSecond ?? '–'} | ${result.guest ? round3(((result.guest.refused429 + result.guest.refused402) / Math.max(1, result.guest.refused429 + result.guest.refused402 + result.guest.succeeded + result.guest.failed)) * 100) : '–'} | ${result.guest?.requestsPerSecond ?? '–'} | ` +
      `${round3(result.serverCpuMicros / result.windowSeconds / 1e6)} | ${result.serverEventLoopDelay.p99Ms} | ${result.cpu.machineBusyCores} / ${result.cpu.otherBusyCores} | ${result.loadAverage1m} |`),
    '',
  ].join('\n');
  fs.writeFileSync(path.join(directory, `${stamp}.md`), markdown);
  console.log(`\n${markdown}\nwrote bench/results/${stamp}.{json,md}`);
}

function percent(part: number, whole: number): string {
  return `${whole ? round3((part / whole) * 100) : 0} %`;
}

