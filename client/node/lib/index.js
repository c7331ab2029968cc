// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// rlockd: the Node.js client of the rlockd lock daemon.

const { connect, Client } = require('./client');
const { Lock, Leadership } = require('./locks');
const { Observer } = require('./elect');
const { RlockError, RlockAbortError, STATUS_NAMES, LOST_REASONS } = require('./errors');

module.exports = {
  connect, Client, Lock, Leadership, Observer, RlockError, RlockAbortError, STATUS_NAMES, LOST_REASONS,
};
