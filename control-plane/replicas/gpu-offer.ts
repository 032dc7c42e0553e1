import type { ProviderKind } from '../deployments/deployment.entity';

/** Capacity a provider can rent out now: one kind of GPU machine at one price. */
export interface GpuOffer {
  /** Stable within the provider: `local`, `market:h100-80gb-us-east`, `static:host_…`. */
  readonly id: string;
  readonly provider: ProviderKind;
  readonly gpuName: string;
  readonly gpuMemoryGb: number;
  readonly region: string;
  readonly pricePerHour: number;
  /** Replicas it can still take right now (Infinity for the local machine). */
  readonly available: number;
  /**
   * Models whose weights the offer's machine already holds (a static host's agent says so in its
   * Hello): a replica of one starts without downloading it. Absent: not known.
   */
  readonly cachedModels?: readonly string[];
}
