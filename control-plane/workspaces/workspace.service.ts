import type { DataSource, Repository } from 'typeorm';
import { AppError } from '../errors/app-error';
import { newId } from '../ids';
import { Workspace } from './workspace.entity';

export class WorkspaceService {
  private readonly workspaces: Repository<Workspace>;

  constructor(dataSource: DataSource) {
    this.workspaces = dataSource.getRepository(Workspace);
  }

  async create(name: string): Promise<Workspace> {
    if (!name.trim()) throw new AppError('invalid_request', 'name must not be empty', { param: 'name' });
    return await this.workspaces.save(this.workspaces.create({ id: newId('ws'), name: name.trim() }));
  }

  /** Sets the prepaid credit (null: no limit). API keys pick it up within their cache TTL. */
  async setCreditBalance(id: string, creditBalance: number | null): Promise<void> {
    await this.workspaces.update({ id }, { creditBalance });
  }

  async count(): Promise<number> {
    return await this.workspaces.count();
  }

  async first(): Promise<Workspace | null> {
    return await this.workspaces.findOne({ where: {}, order: { createdAt: 'ASC' } });
  }
}
