/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scripts.h — the Lua scripts embedded from lua/ at build time.
 * One X-macro lists them; the pool loads each on every new connection.
 */
#ifndef RLOCKD_SCRIPTS_H
#define RLOCKD_SCRIPTS_H

#define SCRIPT_LIST(X)                                                                          \
    X(ACQUIRE, acquire)                                                                         \
    X(RELEASE, release)                                                                         \
    X(RENEW, renew)                                                                             \
    X(RELEASE_MANY, release_many)                                                               \
    X(ADOPT, adopt)                                                                             \
    X(GROUP_ACQUIRE, group_acquire)                                                             \
    X(GROUP_RENEW, group_renew)                                                                 \
    X(GROUP_RELEASE, group_release)                                                             \
    X(LEADER, leader)                                                                           \
    X(BATCH, batch)

enum script_id {
#define SCRIPT_ENUM(id, name) SCRIPT_##id,
    SCRIPT_LIST(SCRIPT_ENUM)
#undef SCRIPT_ENUM
    SCRIPT_COUNT
};

/* Source text (NUL-terminated) and short name of a script. */
const char *scripts_text(enum script_id id);
const char *scripts_name(enum script_id id);
/*
 * 1 when a call of id may go to Redis inside a BATCH call with others
 * (lua/batch.lua names the same scripts on its BATCHED line): scripts
 * whose calls touch only their own keys, so that running several in one
 * script changes nothing but the price.
 */
int scripts_batched(enum script_id id);

#endif
