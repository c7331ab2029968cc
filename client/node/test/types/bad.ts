// SPDX-License-Identifier: BSD-3-Clause
// Must NOT compile: shows that the declarations are checked at all.

import { connect } from 'rlockd';

async function main(): Promise<void> {
  const client = await connect({ servers: 'unix:/s' });
  const lock = await client.acquire('x', { ttl: '30s' });
  const fence: number = lock.fence;
  console.log(fence);
}

void main();
