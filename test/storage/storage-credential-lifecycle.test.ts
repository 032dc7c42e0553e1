import { startCredentialFixture } from './credential-fixture';
import { openForSuite } from '../support/suite';

/** Workspace isolation, soft delete and the migration's way back, on a fresh database. */
describe('storage credential lifecycle', () => {
  const fixture = openForSuite(() => startCredentialFixture(), (opened) => opened.stop());

  it('isolates workspaces: another workspace\'s id behaves exactly like an unknown one', async () => {
    const owner = await fixture.newWorkspace();
    const other = await fixture.newWorkspace();
    const credential = await fixture.service.create(owner, fixture.input());
    await fixture.service.verify(owner, credential.id);
    const missing = credential.id + 10_000;

    for (const operation of ['get', 'verify', 'delete'] as const) {
      const foreign = await fixture.service[operation](other, credential.id).catch((caught) => caught);
      const unknown = await fixture.service[operation](other, missing).catch((caught) => caught);
      expect(foreign).toMatchObject({ code: 'not_found', param: 'id' });
      expect(foreign.message).toBe(unknown.message.replace(String(missing), String(credential.id)));
    }
    const foreignStore = await fixture.service.storeFor(other, credential.id).catch((caught) => caught);
    expect(foreignStore.code).toBe('storage_credential_not_found');
    expect(foreignStore.message).toContain('is not a storage credential of this workspace');
    expect(await fixture.service.list(other)).toEqual([]);
    expect((await fixture.service.list(owner)).map((item) => item.id)).toEqual([credential.id]);
    expect((await fixture.service.get(owner, credential.id)).status).toBe('verified');
  });

  it('soft-deletes: the row stays, the id stops working everywhere', async () => {
    const workspaceId = await fixture.newWorkspace();
    const credential = await fixture.service.create(workspaceId, fixture.input());
    await fixture.service.verify(workspaceId, credential.id);
    const deleted = await fixture.service.delete(workspaceId, credential.id);
    expect(deleted.deletedAt).toBeInstanceOf(Date);
    expect(await fixture.service.list(workspaceId)).toEqual([]);
    await expect(fixture.service.get(workspaceId, credential.id)).rejects.toMatchObject({ code: 'not_found' });
    await expect(fixture.service.delete(workspaceId, credential.id)).rejects.toMatchObject({ code: 'not_found' });
    const error = await fixture.service.storeFor(workspaceId, credential.id).catch((caught) => caught);
    expect(error).toMatchObject({ code: 'storage_credential_not_found', param: 'storage_credential_id' });
    const [row] = await fixture.dataSource.query('SELECT deleted_at FROM storage_credentials WHERE id = $1', [credential.id]);
    expect(row.deleted_at).toBeInstanceOf(Date);
  });
});
