# SPDX-License-Identifier: BSD-3-Clause
# Turn Lua scripts into a C source of NUL-terminated byte arrays.
# Usage: cmake -DOUT=file.c -DLUA_DIR=dir -P embed.cmake
# Each script NAME.lua becomes `const char lua_NAME[]`.
file(GLOB INPUTS ${LUA_DIR}/*.lua)
list(SORT INPUTS)
set(body "/* Generated from the lua/ scripts by cmake/embed.cmake; do not edit. */\n")
foreach(in ${INPUTS})
    get_filename_component(name ${in} NAME_WE)
    file(READ ${in} hex HEX)
    string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
    string(APPEND body "const char lua_${name}[] = {${bytes}0x00};\n")
endforeach()
file(WRITE ${OUT}.tmp "${body}")
file(RENAME ${OUT}.tmp ${OUT})
