/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_twheel.c — daemon/base/twheel.c against a plain model (an array of
 * nodes looked through whole): random arming, moving, removing and time
 * moving on by small steps and long jumps. A node is handed out exactly when
 * its time has come, never before; none is missed; twheel_next never names a
 * time after the earliest armed node (or after the present, when one is due); timers several turns away wait for
 * their turn; the count of armed nodes stays right.
 */
#include <stdint.h>
#include <stdlib.h>

#include "check_main.h"
#include "twheel.h"

#define N 3000

static struct twheel_node nodes[N];

static int64_t model_earliest(void)
{
    int64_t best = -1;
    for (int i = 0; i < N; i++)
        if (twheel_armed(&nodes[i]) && (best < 0 || nodes[i].at < best))
            best = nodes[i].at;
    return best;
}

static size_t model_armed(void)
{
    size_t n = 0;
    for (int i = 0; i < N; i++)
        n += twheel_armed(&nodes[i]) != 0;
    return n;
}

/*
 * Checked with ck_abort_msg only on a failure: Check reports every passing
 * ck_assert through a pipe, and these run millions of times.
 */
#define REQUIRE(cond, ...)                                                                          \
    do {                                                                                            \
        if (!(cond))                                                                                \
            ck_abort_msg(__VA_ARGS__);                                                              \
    } while (0)

/* Take every node due by now (each must be), then check none due is left armed. */
static size_t drain(struct twheel *w, int64_t now)
{
    size_t got = 0;
    struct twheel_node *node;
    while ((node = twheel_due(w, now)) != NULL) {
        REQUIRE(twheel_armed(node), "a due node not armed");
        REQUIRE(node->at <= now, "node at %lld handed out early at %lld", (long long)node->at,
                (long long)now);
        twheel_remove(w, node);
        REQUIRE(!twheel_armed(node), "a removed node still armed");
        got++;
    }
    for (int i = 0; i < N; i++)
        REQUIRE(!twheel_armed(&nodes[i]) || nodes[i].at > now, "node %d at %lld missed at %lld",
                i, (long long)nodes[i].at, (long long)now);
    return got;
}

static void check_next(struct twheel *w)
{
    int64_t earliest = model_earliest();
    int64_t next = twheel_next(w);
    /* One due already: the present will do (a timer aimed there fires at once). */
    int64_t latest_ok = earliest > w->now ? earliest : w->now;
    REQUIRE(earliest >= 0 || next == -1, "next %lld with nothing armed", (long long)next);
    REQUIRE(earliest < 0 || (next >= 0 && next <= latest_ok),
            "next %lld, earliest armed %lld, present %lld", (long long)next, (long long)earliest,
            (long long)w->now);
    REQUIRE(w->n == model_armed(), "count %zu, armed %zu", w->n, model_armed());
}

static void random_run(int64_t start, unsigned seed)
{
    struct twheel w;
    for (int i = 0; i < N; i++)
        nodes[i] = (struct twheel_node){0};
    ck_assert_int_eq(twheel_init(&w, start), 0);
    srandom(seed);
    int64_t now = start;
    size_t fired = 0;
    for (int round = 0; round < 4000; round++) {
        for (int k = 0; k < 8; k++) {
            int i = (int)(random() % N);
            long r = random() % 100;
            if (r < 10) {
                twheel_remove(&w, &nodes[i]);
            } else {
                /* Mostly near (a renewal, a loss), some in the past, some turns away. */
                int64_t off = r < 15   ? -(random() % 50)
                              : r < 85 ? random() % 40000
                                       : random() % (4 * TWHEEL_SLOTS);
                twheel_set(&w, &nodes[i], now + off);
            }
        }
        check_next(&w);
        long step = random() % 100;
        now += step < 90 ? random() % 20 : step < 99 ? random() % 70000 : 5 * TWHEEL_SLOTS;
        fired += drain(&w, now);
        check_next(&w);
    }
    ck_assert_uint_gt(fired, N);
    twheel_free(&w);
    for (int i = 0; i < N; i++)
        REQUIRE(!twheel_armed(&nodes[i]), "node %d armed after free", i);
}

START_TEST(test_random_against_model)
{
    random_run(1000, 1);
    random_run(INT64_C(86400000) * 365 * 30, 2); /* thirty years of uptime */
    random_run(TWHEEL_SLOTS - 3, 3);             /* starting at a turn's edge */
}
END_TEST

START_TEST(test_far_timer_waits_its_turn)
{
    struct twheel w;
    struct twheel_node far = {0}, near = {0};
    ck_assert_int_eq(twheel_init(&w, 0), 0);
    const int64_t far_at = 3 * TWHEEL_SLOTS + 7;
    twheel_set(&w, &far, far_at);
    twheel_set(&w, &near, 7); /* the same slot, a turn earlier... three turns */
    ck_assert_int_le(twheel_next(&w), 7);
    ck_assert_ptr_null(twheel_due(&w, 6));
    ck_assert_ptr_eq(twheel_due(&w, 7), &near);
    twheel_remove(&w, &near);
    /* Its slot comes round three times before its time: never handed out early. */
    for (int64_t t = 8; t < far_at; t += 997) {
        ck_assert_ptr_null(twheel_due(&w, t));
        ck_assert_int_le(twheel_next(&w), far_at);
        ck_assert_int_gt(twheel_next(&w), t);
    }
    ck_assert_ptr_null(twheel_due(&w, far_at - 1));
    ck_assert_ptr_eq(twheel_due(&w, far_at), &far);
    /* Moving a due node into the future takes it off the due list. */
    twheel_set(&w, &far, far_at + 10);
    ck_assert_ptr_null(twheel_due(&w, far_at));
    ck_assert_int_eq(twheel_next(&w), far_at + 10);
    twheel_free(&w);
    ck_assert(!twheel_armed(&far));
}
END_TEST

START_TEST(test_many_at_one_instant)
{
    struct twheel w;
    ck_assert_int_eq(twheel_init(&w, 100), 0);
    for (int i = 0; i < N; i++) {
        nodes[i] = (struct twheel_node){0};
        twheel_set(&w, &nodes[i], 500);
    }
    ck_assert_int_eq(twheel_next(&w), 500);
    ck_assert_ptr_null(twheel_due(&w, 499));
    /* Handed out one by one as their owner moves each: all N, then none. */
    size_t got = 0;
    struct twheel_node *node;
    while ((node = twheel_due(&w, 600)) != NULL) {
        twheel_set(&w, node, 10000 + (int64_t)got);
        got++;
    }
    ck_assert_uint_eq(got, N);
    ck_assert_int_eq(twheel_next(&w), 10000);
    ck_assert_uint_eq(w.n, N);
    /* A node armed in the past is due at once. */
    twheel_set(&w, &nodes[0], 5);
    ck_assert_ptr_eq(twheel_due(&w, 600), &nodes[0]);
    ck_assert_int_le(twheel_next(&w), 600);
    twheel_free(&w);
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"wheel", test_random_against_model, 0},
        {"wheel", test_far_timer_waits_its_turn, 0},
        {"wheel", test_many_at_one_instant, 0},
    };
    return unit_run("twheel", tests, sizeof tests / sizeof tests[0]);
}
