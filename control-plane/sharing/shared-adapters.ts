import type { AdapterRef } from '../../proto/worker/v1';

/** An owner's LoRA adapter offered to guests of shared serving (docs/adapters.md#sharing). */
export interface SharedAdapter {
  /** `ad_…`: guests call it as `shared/<id>` (unique everywhere, where names are unique only in a workspace). */
  readonly id: string;
  /** The catalog model it was trained on: its prices are the guest's, its pool's measures its own. */
  readonly baseModel: string;
  readonly createdAt: Date;
  readonly revision: number;
  /** The owner's deployments it is attached to: guests are placed only on those that share idle capacity. */
  readonly deploymentIds: ReadonlySet<string>;
}

/**
 * How shared serving learns which adapters owners offer to guests. Declared here and
 * implemented in adapters/ (which sits above the pipeline that uses sharing/). `find` and `all`
 * answer from memory: a guest's refused attempt costs no query.
 */
export interface SharedAdapters {
  /** The adapter by id when its owner shares it now; null otherwise (unshared, deleted, made up). */
  find(adapterId: string): SharedAdapter | null;
  /** Every shared adapter, oldest first (`GET /shared/v1/models`). */
  all(): readonly SharedAdapter[];
  /**
   * What the job carries (`Assign.adapter`), its weights' link valid until `deadlineUnixMs`;
   * `display_name` is `shared/<id>`, so neither the answer nor an error shows the owner's name.
   */
  ref(adapter: SharedAdapter, deadlineUnixMs: number): Promise<AdapterRef>;
}
