/** `npm run test:faults`: the fault suite (test/faults), real processes killed and cut off for
 *  real. Not part of `npm test`; same transform and PostgreSQL global setup. One file at a time:
 *  the figures it asserts (exit and detection times) must not depend on a neighbour's load. */
const base = require('./jest.base');

module.exports = {
  ...base,
  roots: ['<rootDir>/test/faults'],
  testPathIgnorePatterns: ['/node_modules/'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  maxWorkers: 1,
  testTimeout: 60000,
};
