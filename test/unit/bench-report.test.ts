import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { baseRatios, freshResultName, medianInterval, percentChange } from '../../bench/report';

describe('freshResultName (bench/report.ts)', () => {
  it('keeps a new name, and numbers one whose JSON or Markdown is already there', () => {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-results-'));
    try {
      expect(freshResultName(directory, 'run')).toBe('run');
      fs.writeFileSync(path.join(directory, 'run.json'), '{}');
      expect(freshResultName(directory, 'run')).toBe('run-2');
      fs.writeFileSync(path.join(directory, 'run-2.md'), '');
      expect(freshResultName(directory, 'run')).toBe('run-3');
    } finally {
      fs.rmSync(directory, { recursive: true, force: true });
    }
  });
});


describe('medianInterval (bench/report.ts)', () => {
  it('gives the order statistics a binomial count allows: the 4th and 12th of 15 at 95 %', () => {
    const values = Array.from({ length: 15 }, (_, index) => 15 - index);
    const interval = medianInterval(values)!;
    expect(interval.low).toBe(4);
    expect(interval.high).toBe(12);
    // 1 − 2·P(Binomial(15, ½) ≤ 3) = 1 − 2·576/32768
    expect(interval.confidence).toBeCloseTo(1 - (2 * 576) / 32768, 10);
  });

  it('moves one rank, not by its size, when one repetition is far off', () => {
    const calm = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24];
    const wild = [...calm.slice(0, 14), 1e6];
    expect(medianInterval(wild)).toEqual(medianInterval(calm));
  });

  it('has no interval for too few repetitions, and skips values that are not numbers', () => {
    expect(medianInterval([1, 2, 3, 4, 5])).toBeNull();
    expect(medianInterval([1, 2, 3, 4, 5, NaN])).toBeNull();
    expect(medianInterval([1, 2, 3, 4, 5, 6])).toEqual({ low: 1, high: 6, confidence: 1 - 2 / 64 });
  });

  it('widens with the confidence asked for', () => {
    const values = Array.from({ length: 30 }, (_, index) => index);
    const ninety = medianInterval(values, 0.9)!;
    const ninetyNine = medianInterval(values, 0.99)!;
    expect(ninety.confidence).toBeGreaterThanOrEqual(0.9);
    expect(ninetyNine.confidence).toBeGreaterThanOrEqual(0.99);
    expect(ninetyNine.low).toBeLessThan(ninety.low);
    expect(ninetyNine.high).toBeGreaterThan(ninety.high);
  });
});

describe('baseRatios (bench/report.ts)', () => {
  const run = (target: string, repetition: number, gateway: number) => ({ scenario: 's', target, repetition, cpuMicrosPerRequest: { gateway } }) as never;

  it('pairs each repetition with base in the same repetition, and skips one that has no base', () => {
    const runs = [run('base', 1, 100), run('on', 1, 110), run('base', 2, 200), run('on', 2, 240), run('on', 3, 999)];
    expect(baseRatios(runs, 's', 'on')).toEqual([1.1, 1.2]);
    expect(percentChange(1.124)).toBe('+12.4 %');
    expect(percentChange(0.9)).toBe('-10.0 %');
  });
});
