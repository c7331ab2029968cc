/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_jsonw.c — the status page's JSON writer (daemon/operator/jsonw.c):
 * commas between members at every depth, brackets closed in order, and
 * strings escaped so that the text is valid JSON and safe inside HTML.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "check_main.h"
#include "jsonw.h"

/* What w wrote so far, NUL-terminated (malloc'd). */
static char *text_of(struct evbuffer *b)
{
    size_t n = evbuffer_get_length(b);
    char *s = malloc(n + 1);
    ck_assert_ptr_nonnull(s);
    evbuffer_copyout(b, s, n);
    s[n] = '\0';
    return s;
}

START_TEST(test_nesting)
{
    struct evbuffer *b = evbuffer_new();
    struct jsonw w;
    jsonw_init(&w, b);
    jsonw_object(&w, NULL);
    jsonw_u64(&w, "a", 1);
    jsonw_u64(&w, "big", UINT64_MAX);
    jsonw_object(&w, "o");
    jsonw_end(&w);
    jsonw_array(&w, "list");
    for (int i = 0; i < 2; i++) {
        jsonw_object(&w, NULL);
        jsonw_bool(&w, "t", i == 0);
        jsonw_array(&w, "empty");
        jsonw_end(&w);
        jsonw_end(&w);
    }
    jsonw_u64(&w, NULL, 7);
    jsonw_end(&w);
    jsonw_str(&w, "z", NULL);
    jsonw_end(&w);
    char *s = text_of(b);
    ck_assert_str_eq(s, "{\"a\":1,\"big\":18446744073709551615,\"o\":{},\"list\":[{\"t\":true,"
                        "\"empty\":[]},{\"t\":false,\"empty\":[]},7],\"z\":\"\"}");
    free(s);
    evbuffer_free(b);
}
END_TEST

START_TEST(test_escapes)
{
    struct evbuffer *b = evbuffer_new();
    struct jsonw w;
    jsonw_init(&w, b);
    jsonw_array(&w, NULL);
    jsonw_str(&w, NULL, "quote \" backslash \\ slash /");
    jsonw_str(&w, NULL, "<script>&amp;</script>");
    jsonw_str(&w, NULL, "tab\tnl\ncr\r\x01\x1f\x7f");
    jsonw_str(&w, NULL, "caf\xc3\xa9 \xe2\x9c\x93"); /* UTF-8 goes through as it is */
    jsonw_end(&w);
    char *s = text_of(b);
    ck_assert_str_eq(s, "[\"quote \\\" backslash \\\\ slash /\","
                        "\"\\u003cscript\\u003e\\u0026amp;\\u003c/script\\u003e\","
                        "\"tab\\u0009nl\\u000acr\\u000d\\u0001\\u001f\\u007f\","
                        "\"caf\xc3\xa9 \xe2\x9c\x93\"]");
    free(s);
    evbuffer_free(b);
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"jsonw", test_nesting, 0},
        {"jsonw", test_escapes, 0},
    };
    return unit_run("jsonw", tests, sizeof tests / sizeof tests[0]);
}
