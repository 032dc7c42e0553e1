import { BatchWindow } from '../../control-plane/batches/batch-window';

/** Additive increase, multiplicative decrease of the lines a deployment runs at once. */
describe('BatchWindow', () => {
  it('grows by one per line finished without congestion, up to the slots', () => {
    const window = new BatchWindow(1);
    for (let finished = 0; finished < 10; finished++) window.finished(false, 0, 4);
    expect(window.limit).toBe(4);
  });

  it('halves once per round of lines when live requests wait, never below one', () => {
    const window = new BatchWindow(16);
    window.congested(8);
    expect(window.limit).toBe(8);
    // The lines in flight at the decrease must finish before another decrease counts.
    for (let left = 7; left >= 1; left--) window.finished(true, left, 64);
    expect(window.limit).toBe(8);
    window.finished(true, 0, 64);
    expect(window.limit).toBe(4);
    for (let round = 0; round < 10; round++) window.congested(0);
    expect(window.limit).toBe(1);
    window.finished(false, 0, 64);
    expect(window.limit).toBe(2);
  });
});
