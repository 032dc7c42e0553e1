/** `npm test`: two jest projects. `unit` (test/unit and tests beside their source) needs no
 *  global setup; `integration` (everything else) gets one PostgreSQL for the run
 *  (test/support/global-setup.ts). Jest runs a project's global setup only when one of its tests
 *  is selected, so `npx jest test/unit` (or `npm run test:unit`) starts no database. */
const base = require('./jest.base');

const SOURCE_ROOTS = ['<rootDir>/common', '<rootDir>/control-plane', '<rootDir>/gateway', '<rootDir>/worker-agent'];

module.exports = {
  projects: [
    { ...base, displayName: 'unit', roots: ['<rootDir>/test/unit', ...SOURCE_ROOTS] },
    {
      ...base,
      displayName: 'integration',
      roots: ['<rootDir>/test'],
      // The fault suite kills and partitions real processes: `npm run test:faults` (jest.faults.config.js).
      // The console suite needs Chromium: `npm run test:console` (jest.console.config.js); the real-cluster suite a KUBECONFIG: `npm run test:k8s`.
      testPathIgnorePatterns: [...base.testPathIgnorePatterns, '<rootDir>/test/unit/', '<rootDir>/test/faults/', '<rootDir>/test/console/', '<rootDir>/test/kubernetes/cluster/'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
    },
  ],
  testTimeout: 60000,
  maxWorkers: 2,
};
