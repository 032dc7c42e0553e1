/** The guest client process (guest-client.ts forks it): runs the loops it is sent and answers with their samples. */
import type { GuestJob } from './guest-client';
import { closedLoop, pacedLoad } from './load-loops';
import type { Sample } from './model';

function guestWorker(): void {
  let loads: Array<{ samples: Sample[]; stop: () => Promise<void> }> = [];
  process.on('message', (message: { start?: GuestJob; stop?: true }) => {
    if (message.start) {
      const job = message.start;
      const url = new URL(job.url);
      loads = job.groups.map((group) => group.perSecond !== undefined
        ? pacedLoad(group.perSecond, group.maxInFlight ?? 256, url, group.key, job.body, group.who)
        // Starts spread over one backoff, so the flood does not begin as one burst.
        : closedLoop(group.count!, url, group.key, job.body, group.backoffMs!, group.backoffMs! / group.count!, 0, group.who, true));
    } else if (message.stop) {
      const finishing = loads;
      loads = [];
      void Promise.all(finishing.map((load) => load.stop())).then(() => process.send!({ samples: finishing.flatMap((load) => load.samples) }));
    }
  });
  // The benchmark went away (or a Ctrl-C reached the whole group): nothing left to do.
  process.on('disconnect', () => process.exit(0));
}

guestWorker();
