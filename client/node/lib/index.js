// SPDX-License-Identifier: BSD-3-Clause
'use strict';

// rlockd: the Node.js client of the rlockd lock daemon.

const { connect, Client } = require('./client');
const { Lock } = require('./locks');
const { RlockError, RlockAbortError, STATUS_NAMES, LOST_REASONS } = require('./errors');

module.exports = {
  connect, Client, Lock, RlockError, RlockAbortError, STATUS_NAMES, LOST_REASONS,
};
