// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// The package as users get it: `npm pack`, installed into an empty project,
// runs the README's shop example against a live daemon, imports from ES
// modules, and its declarations type-check a typed program (and reject a
// wrong one).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { promisify } = require('node:util');
const { startEnv } = require('./helpers/env');

const run = promisify(execFile);
const PKG = path.join(__dirname, '..');
const TSC = path.join(PKG, 'node_modules', 'typescript', 'bin', 'tsc');
const NPM = process.env.NPM || 'npm';

let env;
let project;
test.before(async () => {
  env = await startEnv();
  project = fs.mkdtempSync(path.join(os.tmpdir(), 'rlnode-pkg.'));
});
test.after(async () => {
  if (env) await env.stop();
  if (project && !process.env.RLOCKD_NODE_KEEP) fs.rmSync(project, { recursive: true, force: true });
});

/** The README's code block that follows `<!-- example: NAME -->`. */
function readmeExample(name) {
  const readme = fs.readFileSync(path.join(PKG, 'README.md'), 'utf8');
  const at = readme.indexOf(`<!-- example: ${name} -->`);
  assert.ok(at >= 0, `no example ${name} in README.md`);
  const m = /```js\n([\s\S]*?)```/.exec(readme.slice(at));
  return m[1];
}

/**
 * The example's `redis` module, for the project only: the few node-redis
 * calls it makes (createClient({socket: {path}}), connect, get, set, quit),
 * spoken to the test's real redis-server by the tests' RESP client.
 */
function installRedisShim(dir) {
  const shim = path.join(dir, 'node_modules', 'redis');
  fs.mkdirSync(shim, { recursive: true });
  fs.writeFileSync(path.join(shim, 'package.json'), JSON.stringify({ name: 'redis', version: '0.0.0-shim', main: 'index.js' }));
  fs.writeFileSync(path.join(shim, 'index.js'), `'use strict';
const { Redis } = require(${JSON.stringify(path.join(__dirname, 'helpers', 'redis.js'))});
exports.createClient = (opts) => {
  let r;
  return {
    async connect() { r = await Redis.connect(opts.socket.path); },
    get: (k) => r.command('GET', k),
    set: (k, v) => r.command('SET', k, v),
    async quit() { await r.command('QUIT'); r.close(); },
  };
};
`);
}

test('npm pack: the tarball holds the library, its schema and its declarations, nothing else', async () => {
  const { stdout } = await run(NPM, ['pack', '--json', '--pack-destination', project], { cwd: PKG, timeout: 120000 });
  const [info] = JSON.parse(stdout);
  const files = info.files.map((f) => f.path).sort();
  for (const f of ['README.md', 'index.d.ts', 'lib/index.js', 'lib/engine.js', 'package.json', 'proto/rlock.proto']) {
    assert.ok(files.includes(f), `${f} missing from the tarball`);
  }
  assert.deepEqual(files.filter((f) => !/^(lib\/[a-z]+\.js|README\.md|index\.d\.ts|package\.json|proto\/rlock\.proto)$/.test(f)), []);
  // postpack removed the copy: a checkout reads the repository's schema.
  assert.equal(fs.existsSync(path.join(PKG, 'proto')), false);
  fs.renameSync(path.join(project, info.filename), path.join(project, 'rlockd.tgz'));
});

test('installed from the tarball: the README example sells one piece', async () => {
  fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'shop', version: '1.0.0', private: true }));
  await run(NPM, ['install', '--prefer-offline', '--no-audit', '--no-fund', './rlockd.tgz'], { cwd: project, timeout: 180000 });
  assert.ok(fs.existsSync(path.join(project, 'node_modules', 'rlockd', 'proto', 'rlock.proto')));
  installRedisShim(project);
  fs.writeFileSync(path.join(project, 'example.js'), readmeExample('shop'));
  await env.redis.command('SET', 'stock:item42', '3');
  const runEnv = { ...process.env, RLOCKD_SERVERS: env.addr, REDIS_SOCKET: env.redisSock };
  const first = await run(process.execPath, ['example.js'], { cwd: project, env: runEnv, timeout: 60000 });
  assert.match(first.stdout, /sold one under fence \d+, 2 left\nsold\n/);
  assert.equal(await env.redis.command('GET', 'stock:item42'), '2');
  await env.redis.command('SET', 'stock:item42', '0');
  const second = await run(process.execPath, ['example.js'], { cwd: project, env: runEnv, timeout: 60000 });
  assert.equal(second.stdout, 'sold out\n');
  assert.deepEqual(await env.lockKeys(), []);
});

test('ES modules import the package', async () => {
  const code = `import { connect, RlockError } from 'rlockd';
const c = await connect({ servers: [${JSON.stringify(env.addr)}] });
const l = await c.acquire('esm:x');
console.log(typeof l.fence, new RlockError('CLOSED', 'x') instanceof Error);
await c.close();`;
  fs.writeFileSync(path.join(project, 'esm.mjs'), code);
  const { stdout } = await run(process.execPath, ['esm.mjs'], { cwd: project, timeout: 60000 });
  assert.equal(stdout, 'bigint true\n');
});

test('the declarations type-check a typed program, and refuse a wrong one', async () => {
  for (const f of ['program.ts', 'bad.ts']) fs.copyFileSync(path.join(__dirname, 'types', f), path.join(project, f));
  const tsconfig = (file) => JSON.stringify({
    compilerOptions: {
      strict: true, noEmit: true, target: 'es2022', module: 'node16', moduleResolution: 'node16',
      types: ['node'], typeRoots: [path.join(PKG, 'node_modules', '@types')],
    },
    files: [file],
  });
  fs.writeFileSync(path.join(project, 'tsconfig.json'), tsconfig('program.ts'));
  fs.writeFileSync(path.join(project, 'tsconfig.bad.json'), tsconfig('bad.ts'));
  await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: project, timeout: 120000 });
  const bad = await run(process.execPath, [TSC, '-p', 'tsconfig.bad.json'], { cwd: project, timeout: 120000 })
    .then(() => null, (e) => e);
  assert.ok(bad, 'a wrong program type-checked');
  assert.match(bad.stdout, /bad\.ts\(8,\d+\): error TS2322/);
  assert.match(bad.stdout, /bad\.ts\(9,\d+\): error TS2322/);
});
