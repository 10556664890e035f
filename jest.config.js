// Tests are compiled by tsc first (make test) and run as native ES modules.
export default {
  testEnvironment: 'node',
  roots: ['<rootDir>/dist'],
  testMatch: ['**/*.test.js'],
  testTimeout: 30000,
  maxWorkers: 2,
};
