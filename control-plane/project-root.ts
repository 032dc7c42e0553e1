import fs from 'node:fs';
import path from 'node:path';

/** The folder holding package.json, whether code runs from sources (tests) or from `dist/`. */
export const PROJECT_ROOT = (() => {
  let directory = __dirname;
  while (!fs.existsSync(path.join(directory, 'package.json'))) directory = path.dirname(directory);
  return directory;
})();
