import fs from 'node:fs';
import { OPENAPI_FILE, printOpenApiDocument } from './openapi-document';

if (require.main === module) {
  fs.writeFileSync(OPENAPI_FILE, printOpenApiDocument());
  console.log(`wrote ${OPENAPI_FILE}`);
}
