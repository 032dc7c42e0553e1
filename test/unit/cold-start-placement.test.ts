import type { CatalogModel } from '../../control-plane/catalog/catalog';
import type { Deployment } from '../../control-plane/deployments/deployment.entity';
import type { CapacityProvider } from '../../control-plane/replicas/capacity-provider';
import type { GpuOffer } from '../../control-plane/replicas/gpu-offer';
import { chooseOffer } from '../../control-plane/replicas/placement';
import { startBackoffMs } from '../../control-plane/replicas/replica-start-watchdog';
import { phasesSignature, storedAgentPhases } from '../../control-plane/replicas/startup-phases';

const model = { id: 'meta-llama/Llama-3.1-8B-Instruct', gpuMemoryGb: 24 } as CatalogModel;
const deployment = { priceCapPerHour: 2 } as Deployment;
const offer = (id: string, pricePerHour: number, cachedModels?: string[]): GpuOffer => ({
  id, provider: 'static', gpuName: 'L40S', gpuMemoryGb: 48, region: 'on-prem', pricePerHour, available: 1, ...(cachedModels ? { cachedModels } : {}),
});
const provider = (offers: GpuOffer[]) => ({ kind: 'static', offers: async () => offers }) as unknown as CapacityProvider;

describe('placement and the weights cache', () => {
  test('at the lowest price a host holding the model wins; a cache never buys a dearer host', async () => {
    const cached = offer('static:z', 1, [model.id]);
    expect(await chooseOffer(provider([offer('static:a', 1), cached, offer('static:b', 1, ['other/model'])]), deployment, model)).toEqual({ offer: cached });
    const cheaper = offer('static:y', 0.9);
    expect(await chooseOffer(provider([cached, cheaper]), deployment, model)).toEqual({ offer: cheaper });
    // Above the price cap, cached or not, it is never chosen.
    expect((await chooseOffer(provider([offer('static:x', 3, [model.id])]), deployment, model)).offer).toBeNull();
  });
});

describe('the start back-off', () => {
  test('doubles with each failure in a row from the base, up to the ceiling', () => {
    expect([0, 1, 2, 3, 4, 10].map((failures) => startBackoffMs(failures, 10_000, 60_000))).toEqual([0, 10_000, 20_000, 40_000, 60_000, 60_000]);
    expect(startBackoffMs(1_000, 1, 600_000)).toBe(600_000);
  });
});

describe('an agent\'s start-up phases as the control plane stores them', () => {
  test('keeps known-looking names, clips details, drops control characters, and never stores the control plane\'s own phase from an agent', () => {
    const stored = storedAgentPhases([
      { name: 'download', startedUnixMs: 1_700_000_000_000, durationMs: 1_200, done: true, detail: 'cache hit\n(2 GiB)', bytes: 2 ** 31 },
      { name: 'provision', startedUnixMs: 0, durationMs: 1, done: true, detail: '', bytes: 0 },
      { name: 'Bad Name', startedUnixMs: 0, durationMs: 1, done: true, detail: '', bytes: 0 },
      { name: 'load', startedUnixMs: 1_700_000_001_200, durationMs: 300, done: false, detail: 'x'.repeat(1_000), bytes: 0 },
    ]);
    expect(stored).toEqual([
      { name: 'download', startedAt: '2023-11-14T22:13:20.000Z', durationMs: 1_200, done: true, detail: 'cache hit (2 GiB)', bytes: 2 ** 31 },
      { name: 'load', startedAt: '2023-11-14T22:13:21.200Z', durationMs: 300, done: false, detail: 'x'.repeat(300), bytes: 0 },
    ]);
  });

  test('a phase that begins, ends or changes its detail is worth a write; its growing duration alone is not', () => {
    const running = { name: 'load', startedUnixMs: 1, durationMs: 10, done: false, detail: '', bytes: 0 };
    expect(phasesSignature([running])).toBe(phasesSignature([{ ...running, durationMs: 5_000 }]));
    expect(phasesSignature([running])).not.toBe(phasesSignature([{ ...running, done: true }]));
    expect(phasesSignature([running])).not.toBe(phasesSignature([running, { ...running, name: 'warm_up' }]));
    expect(phasesSignature(undefined)).toBe('');
  });
});
