import { HoltWinters } from '../../control-plane/autoscaling/forecaster';

describe('HoltWinters', () => {
  it('forecasts a linear ramp exactly from its second sample on, at every horizon', () => {
    const forecaster = new HoltWinters({ alpha: 0.3, beta: 0.1 });
    const state = forecaster.newState();
    const ramp = (step: number) => 4 + 0.5 * step;
    forecaster.update(state, ramp(0));
    // One sample: a level, no trend yet.
    expect(forecaster.forecast(state, 3)).toBe(4);
    for (let step = 1; step < 50; step++) {
      forecaster.update(state, ramp(step));
      for (const ahead of [1, 5, 25]) expect(forecaster.forecast(state, ahead)).toBeCloseTo(ramp(step + ahead), 10);
    }
  });

  it('follows a step with the level and lets the trend decay, rather than jumping to it', () => {
    const forecaster = new HoltWinters({ alpha: 0.5, beta: 0.1 });
    const state = forecaster.newState();
    for (let step = 0; step < 20; step++) forecaster.update(state, 10);
    forecaster.update(state, 20);
    const next = forecaster.forecast(state, 1);
    expect(next).toBeGreaterThan(10);
    expect(next).toBeLessThan(20);
    for (let step = 0; step < 60; step++) forecaster.update(state, 20);
    expect(forecaster.forecast(state, 1)).toBeCloseTo(20, 1);
  });

  it('recovers the season of a seasonal series with a trend, and forecasts it exactly', () => {
    const season = [3, -1, -4, 2, 0, -2, 5, -3];
    const series = (step: number) => 50 + 0.25 * step + season[step % season.length];
    const forecaster = new HoltWinters({ alpha: 0.4, beta: 0.1, gamma: 0.3, seasonLength: season.length });
    const state = forecaster.newState();
    for (let step = 0; step < 2 * season.length; step++) forecaster.update(state, series(step));
    expect(state.season).not.toBeNull();
    state.season!.forEach((offset, slot) => expect(offset).toBeCloseTo(season[slot], 10));
    for (let step = 2 * season.length; step < 6 * season.length; step++) forecaster.update(state, series(step));
    state.season!.forEach((offset, slot) => expect(offset).toBeCloseTo(season[slot], 10));
    const last = 6 * season.length - 1;
    for (const ahead of [1, 3, 8, 13]) expect(forecaster.forecast(state, ahead)).toBeCloseTo(series(last + ahead), 10);
  });

  it('learns a season that changes, at the rate gamma allows', () => {
    const forecaster = new HoltWinters({ alpha: 0.2, beta: 0, gamma: 0.5, seasonLength: 4 });
    const state = forecaster.newState();
    for (let step = 0; step < 8; step++) forecaster.update(state, 10);
    expect(state.season).toEqual([0, 0, 0, 0]);
    // Slot 1 turns into a spike of +8; each season it is seen, the forecast of it moves closer.
    const forecastsOfSlotOne: number[] = [];
    for (let step = 8; step < 40; step++) {
      if (step % 4 === 1) forecastsOfSlotOne.push(forecaster.forecast(state, 1));
      forecaster.update(state, step % 4 === 1 ? 18 : 10);
    }
    expect(forecastsOfSlotOne[0]).toBeCloseTo(10, 5);
    expect(forecastsOfSlotOne.at(-1)!).toBeGreaterThan(17);
    expect([...forecastsOfSlotOne].sort((left, right) => left - right)).toEqual(forecastsOfSlotOne);
  });

  it('returns NaN before any sample, and refuses bad weights naming the option', () => {
    const forecaster = new HoltWinters({ alpha: 0.5, beta: 0.1 });
    expect(forecaster.forecast(forecaster.newState(), 1)).toBeNaN();
    expect(() => new HoltWinters({ alpha: 0, beta: 0.1 })).toThrow(expect.objectContaining({ code: 'invalid_request', param: 'alpha' }));
    expect(() => new HoltWinters({ alpha: 0.5, beta: 1.5 })).toThrow(expect.objectContaining({ param: 'beta' }));
    expect(() => new HoltWinters({ alpha: 0.5, beta: 0.1, seasonLength: 1 })).toThrow(expect.objectContaining({ param: 'seasonLength' }));
  });
});
