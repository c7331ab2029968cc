# SPDX-License-Identifier: BSD-3-Clause
# `cpack` (run in the build directory) builds one Debian package, rlockd, with
# everything `cmake --install` puts in place, installed under /usr (the
# configuration in /etc/rlockd, a conffile). Its Depends come from
# dpkg-shlibdeps, i.e. from the libraries the binaries actually link.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rlockd)
set(CPACK_PACKAGE_VENDOR "rlockd")
set(CPACK_PACKAGE_CONTACT "rlockd maintainers <maintainers@rlockd.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "distributed lock daemon on Redis, with its C client and CLI")
set(CPACK_PACKAGE_DESCRIPTION
    "rlockd serves locks kept in Redis to clients over TCP or a unix socket, renews them\n"
    "while their sessions live, and releases them the moment a session ends. Every grant\n"
    "carries a fencing token. This package has the daemon with its systemd unit, the\n"
    "client library librlock (shared and static, headers, pkg-config and CMake files)\n"
    "and the command-line client rlockctl.")
string(REPLACE ";" "" CPACK_PACKAGE_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# The install rules decide /etc for the /usr prefix at install time, so CPack installs
# with the real prefix (/usr) into its staging root through DESTDIR.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# librlock.so.0 in this package: let dpkg-shlibdeps see it, and tell others of it.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "redis-server (>= 5:6.2)")
# For building against librlock.a or through pkg-config: rlock.pc requires libprotobuf-c
# and libssl.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libprotobuf-c-dev, libssl-dev, pkg-config")
# The licence, as Debian wants it: /usr/share/doc/rlockd/copyright.
set(RLOCK_COPYRIGHT ${CMAKE_BINARY_DIR}/debian/copyright)
add_custom_command(OUTPUT ${RLOCK_COPYRIGHT}
                   COMMAND ${CMAKE_COMMAND} -DOUT=${RLOCK_COPYRIGHT}
                           -DLICENSE=${PROJECT_SOURCE_DIR}/LICENSE
                           -P ${PROJECT_SOURCE_DIR}/cmake/copyright.cmake
                   DEPENDS ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/cmake/copyright.cmake
                   VERBATIM)
add_custom_target(copyright ALL DEPENDS ${RLOCK_COPYRIGHT})
install(FILES ${RLOCK_COPYRIGHT} DESTINATION ${CMAKE_INSTALL_DOCDIR})
set(RLOCK_CONFFILES ${CMAKE_BINARY_DIR}/debian/conffiles)
file(WRITE ${RLOCK_CONFFILES} "/etc/rlockd/rlockd.conf\n")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${RLOCK_CONFFILES})
include(CPack)
