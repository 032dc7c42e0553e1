import pino from 'pino';
import { ConnectionProgress, type Tracked } from '../../gateway/http/connection-progress';

/** A connection as the sweep sees it: counters it reads, and whether it was destroyed. */
function connection(fields: { bytesRead?: number; bytesWritten?: number; writableLength?: number; complete?: boolean } = {}) {
  const socket = { bytesRead: 0, bytesWritten: 0, writableLength: 0, destroyed: false, destroy() { this.destroyed = true; }, ...fields };
  const tracked = {
    socket, server: null, anonymous: null, busy: 1, request: fields.complete === undefined ? null : { complete: fields.complete },
    bytesReadAtRequest: 0, requestAt: 0, writtenAtCheck: 0, writeStalledSince: 0,
  } as unknown as Tracked;
  return { socket, tracked };
}

describe('ConnectionProgress', () => {
  const progress = () => new ConnectionProgress({ minBodyBytesPerSecond: 1_000, bodyGraceMs: 2_000, responseStallMs: 5_000 }, pino({ level: 'silent' }));

  it('cuts a body below the minimum rate only after its grace', () => {
    const watch = progress();
    const slow = connection({ complete: false, bytesRead: 500 });
    const fair = connection({ complete: false, bytesRead: 5_000 });
    watch.sweep([slow.tracked, fair.tracked], 1_500);
    expect(slow.socket.destroyed).toBe(false);
    // 3 s in: 1 s past the grace, 1,000 bytes were due.
    watch.sweep([slow.tracked, fair.tracked], 3_000);
    expect(slow.socket.destroyed).toBe(true);
    expect(fair.socket.destroyed).toBe(false);
    expect(watch.stats.slowBodies).toBe(1);
  });

  it('cuts any response whose waiting bytes stop leaving for the stall time, and spares one that drips', () => {
    const watch = progress();
    const stalled = connection({ writableLength: 1_000_000, bytesWritten: 1_000_000 });
    const dripping = connection({ writableLength: 1_000_000, bytesWritten: 1_000_000 });
    const idle = connection();
    for (let now = 0; now <= 6_000; now += 1_000) {
      dripping.socket.bytesWritten += 10;
      watch.sweep([stalled.tracked, dripping.tracked, idle.tracked], now);
    }
    expect(stalled.socket.destroyed).toBe(true);
    expect(dripping.socket.destroyed).toBe(false);
    expect(idle.socket.destroyed).toBe(false);
    expect(watch.stats.stalledResponses).toBe(1);
  });
});
