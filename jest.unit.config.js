/** `npm run test:unit`: the unit tests (test/unit and tests beside their source), in seconds.
 *  They start no PostgreSQL and no process: no global setup. `npm test` runs them too. */
const base = require('./jest.config');

module.exports = {
  ...base,
  roots: ['<rootDir>/test/unit', '<rootDir>/common', '<rootDir>/control-plane', '<rootDir>/gateway', '<rootDir>/worker-agent'],
  testPathIgnorePatterns: ['/node_modules/'],
  globalSetup: undefined,
  globalTeardown: undefined,
};
