import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

/** The tenant: every record (keys, deployments, usage) belongs to exactly one workspace. */
@Entity('workspaces')
export class Workspace {
  @PrimaryColumn('text') id: string;
  @Column('text') name: string;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
}
