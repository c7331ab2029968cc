# SPDX-License-Identifier: BSD-3-Clause
# scdoc's roff with the paragraph macros that start no paragraph left out: a
# .P right after a heading, before another .P or a heading, or at the end, and
# one before .RE moves past it. groff renders the page the same, and mandoc's
# lint has nothing to warn about.
#   awk -f tidy.awk PAGE.roff
/^\.(SH|SS)( |$)/ { pending = 0; print; heading = 1; next }
/^\.P$/ { if (!heading) pending = 1; next }
/^\.RE$/ { print; next }
{
    if (pending)
        print ".P"
    pending = 0
    heading = 0
    print
}
