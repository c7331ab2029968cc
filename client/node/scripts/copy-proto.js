// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// prepack: copy the schema from the repository's proto/ into the package, so
// that an installed package finds it next to lib/. postpack (--remove): drop
// the copy again, so that a checkout always reads the repository's schema.

const fs = require('node:fs');
const path = require('node:path');

const here = path.join(__dirname, '..');
const copy = path.join(here, 'proto', 'rlock.proto');
const source = path.join(here, '..', '..', 'proto', 'rlock.proto');

if (process.argv.includes('--remove')) {
  fs.rmSync(path.dirname(copy), { recursive: true, force: true });
} else {
  if (!fs.existsSync(source)) {
    console.error(`copy-proto: ${source} not found: pack from a checkout of the rlockd repository`);
    process.exit(1);
  }
  fs.mkdirSync(path.dirname(copy), { recursive: true });
  fs.copyFileSync(source, copy);
}
