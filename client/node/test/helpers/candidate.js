// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// A candidate in its own process, for election.test.js to kill:
//   node candidate.js ADDRESS ELECTION VALUE
// campaigns (waiting up to a minute), prints `leader TERM` once elected, and
// then leads until it is killed. Prints `lost CODE` if it loses the lead, and
// exits 2 if it is never elected.

const { connect } = require('../..');

async function main() {
  const [addr, election, value] = process.argv.slice(2);
  const client = await connect({ servers: [addr], name: `candidate-${value}` });
  process.stdout.write('campaigning\n');
  const leadership = await client.campaign(election, value, { wait: 60000 });
  leadership.on('lost', (err) => process.stdout.write(`lost ${err.code}\n`));
  process.stdout.write(`leader ${leadership.term}\n`);
  setInterval(() => {}, 1 << 30); // lead until killed
}

main().catch((e) => {
  console.error(e);
  process.exit(2);
});
