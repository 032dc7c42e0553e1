import fs from 'node:fs';
import path from 'node:path';
import { printSchema } from 'graphql';
import { PROJECT_ROOT } from '../../control-plane/api/startup';
import { buildGatewaySchema } from './build-schema';

export const SCHEMA_FILE = path.join(PROJECT_ROOT, 'schema.graphql');

/** The checked-in schema text: emitted from the resolvers, never written by hand. */
export function printGatewaySchema(): string {
  return `# Generated from the resolvers by \`npm run schema\`; do not edit.\n\n${printSchema(buildGatewaySchema())}\n`;
}

if (require.main === module) {
  fs.writeFileSync(SCHEMA_FILE, printGatewaySchema());
  console.log(`wrote ${SCHEMA_FILE}`);
}
