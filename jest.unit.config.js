/** `npm run test:unit`: the unit tests alone (jest.config.js's `unit` project), in seconds,
 *  with no PostgreSQL and no process started. `npm test` runs them too. */
module.exports = { ...require('./jest.config'), projects: [require('./jest.config').projects[0]] };
