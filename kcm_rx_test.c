// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests of delivery (kcm_rx.c): the choice of the receiving socket.
 *
 * Included at the end of kcm_rx.c when CONFIG_AF_KCM_KUNIT_TEST is set,
 * so that it sees its static functions.
 */

#include <kunit/test.h>

/* Round robin over sockets with room; a full socket leaves the turn. */
static void kcm_kt_pick(struct kunit *test)
{
	struct kcm_mux *mux = kcm_mux_alloc(&init_net);
	struct kcm_sock *a, *b;

	KUNIT_ASSERT_NOT_NULL(test, mux);
	a = kunit_kzalloc(test, sizeof(*a), GFP_KERNEL);
	b = kunit_kzalloc(test, sizeof(*b), GFP_KERNEL);
	KUNIT_ASSERT_TRUE(test, a && b);
	a->mux = mux;
	b->mux = mux;
	a->sk.sk_rcvbuf = 1000;
	b->sk.sk_rcvbuf = 1000;

	spin_lock_bh(&mux->lock);
	list_add_tail(&a->rx_node, &mux->rx_ready);
	a->rx_ready = true;
	list_add_tail(&b->rx_node, &mux->rx_ready);
	b->rx_ready = true;
	KUNIT_EXPECT_PTR_EQ(test, __kcm_rx_pick(mux), a);
	KUNIT_EXPECT_PTR_EQ(test, __kcm_rx_pick(mux), b);
	KUNIT_EXPECT_PTR_EQ(test, __kcm_rx_pick(mux), a);
	atomic_set(&b->sk.sk_rmem_alloc, 1000);
	KUNIT_EXPECT_PTR_EQ(test, __kcm_rx_pick(mux), a);
	KUNIT_EXPECT_FALSE(test, b->rx_ready);
	atomic_set(&a->sk.sk_rmem_alloc, 999);
	KUNIT_EXPECT_PTR_EQ(test, __kcm_rx_pick(mux), a);
	atomic_set(&a->sk.sk_rmem_alloc, 1000);
	KUNIT_EXPECT_NULL(test, __kcm_rx_pick(mux));
	KUNIT_EXPECT_TRUE(test, list_empty(&mux->rx_ready));
	spin_unlock_bh(&mux->lock);
	kcm_mux_free(mux);
}

static struct kunit_case kcm_rx_test_cases[] = {
	KUNIT_CASE(kcm_kt_pick),
	{}
};

static struct kunit_suite kcm_rx_test_suite = {
	.name = "kcm_rx",
	.test_cases = kcm_rx_test_cases,
};

kunit_test_suite(kcm_rx_test_suite);
