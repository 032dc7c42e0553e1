/** `npm run test:k8s` (test/kubernetes/cluster/run-cluster-test.cjs): the Kubernetes end-to-end test against the cluster KUBECONFIG names. */
const base = require('./jest.base');

module.exports = {
  ...base,
  roots: ['<rootDir>/test/kubernetes/cluster'],
  testPathIgnorePatterns: ['/node_modules/'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testTimeout: 600_000,
  maxWorkers: 1,
};
