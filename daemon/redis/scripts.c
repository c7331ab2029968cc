/* SPDX-License-Identifier: BSD-3-Clause */
/* scripts.c — see scripts.h. The lua_* arrays come from the generated lua_scripts.c. */
#include "scripts.h"

#define SCRIPT_EXTERN(id, name) extern const char lua_##name[];
SCRIPT_LIST(SCRIPT_EXTERN)
#undef SCRIPT_EXTERN

static const char *const texts[SCRIPT_COUNT] = {
#define SCRIPT_TEXT(id, name) lua_##name,
    SCRIPT_LIST(SCRIPT_TEXT)
#undef SCRIPT_TEXT
};

static const char *const names[SCRIPT_COUNT] = {
#define SCRIPT_NAME(id, name) #name,
    SCRIPT_LIST(SCRIPT_NAME)
#undef SCRIPT_NAME
};

const char *scripts_text(enum script_id id)
{
    return texts[id];
}

const char *scripts_name(enum script_id id)
{
    return names[id];
}

int scripts_batched(enum script_id id)
{
    return id == SCRIPT_ACQUIRE || id == SCRIPT_RELEASE;
}
