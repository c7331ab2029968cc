/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * config.h — rlockd's configuration: one table of keys drives parsing,
 * validation, --dump-config and the commented conf/rlockd.conf.
 *
 * A struct config is built whole from a file (or from defaults) and never
 * edited while live: a reload (SIGHUP, rlockd.c) builds a new one, merges the
 * reloadable keys into it (config_reload_merge) and swaps it in.
 */
#ifndef RLOCKD_CONFIG_H
#define RLOCKD_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct auth_tokens;

enum config_type {
    CONFIG_STRING,   /* char *, malloc'd */
    CONFIG_UINT,     /* uint32_t, bounded by min/max */
    CONFIG_DURATION, /* uint32_t milliseconds; text accepts ms/s/m/h, bare = seconds */
    CONFIG_BOOL,     /* int 0/1; yes/no/true/false/on/off/1/0 */
    CONFIG_LOGLEVEL, /* int, one of enum log_level (error, warn, info, debug) */
};

/*
 * X(section, key, type, field, default_text, min, max, reloadable, secret, help)
 * reloadable marks keys a SIGHUP reload may change (config_reload_merge); the
 * others keep their running value until a restart.
 * default_text is what the key's value would be in the file. min/max bound
 * UINT and DURATION values (in their unit: count or ms) and STRING lengths.
 */
#define CONFIG_KEYS(X)                                                                          \
    X("server", "listen", CONFIG_STRING, listen, "127.0.0.1:7483", 1, 1024, 0, 0,                \
      "Addresses to accept clients on, comma-separated: HOST:PORT (numeric) or unix:/path")     \
    X("server", "max_sessions", CONFIG_UINT, max_sessions, "10000", 1, 1000000, 1, 0,            \
      "Most client sessions at once (connections still before their Hello not counted); "      \
      "beyond it Hellos get LIMIT_EXCEEDED")                                                   \
    X("server", "max_pending", CONFIG_UINT, max_pending, "256", 1, 100000, 1, 0,                \
      "Connections that have not completed their Hello at once; beyond it the one silent "     \
      "the longest is closed")                                                                 \
    X("server", "max_pending_per_peer", CONFIG_UINT, max_pending_per_peer, "32", 1, 100000, 1,  \
      0, "Of those, from one IP address (unix socket peers are only counted in max_pending)")  \
    X("server", "admin_reserve", CONFIG_UINT, admin_reserve, "4", 0, 1000, 1, 0,               \
      "With authentication on, the last sessions of max_sessions only admin tokens may open, " \
      "so that operators can always get in")                                                   \
    X("server", "max_frame_bytes", CONFIG_UINT, max_frame_bytes, "65536", 256, 16777216, 1, 0,   \
      "Largest request frame accepted; a larger one closes that connection")                   \
    X("server", "max_output_bytes", CONFIG_UINT, max_output_bytes, "1048576", 65536,             \
      268435456, 1, 0, "Unsent bytes queued to one client before it is disconnected")          \
    X("server", "hello_timeout", CONFIG_DURATION, hello_timeout_ms, "5s", 100, 300000, 1, 0,     \
      "Time a new connection has to send Hello")                                               \
    X("server", "shutdown_timeout", CONFIG_DURATION, shutdown_timeout_ms, "5s", 0, 300000, 0, 0, \
      "On SIGTERM, time allowed to release held locks before exiting")                         \
    X("server", "shutdown", CONFIG_STRING, shutdown_mode, "handover", 1, 16, 0, 0,               \
      "On SIGTERM: handover (sessions are told to move, their locks stay held for the daemon " \
      "they resume on) or release (their locks are released). handover needs resume_key_file") \
    X("server", "handover_timeout", CONFIG_DURATION, handover_timeout_ms, "30s", 0, 3600000, 0, \
      0, "shutdown = handover: longest wait for the sessions to leave; those still connected "  \
      "are then released")                                                                      \
    X("redis", "address", CONFIG_STRING, redis_address, "127.0.0.1:6379", 1, 1024, 0, 0,         \
      "Redis server: HOST:PORT (numeric address) or unix:/path/to/redis.sock")                 \
    X("redis", "sentinels", CONFIG_STRING, redis_sentinels, "", 0, 1024, 0, 0,                  \
      "Redis Sentinel instead of address: HOST:PORT, ... of the sentinels (with master_name)")   \
    X("redis", "master_name", CONFIG_STRING, redis_master_name, "", 0, 256, 0, 0,               \
      "The master's name as the sentinels know it (with sentinels)")                          \
    X("redis", "sentinel_user", CONFIG_STRING, sentinel_user, "", 0, 256, 0, 0,                 \
      "ACL user for AUTH to the sentinels; empty = password-only AUTH (or none)")              \
    X("redis", "sentinel_password", CONFIG_STRING, sentinel_password, "", 0, 1024, 0, 1,        \
      "Password for AUTH to the sentinels; empty = no AUTH")                                   \
    X("redis", "cluster_nodes", CONFIG_STRING, redis_cluster_nodes, "", 0, 1024, 0, 0,          \
      "Redis Cluster instead of address: HOST:PORT, ... of some of its nodes (seeds)")        \
    X("redis", "min_replicas_acked", CONFIG_UINT, min_replicas_acked, "0", 0, 16, 1, 0,         \
      "After a grant, WAIT for this many replicas; fewer = release, answer UNAVAILABLE")       \
    X("redis", "replica_ack_timeout", CONFIG_DURATION, replica_ack_timeout_ms, "30ms", 1,       \
      10000, 1, 0, "How long a grant waits for min_replicas_acked replicas")                   \
    X("redis", "user", CONFIG_STRING, redis_user, "", 0, 256, 0, 0,                             \
      "ACL user for AUTH; empty = password-only AUTH (or none)")                               \
    X("redis", "password", CONFIG_STRING, redis_password, "", 0, 1024, 0, 1,                    \
      "Password for AUTH; empty = no AUTH (or password_file)")                                 \
    X("redis", "password_file", CONFIG_STRING, redis_password_file, "", 0, 1024, 0, 0,          \
      "File holding the password for AUTH instead of password (mode 0600 or 0640). Empty = "   \
      "the systemd credential redis-password when there is one, else password")                \
    X("redis", "database", CONFIG_UINT, redis_database, "0", 0, 1023, 0, 0,                     \
      "Database number to SELECT")                                                             \
    X("redis", "pool_size", CONFIG_UINT, pool_size, "2", 1, 64, 0, 0,                           \
      "Command connections; requests for one key always use the same one")                     \
    X("redis", "key_prefix", CONFIG_STRING, key_prefix, "rlock:", 0, 128, 0, 0,                  \
      "Lock key is PREFIX{resource}, fence key PREFIX{resource}:fence")                        \
    X("redis", "batch_max", CONFIG_UINT, batch_max, "64", 1, 256, 1, 0,                         \
      "Acquires and releases for one connection in one loop turn go to Redis as one script "   \
      "call, at most this many; 1 = each call alone")                                          \
    X("redis", "connect_timeout", CONFIG_DURATION, connect_timeout_ms, "1s", 10, 60000, 1, 0,    \
      "Deadline for connecting and loading scripts")                                           \
    X("redis", "command_timeout", CONFIG_DURATION, command_timeout_ms, "300ms", 10, 60000, 1, 0, \
      "Deadline for one Redis command (at most min_ttl/3); a connection that misses it is reset") \
    X("redis", "reconnect_min", CONFIG_DURATION, reconnect_min_ms, "50ms", 1, 60000, 1, 0,       \
      "First reconnect delay; doubles per failure, with jitter")                               \
    X("redis", "reconnect_max", CONFIG_DURATION, reconnect_max_ms, "1s", 1, 300000, 1, 0,        \
      "Largest reconnect delay")                                                               \
    X("redis", "notify", CONFIG_BOOL, redis_notify, "yes", 0, 0, 0, 0,                          \
      "Release notices between rlockd on one Redis: publish one per freed lock, subscribe for " \
      "resources with local waiters (woken at once); no = they wake at the holder's ttl")      \
    X("session", "timeout", CONFIG_DURATION, session_timeout_ms, "10s", 500, 3600000, 1, 0,      \
      "A session with no frame for this long ends and its locks are released")                 \
    X("session", "min_timeout", CONFIG_DURATION, session_min_timeout_ms, "1s", 100, 3600000, 1,  \
      0, "Smallest session timeout a client may ask for in Hello")                             \
    X("session", "max_timeout", CONFIG_DURATION, session_max_timeout_ms, "5m", 500, 3600000, 1,  \
      0, "Largest session timeout a client may ask for in Hello")                              \
    X("session", "max_locks", CONFIG_UINT, max_locks_per_session, "1024", 1, 1000000, 1, 0,      \
      "Locks one session may hold (or wait for) at once")                                      \
    X("session", "resume_key_file", CONFIG_STRING, resume_key_file, "", 0, 1024, 0, 0,          \
      "Key letting sessions resume on any daemon with the same file (created 0600 if "         \
      "missing). Empty = $STATE_DIRECTORY/resume.key under systemd, else none")                \
    X("limits", "default_ttl", CONFIG_DURATION, default_ttl_ms, "30s", 100, 86400000, 1, 0,      \
      "Lease of a lock whose Acquire gives ttl_ms = 0")                                        \
    X("limits", "min_ttl", CONFIG_DURATION, min_ttl_ms, "1s", 100, 86400000, 1, 0,               \
      "Smallest lease a client may ask for")                                                   \
    X("limits", "max_ttl", CONFIG_DURATION, max_ttl_ms, "1h", 100, 86400000, 1, 0,               \
      "Largest lease a client may ask for")                                                    \
    X("limits", "max_wait", CONFIG_DURATION, max_wait_ms, "10m", 0, 86400000, 1, 0,              \
      "Longest wait_ms honoured; larger waits are capped")                                     \
    X("limits", "fence_ttl", CONFIG_DURATION, fence_ttl_ms, "2h", 60000, 2592000000u, 1, 0,      \
      "How long a resource's fence key outlives its last grant (fences keep growing after "    \
      "it expires: they are raised to the Redis clock)")                                       \
    X("limits", "max_resource_bytes", CONFIG_UINT, max_resource_bytes, "512", 1, 4096, 1, 0,     \
      "Longest resource name")                                                                 \
    X("limits", "max_waiters", CONFIG_UINT, max_waiters_per_resource, "4096", 1, 1000000, 1, 0,  \
      "Waiters queued on one resource at once")                                                \
    X("limits", "max_locks", CONFIG_UINT, max_locks, "1000000", 1, 100000000, 1, 0,             \
      "Locks held, awaited or being tried in the whole daemon at once; beyond it acquires get "\
      "LIMIT_EXCEEDED")                                                                        \
    X("limits", "client_max_locks", CONFIG_UINT, client_max_locks, "0", 0, 100000000, 1, 0,     \
      "Quota of each client token: locks its sessions hold, await or try at once; 0 = none. "  \
      "A token file entry's max_locks=N overrides it")                                         \
    X("limits", "client_max_waiters", CONFIG_UINT, client_max_waiters, "0", 0, 100000000, 1, 0, \
      "Quota of each client token: acquires its sessions have queued at once; 0 = none. "      \
      "A token file entry's max_waiters=N overrides it")                                       \
    X("limits", "admin_max_locks", CONFIG_UINT, admin_max_locks, "0", 0, 100000000, 1, 0,       \
      "Quota of each admin token, as client_max_locks; 0 = none")                              \
    X("limits", "admin_max_waiters", CONFIG_UINT, admin_max_waiters, "0", 0, 100000000, 1, 0,   \
      "Quota of each admin token, as client_max_waiters; 0 = none")                            \
    X("limits", "max_hold", CONFIG_DURATION, max_hold_ms, "0", 0, 86400000, 1, 0,                \
      "Longest a lock may be held before it is lost (MAX_HOLD) even while renewed; "           \
      "0 = no limit. Also the default for acquires that ask for none")                         \
    X("limits", "lock_delay", CONFIG_DURATION, lock_delay_ms, "0", 0, 86400000, 1, 0,            \
      "After a session ends uncleanly (keepalive timeout, connection lost without Goodbye), "  \
      "its locks stay taken this long; 0 = freed at once")                                     \
    X("limits", "max_lock_delay", CONFIG_DURATION, max_lock_delay_ms, "1m", 0, 86400000, 1,     \
      0, "Largest lock_delay an acquire may ask for")                                          \
    X("metrics", "listen", CONFIG_STRING, metrics_listen, "127.0.0.1:9483", 0, 1024, 1, 0,       \
      "HTTP endpoint for /metrics, /healthz, /readyz and the status page (/status): "         \
      "HOST:PORT (numeric) or unix:/path; empty = off")                                        \
    X("metrics", "top_resources", CONFIG_UINT, top_resources, "1000", 0, 100000, 0, 0,          \
      "The most contended resources followed (TopResources, rlockctl top): wait and hold "    \
      "statistics of each; 0 = none. Memory is fixed by this number, about 1 KiB each")      \
    X("metrics", "max_connections", CONFIG_UINT, metrics_max_connections, "16", 1, 1024, 0, 0,  \
      "Connections to the metrics endpoint at once; more wait in the listen backlog")         \
    X("metrics", "request_timeout", CONFIG_DURATION, metrics_request_timeout_ms, "5s", 100,     \
      60000, 0, 0, "Time a metrics client has to send its whole request, and again to read "   \
      "the answer")                                                                            \
    X("tls", "listen", CONFIG_STRING, tls_listen, "", 0, 1024, 0, 0,                            \
      "Addresses to accept TLS clients on, comma-separated like server.listen; empty = no TLS") \
    X("tls", "cert_file", CONFIG_STRING, tls_cert_file, "", 0, 1024, 1, 0,                      \
      "The daemon's certificate chain (PEM), read at start and at each reload")               \
    X("tls", "key_file", CONFIG_STRING, tls_key_file, "", 0, 1024, 1, 0,                        \
      "Its private key (PEM, no passphrase); others must not be able to read it. Empty = " \
      "the systemd credential tls-key")             \
    X("tls", "ca_file", CONFIG_STRING, tls_ca_file, "", 0, 1024, 1, 0,                          \
      "CA certificates (PEM) that client certificates must chain to")                         \
    X("tls", "client_certs", CONFIG_STRING, tls_client_certs, "none", 1, 16, 1, 0,             \
      "none, optional or required: whether clients must present a certificate of ca_file; "   \
      "an entry cert:NAME in the token file gives the certificate named NAME its role")       \
    X("tls", "min_version", CONFIG_STRING, tls_min_version, "1.2", 1, 8, 1, 0,                 \
      "Lowest TLS version accepted: 1.2 or 1.3")                                              \
    X("auth", "token_file", CONFIG_STRING, auth_token_file, "", 0, 1024, 1, 0,                  \
      "File of client tokens, one per line: admin TOKEN or client TOKEN; others must not be "   \
      "able to read it. Empty = none")                                                          \
    X("auth", "tokens", CONFIG_STRING, auth_inline, "", 0, 1024, 1, 1,                          \
      "Tokens written here, comma-separated ROLE TOKEN entries (prefer token_file). With no "   \
      "token at all, clients need none and every session may send admin requests")              \
    X("auth", "tokenless_grace", CONFIG_DURATION, auth_tokenless_grace_ms, "0", 0, 86400000, 1,  \
      0, "When a reload turns authentication on, sessions opened without a token end after "   \
      "this long; 0 = at the reload")                                                         \
    X("log", "level", CONFIG_LOGLEVEL, log_level, "info", 0, 0, 1, 0,                           \
      "error, warn, info or debug")

struct config {
    char *listen;
    uint32_t max_sessions;
    uint32_t max_pending;
    uint32_t max_pending_per_peer;
    uint32_t admin_reserve;
    uint32_t max_frame_bytes;
    uint32_t max_output_bytes;
    uint32_t hello_timeout_ms;
    uint32_t shutdown_timeout_ms;
    char *shutdown_mode;
    uint32_t handover_timeout_ms;
    char *redis_address;
    char *redis_sentinels;
    char *redis_master_name;
    char *sentinel_user;
    char *sentinel_password;
    char *redis_cluster_nodes;
    uint32_t min_replicas_acked;
    uint32_t replica_ack_timeout_ms;
    char *redis_user;
    char *redis_password;
    char *redis_password_file;
    uint32_t redis_database;
    uint32_t pool_size;
    uint32_t batch_max;
    char *key_prefix;
    uint32_t connect_timeout_ms;
    uint32_t command_timeout_ms;
    uint32_t reconnect_min_ms;
    uint32_t reconnect_max_ms;
    int redis_notify;
    uint32_t session_timeout_ms;
    uint32_t session_min_timeout_ms;
    uint32_t session_max_timeout_ms;
    uint32_t max_locks_per_session;
    char *resume_key_file;
    uint32_t default_ttl_ms;
    uint32_t min_ttl_ms;
    uint32_t max_ttl_ms;
    uint32_t max_wait_ms;
    uint32_t fence_ttl_ms;
    uint32_t max_resource_bytes;
    uint32_t top_resources;
    uint32_t max_waiters_per_resource;
    uint32_t max_locks;
    uint32_t client_max_locks;
    uint32_t client_max_waiters;
    uint32_t admin_max_locks;
    uint32_t admin_max_waiters;
    uint32_t max_hold_ms;
    uint32_t lock_delay_ms;
    uint32_t max_lock_delay_ms;
    char *metrics_listen;
    uint32_t metrics_max_connections;
    uint32_t metrics_request_timeout_ms;
    char *tls_listen;
    char *tls_cert_file;
    char *tls_key_file;
    char *tls_ca_file;
    char *tls_client_certs;
    char *tls_min_version;
    char *auth_token_file;
    char *auth_inline;
    uint32_t auth_tokenless_grace_ms;
    int log_level;
    /* Not a key: the tokens of auth_token_file and auth_inline, read by config_load
     * (NULL: authentication is off). Owned by the config. */
    struct auth_tokens *auth;
    /* Not keys: where config_load found secrets, for the log. */
    uint8_t tokens_from_credential;   /* $CREDENTIALS_DIRECTORY/tokens */
    uint8_t password_from_credential; /* $CREDENTIALS_DIRECTORY/redis-password */
    char exposed[96]; /* secret keys written in a file other users can read ("" = none) */
};

/*
 * 1 when server.shutdown = handover: SIGTERM hands sessions over, provided the
 * daemon has a resume key to resume them with (else their locks are released).
 */
int config_handover(const struct config *c);

/* What to do about c->exposed (secrets in a configuration file path that others can read),
 * in a static buffer. */
const char *config_exposed_advice(const struct config *c, const char *path);

/* A config holding every default. NULL when out of memory. */
struct config *config_defaults(void);

/*
 * Read path over the defaults. On error returns NULL and writes one line per
 * problem to err, each naming file and line ("rlockd.conf:12: session.timeout:
 * not a duration"): unknown sections or keys, bad values, out-of-range
 * numbers, over-long lines, and cross-field conflicts (min > max, ...). The
 * tokens of [auth] (inline and token_file) are read too, into c->auth.
 */
struct config *config_load(const char *path, FILE *err);

/* Cross-field checks; returns 0 or -1 after writing each problem to err. */
int config_validate(const struct config *c, const char *origin, FILE *err);

/* Write c as an INI file; secrets are printed as "<hidden>" unless show_secrets. */
void config_dump(const struct config *c, FILE *out, int show_secrets);

/* What config_reload_merge tells of a line. */
enum config_change {
    CONFIG_CHANGE_APPLIED = 0, /* a reloadable key changed */
    CONFIG_CHANGE_RESTART = 1, /* a key that needs a restart changed; its value stays */
    CONFIG_CHANGE_REFUSED = 2, /* a problem of the merged config: the reload is refused */
};

/*
 * A reload: a new config with new's value for every reloadable key and old's
 * for the rest. tell(arg, line, kind) is told of each changed key (secrets by
 * name only), and of each problem, one line each, when the merged config is
 * not valid. NULL then, or when out of memory.
 */
struct config *config_reload_merge(const struct config *old, const struct config *new,
                                   void (*tell)(void *arg, const char *line,
                                                enum config_change kind),
                                   void *arg);

/* Free c and its strings; accepts NULL. */
void config_free(struct config *c);

/*
 * One key of the table as documentation shows it (rlockd.conf(5) is
 * generated from these). Strings point into the table and live for ever.
 */
struct config_key_doc {
    const char *section;
    const char *name;
    const char *type;         /* "string", "number", "duration", "boolean" or "log level" */
    const char *default_text; /* as the file would spell it ("" = empty) */
    const char *help;
    char min[24];             /* bounds as the file would spell them (lengths in bytes for */
    char max[24];             /* strings); both "" for booleans and levels */
    int reloadable;           /* SIGHUP applies a change; otherwise it needs a restart */
    int secret;
};

/* Fill *out with the i-th key, in the table's (and the file's) order; -1 past the last. */
int config_key_doc(size_t i, struct config_key_doc *out);

/* Most entries in server.listen. */
#define CONFIG_MAX_LISTEN 8

/* Most entries in redis.sentinels and redis.cluster_nodes. */
#define CONFIG_MAX_REDIS_NODES 16

/*
 * Where Redis is: exactly one of redis.address (a single server, also the
 * default), redis.sentinels with redis.master_name (Sentinel finds the
 * master) or redis.cluster_nodes (a Redis Cluster, through its seeds).
 * Validation refuses a file that names two of them.
 */
enum config_topology { TOPOLOGY_SINGLE, TOPOLOGY_SENTINEL, TOPOLOGY_CLUSTER };
enum config_topology config_topology(const struct config *c);
const char *config_topology_name(enum config_topology t); /* "single", "sentinel", "cluster" */

/* One parsed address: a numeric host and port, or a unix socket path. */
struct config_address {
    int is_unix;    /* 1: path is set; 0: host and port are set */
    char host[64];  /* numeric IPv4 or IPv6 text, without brackets */
    uint16_t port;  /* 0 = any free port (only meaningful for listening) */
    char path[108]; /* absolute path, NUL-terminated, fits sockaddr_un.sun_path */
};

/*
 * Parse one address, with no surrounding whitespace:
 *   "127.0.0.1:7483"   numeric IPv4 and port
 *   "[::1]:7483"       numeric IPv6 in brackets and port
 *   "unix:/run/x.sock" absolute path of a unix socket (at most 107 bytes)
 * Host names are refused (nothing here resolves names). Port is decimal
 * 0..65535; 0 is accepted and callers that need a real port must check it.
 * Returns 0 and fills *out, or -1 leaving *out untouched and writing a
 * one-line reason (no trailing newline, no file/key prefix) to err, which may
 * be NULL when errlen is 0. Pure: no allocation, no I/O.
 */
int config_parse_address(const char *text, struct config_address *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * Parse a comma-separated list of addresses (server.listen): blanks around
 * each entry are ignored, empty entries are errors, at most max entries.
 * Returns the number of entries stored in out[0..max-1] (at least 1), or -1
 * with a reason in err as for config_parse_address ("entry 2 (foo): ...").
 */
int config_parse_listen(const char *text, struct config_address *out, size_t max, char *err,
                        size_t errlen) __attribute__((warn_unused_result));

#endif
