/** `npm run test:console`: the web console end to end in a real Chromium (Debian's `chromium`,
 *  driven by playwright-core) against a real server. Not part of `npm test`, which must pass on a
 *  laptop without a browser; CI installs chromium and runs it after `npm test`. */
const base = require('./jest.base');

module.exports = {
  ...base,
  roots: ['<rootDir>/test/console'],
  testPathIgnorePatterns: ['/node_modules/'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  maxWorkers: 1,
  testTimeout: 90000,
};
