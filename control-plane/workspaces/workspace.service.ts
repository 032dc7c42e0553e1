import type { DataSource, Repository } from 'typeorm';
import { AppError } from '../errors/app-error';
import { newId } from '../ids';
import { Workspace } from './workspace.entity';

export const MAX_WORKSPACE_NAME_LENGTH = 100;

export class WorkspaceService {
  private readonly workspaces: Repository<Workspace>;

  constructor(dataSource: DataSource) {
    this.workspaces = dataSource.getRepository(Workspace);
  }

  /** A postpaid workspace (no credit limit); WorkspaceAdmin opens one with credit and its first key. */
  async create(name: string): Promise<Workspace> {
    return await this.workspaces.save(this.workspaces.create({ id: newId('ws'), name: workspaceName(name), deletedAt: null }));
  }

  /** Every workspace ever created, deleted ones too: a fresh install is one with none. */
  async count(): Promise<number> {
    return await this.workspaces.count();
  }

  /** The first workspace ever created (the `dev` one), even when deleted, so deleting it does not make the next start a first run. */
  async first(): Promise<Workspace | null> {
    return await this.workspaces.findOne({ where: {}, order: { createdAt: 'ASC' } });
  }
}

/** A trimmed name of 1 to 100 characters, without control characters (PostgreSQL text cannot hold NUL). */
export function workspaceName(name: unknown): string {
  const trimmed = typeof name === 'string' ? name.trim() : '';
  if (!trimmed || trimmed.length > MAX_WORKSPACE_NAME_LENGTH || /\p{Cc}/u.test(trimmed)) {
    throw new AppError('invalid_request', `name must be 1 to ${MAX_WORKSPACE_NAME_LENGTH} characters without control characters`, { param: 'name' });
  }
  return trimmed;
}
