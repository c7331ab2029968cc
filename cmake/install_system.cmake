# SPDX-License-Identifier: BSD-3-Clause
# Install-time rules for rlockd.conf and the systemd unit, run from
# cmake_install.cmake (install(SCRIPT)) with RLOCK_SOURCE_DIR,
# RLOCK_BINARY_DIR and RLOCK_SBINDIR set by the install(CODE) before it.
#
# Their place depends on the prefix, which is known only now (cmake --install
# --prefix, dh_auto_install): for /usr the configuration goes to /etc/rlockd, as the
# GNU conventions (and the daemon's default -c) have it; for any other prefix
# to PREFIX/etc/rlockd. The unit goes to PREFIX/lib/systemd/system (systemd
# reads /usr/lib/... and /usr/local/lib/...), as shipped for /usr, and with
# its paths rewritten to the install for any other prefix. file(INSTALL)
# honours DESTDIR and records what it installs, like every other rule.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
    set(rlock_etc "/etc")
else()
    set(rlock_etc "${CMAKE_INSTALL_PREFIX}/etc")
endif()
file(INSTALL DESTINATION "${rlock_etc}/rlockd" TYPE FILE
     FILES "${RLOCK_SOURCE_DIR}/conf/rlockd.conf")
# The unit's credentials directory (LoadCredential=), empty and root's alone.
file(MAKE_DIRECTORY "${RLOCK_BINARY_DIR}/systemd/credentials")
file(INSTALL DESTINATION "${rlock_etc}/rlockd" TYPE DIRECTORY
     FILES "${RLOCK_BINARY_DIR}/systemd/credentials"
     DIR_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)

file(READ "${RLOCK_SOURCE_DIR}/systemd/rlockd.service" rlock_unit)
if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
    string(REPLACE "/usr/sbin/rlockd " "${CMAKE_INSTALL_PREFIX}/${RLOCK_SBINDIR}/rlockd "
           rlock_unit "${rlock_unit}")
    string(REPLACE " /etc/rlockd/" " ${rlock_etc}/rlockd/" rlock_unit "${rlock_unit}")
    string(REPLACE ":/etc/rlockd/" ":${rlock_etc}/rlockd/" rlock_unit "${rlock_unit}")
endif()
file(WRITE "${RLOCK_BINARY_DIR}/systemd/rlockd.service" "${rlock_unit}")
file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/systemd/system" TYPE FILE
     FILES "${RLOCK_BINARY_DIR}/systemd/rlockd.service")
