# SPDX-License-Identifier: BSD-3-Clause
# Writes the Debian copyright file (machine-readable format 1.0) of the package
# from LICENSE: OUT=path LICENSE=path, run with cmake -P.
file(READ ${LICENSE} text)
# Every line of the licence text indented by one space, an empty line as " .".
string(REGEX REPLACE "\n\n" "\n.\n" text "${text}")
string(REGEX REPLACE "\n\n" "\n.\n" text "${text}")
string(REGEX REPLACE "\n$" "" text "${text}")
string(REPLACE "\n" "\n " text "${text}")
file(WRITE ${OUT} "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: rlockd

Files: *
Copyright: 2026 the rlockd authors
License: BSD-3-Clause
 ${text}
")
