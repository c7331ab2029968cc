# SPDX-License-Identifier: BSD-3-Clause
# Turn Lua scripts into a C source of NUL-terminated byte arrays.
# Usage: cmake -DOUT=file.c -DLUA_DIR=dir -P embed.cmake
# Each script NAME.lua becomes `const char lua_NAME[]`.
#
# batch.lua is the exception: the scripts its "-- BATCHED:" line names are
# put in front of it, each as the body of a function of its own KEYS and
# ARGV, and a table `scripts` maps their names to those functions.
file(GLOB INPUTS ${LUA_DIR}/*.lua)
list(SORT INPUTS)

function(embed_array name text out)
    string(HEX "${text}" hex)
    string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
    set(${out} "const char lua_${name}[] = {${bytes}0x00};\n" PARENT_SCOPE)
endfunction()

set(body "/* Generated from the lua/ scripts by cmake/embed.cmake; do not edit. */\n")
foreach(in ${INPUTS})
    get_filename_component(name ${in} NAME_WE)
    file(READ ${in} text)
    if(name STREQUAL "batch")
        string(REGEX MATCH "\n-- BATCHED:([a-z_ ]+)\n" line "${text}")
        if(NOT line)
            message(FATAL_ERROR "batch.lua: no '-- BATCHED: name ...' line")
        endif()
        separate_arguments(batched UNIX_COMMAND "${CMAKE_MATCH_1}")
        set(prelude "")
        set(table "local scripts = {")
        foreach(b ${batched})
            if(NOT EXISTS ${LUA_DIR}/${b}.lua)
                message(FATAL_ERROR "batch.lua names ${b}, and there is no ${b}.lua")
            endif()
            file(READ ${LUA_DIR}/${b}.lua inner)
            string(APPEND prelude "local function script_${b}(KEYS, ARGV)\n${inner}\nend\n")
            string(APPEND table "${b} = script_${b}, ")
        endforeach()
        set(text "${prelude}${table}}\n${text}")
    endif()
    embed_array(${name} "${text}" array)
    string(APPEND body "${array}")
endforeach()
file(WRITE ${OUT}.tmp "${body}")
file(RENAME ${OUT}.tmp ${OUT})
