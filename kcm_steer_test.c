// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests of steering by key (kcm_steer.c): the map of slots
 * (rendezvous hashing: a socket that leaves moves only its slots, one
 * that joins takes only slots where it now weighs most), the built-in and
 * classic BPF key functions on a message at offset 0 with bytes after it
 * hidden, and the cutting of a pack by owner.
 *
 * Included at the end of kcm_steer.c when CONFIG_AF_KCM_KUNIT_TEST is
 * set, so that it sees its static functions.  The KCM sockets here are
 * bare structures on a real mux's list: the map and the parts need only
 * their index and steering state.
 */

#include <kunit/test.h>

#define KCM_KT_SOCKS	6

struct kcm_kt_steer {
	struct kcm_mux *mux;
	struct kcm_sock *socks[KCM_KT_SOCKS];
	struct kcm_sock *before[KCM_STEER_SLOTS];
};

static struct kcm_kt_steer *kcm_kt_steer_setup(struct kunit *test)
{
	struct kcm_kt_steer *kt = kunit_kzalloc(test, sizeof(*kt), GFP_KERNEL);
	struct kcm_sock *kcm;
	unsigned int i;

	KUNIT_ASSERT_NOT_NULL(test, kt);
	kt->mux = kcm_mux_alloc(&init_net);
	KUNIT_ASSERT_NOT_NULL(test, kt->mux);
	for (i = 0; i < KCM_KT_SOCKS; i++) {
		kcm = kunit_kzalloc(test, sizeof(*kcm), GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, kcm);
		kcm->mux = kt->mux;
		kcm->index = i;
		kcm_steer_sock_init(kcm);
		list_add_tail(&kcm->mux_node, &kt->mux->socks);
		kt->socks[i] = kcm;
	}
	kt->mux->steer.map = kvcalloc(KCM_STEER_SLOTS,
				      sizeof(*kt->mux->steer.map), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, kt->mux->steer.map);
	kt->mux->steer.salt = 0x5eed;
	return kt;
}

static void kcm_kt_steer_teardown(struct kcm_kt_steer *kt)
{
	unsigned int i;

	for (i = 0; i < KCM_KT_SOCKS; i++)
		list_del(&kt->socks[i]->mux_node);
	kcm_steer_mux_free(kt->mux);
	kcm_mux_free(kt->mux);
}

/* Every slot is owned by the member that weighs most for it. */
static void kcm_kt_steer_check_best(struct kunit *test, struct kcm_mux *mux)
{
	unsigned int s, slots = 0, wrong = 0;
	struct kcm_sock *kcm;

	spin_lock_bh(&mux->lock);
	for (s = 0; s < KCM_STEER_SLOTS; s++)
		wrong += mux->steer.map[s] != __kcm_steer_best(mux, s);
	spin_unlock_bh(&mux->lock);
	KUNIT_EXPECT_EQ(test, wrong, 0U);
	list_for_each_entry(kcm, &mux->socks, mux_node)
		slots += kcm->steer.slots;
	KUNIT_EXPECT_EQ(test, slots, mux->steer.members ? KCM_STEER_SLOTS : 0);
}

/*
 * Socket @i joins (@join) or leaves; the mux lock is held only for that:
 * a failed expectation allocates.  Returns what __kcm_steer_join() does.
 */
static bool kcm_kt_member(struct kcm_kt_steer *kt, unsigned int i, bool join)
{
	bool moved = false;

	spin_lock_bh(&kt->mux->lock);
	if (join)
		moved = __kcm_steer_join(kt->socks[i]);
	else
		__kcm_steer_leave(kt->socks[i]);
	spin_unlock_bh(&kt->mux->lock);
	return moved;
}

/* Rendezvous hashing: what moves when a socket leaves or joins. */
static void kcm_kt_steer_rendezvous(struct kunit *test)
{
	struct kcm_kt_steer *kt = kcm_kt_steer_setup(test);
	struct kcm_sock **map = kt->mux->steer.map, *gone, *extra;
	unsigned int i, s, had;
	u64 remaps;

	for (i = 0; i < 4; i++)
		kcm_kt_member(kt, i, true);
	kcm_kt_steer_check_best(test, kt->mux);
	/* Four sockets share 1024 slots: 256 each, give or take. */
	for (i = 0; i < 4; i++) {
		KUNIT_EXPECT_GT(test, kt->socks[i]->steer.slots, 192U);
		KUNIT_EXPECT_LT(test, kt->socks[i]->steer.slots, 320U);
	}
	memcpy(kt->before, map, sizeof(kt->before));

	/* One leaves: its slots, and only those, go to the others. */
	gone = kt->socks[1];
	had = gone->steer.slots;
	remaps = kt->mux->mstats.steer_remaps;
	kcm_kt_member(kt, 1, false);
	KUNIT_EXPECT_EQ(test, kt->mux->mstats.steer_remaps, remaps + had);
	KUNIT_EXPECT_EQ(test, gone->steer.slots, 0U);
	for (s = 0; s < KCM_STEER_SLOTS; s++) {
		if (kt->before[s] != gone)
			KUNIT_EXPECT_PTR_EQ(test, map[s], kt->before[s]);
		else
			KUNIT_EXPECT_TRUE(test, map[s] && map[s] != gone);
	}
	kcm_kt_steer_check_best(test, kt->mux);

	/* Back again, it takes exactly its old slots. */
	KUNIT_EXPECT_TRUE(test, kcm_kt_member(kt, 1, true));
	for (s = 0; s < KCM_STEER_SLOTS; s++)
		KUNIT_EXPECT_PTR_EQ(test, map[s], kt->before[s]);
	KUNIT_EXPECT_EQ(test, kt->mux->mstats.steer_remaps, remaps + 2 * had);
	/* Joining twice changes nothing. */
	KUNIT_EXPECT_FALSE(test, kcm_kt_member(kt, 1, true));

	/* A fifth takes slots from the others, nothing moves among them. */
	extra = kt->socks[4];
	KUNIT_EXPECT_TRUE(test, kcm_kt_member(kt, 4, true));
	KUNIT_EXPECT_GT(test, extra->steer.slots, 150U);
	for (s = 0; s < KCM_STEER_SLOTS; s++)
		KUNIT_EXPECT_TRUE(test, map[s] == kt->before[s] ||
				  map[s] == extra);
	kcm_kt_steer_check_best(test, kt->mux);

	/* When the last one leaves nobody owns anything. */
	for (i = 0; i < KCM_KT_SOCKS; i++)
		kcm_kt_member(kt, i, false);
	for (s = 0; s < KCM_STEER_SLOTS; s++)
		KUNIT_EXPECT_NULL(test, map[s]);
	KUNIT_EXPECT_EQ(test, kt->mux->steer.members, 0U);
	kcm_kt_steer_teardown(kt);
}

/* A key always has the same owner; keys spread over the owners. */
static void kcm_kt_steer_owner(struct kunit *test)
{
	struct kcm_kt_steer *kt = kcm_kt_steer_setup(test);
	unsigned int i, count[4] = {};
	struct kcm_sock *kcm, *again;

	spin_lock_bh(&kt->mux->lock);
	kcm = __kcm_steer_owner(kt->mux, 7);
	spin_unlock_bh(&kt->mux->lock);
	KUNIT_EXPECT_NULL(test, kcm);
	for (i = 0; i < 4; i++)
		kcm_kt_member(kt, i, true);
	spin_lock_bh(&kt->mux->lock);
	kcm = __kcm_steer_owner(kt->mux, KCM_NO_KEY);
	spin_unlock_bh(&kt->mux->lock);
	KUNIT_EXPECT_NULL(test, kcm);
	for (i = 0; i < 4000; i++) {
		spin_lock_bh(&kt->mux->lock);
		kcm = __kcm_steer_owner(kt->mux, i);
		again = __kcm_steer_owner(kt->mux, i);
		spin_unlock_bh(&kt->mux->lock);
		KUNIT_ASSERT_NOT_NULL(test, kcm);
		KUNIT_EXPECT_PTR_EQ(test, kcm, again);
		count[kcm->index]++;
	}
	for (i = 0; i < 4; i++)
		KUNIT_EXPECT_GT(test, count[i], 700U);
	kcm_kt_steer_teardown(kt);
}

/* Runs the key function @fn on the first @len of the @n bytes of @data. */
static u32 kcm_kt_key(struct kunit *test, struct kcm_psock *psock,
		      struct kcm_steer_fn *fn, const u8 *data, unsigned int n,
		      unsigned int len)
{
	struct sk_buff *skb = alloc_skb(n, GFP_KERNEL);
	u32 key;

	KUNIT_ASSERT_NOT_NULL(test, skb);
	skb_put_data(skb, data, n);
	rcu_assign_pointer(psock->mux->steer.fn, fn);
	key = kcm_steer_key(psock, skb, len);
	RCU_INIT_POINTER(psock->mux->steer.fn, NULL);
	/* What follows the message is hidden only while the function runs. */
	KUNIT_EXPECT_EQ(test, skb->len, n);
	kfree_skb(skb);
	return key;
}

/* The built-in key field, every width and byte order, and the connection. */
static void kcm_kt_steer_field(struct kunit *test)
{
	static const u8 msg[16] = { 0, 0, 0, 12, 0x11, 0x22, 0x33, 0x44,
				    0x55, 0x66, 0x77, 0x88, 9, 9, 9, 9 };
	struct kcm_psock *psock = kunit_kzalloc(test, sizeof(*psock),
						GFP_KERNEL);
	struct kcm_mux *mux = kcm_mux_alloc(&init_net);
	struct kcm_steer_fn fn = {};

	KUNIT_ASSERT_TRUE(test, mux && psock);
	psock->mux = mux;
	psock->index = 42;
	KUNIT_EXPECT_EQ(test, kcm_steer_key(psock, NULL, 0), KCM_NO_KEY);

	KUNIT_ASSERT_EQ(test, kcm_field_set(&fn.f, KCM_KEY_FIELD, 4, 1,
					    KCM_LENFIELD_BE), 0);
	KUNIT_EXPECT_EQ(test, kcm_kt_key(test, psock, &fn, msg, 16, 16),
			0x11U);
	KUNIT_ASSERT_EQ(test, kcm_field_set(&fn.f, KCM_KEY_FIELD, 4, 2,
					    KCM_LENFIELD_LE), 0);
	KUNIT_EXPECT_EQ(test, kcm_kt_key(test, psock, &fn, msg, 16, 16),
			0x2211U);
	KUNIT_ASSERT_EQ(test, kcm_field_set(&fn.f, KCM_KEY_FIELD, 4, 4,
					    KCM_LENFIELD_BE), 0);
	KUNIT_EXPECT_EQ(test, kcm_kt_key(test, psock, &fn, msg, 16, 16),
			0x11223344U);
	/* Eight bytes fold into 32 bits. */
	KUNIT_ASSERT_EQ(test, kcm_field_set(&fn.f, KCM_KEY_FIELD, 4, 8,
					    KCM_LENFIELD_BE), 0);
	KUNIT_EXPECT_EQ(test, kcm_kt_key(test, psock, &fn, msg, 16, 16),
			0x11223344U ^ 0x55667788U);
	/* The field ends past the message: the bytes after it do not count. */
	KUNIT_EXPECT_EQ(test, kcm_kt_key(test, psock, &fn, msg, 16, 11),
			KCM_NO_KEY);
	KUNIT_EXPECT_EQ(test, kcm_kt_key(test, psock, &fn, msg, 12, 12),
			0x11223344U ^ 0x55667788U);

	/* Bad places are refused. */
	KUNIT_EXPECT_EQ(test, kcm_field_set(&fn.f, KCM_KEY_FIELD, 4, 3,
					    KCM_LENFIELD_BE), -EINVAL);
	KUNIT_EXPECT_EQ(test, kcm_field_set(&fn.f, KCM_KEY_FIELD, 65536, 4,
					    KCM_LENFIELD_BE), -EINVAL);
	KUNIT_EXPECT_EQ(test, kcm_field_set(&fn.f, KCM_KEY_FIELD, 0, 4, 2),
			-EINVAL);

	fn.f.kind = KCM_KEY_CONN;
	KUNIT_EXPECT_EQ(test, kcm_kt_key(test, psock, &fn, msg, 16, 16), 42U);
	kcm_mux_free(mux);
}

/* A classic BPF key function sees the message only, and may fault. */
static void kcm_kt_steer_cbpf(struct kunit *test)
{
	/* A = word at 4; return A */
	static struct sock_filter word4[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 4),
		BPF_STMT(BPF_RET | BPF_A, 0),
	};
	/* return skb->len */
	static struct sock_filter len[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0),
		BPF_STMT(BPF_RET | BPF_A, 0),
	};
	static const u8 msg[16] = { 0, 0, 0, 4, 0xa, 0xb, 0xc, 0xd, 1, 2, 3 };
	struct sock_fprog_kern f1 = { .len = 2, .filter = word4 };
	struct sock_fprog_kern f2 = { .len = 2, .filter = len };
	struct kcm_psock *psock = kunit_kzalloc(test, sizeof(*psock),
						GFP_KERNEL);
	struct kcm_mux *mux = kcm_mux_alloc(&init_net);
	struct kcm_steer_fn fn = { .f.kind = KCM_BPF_TYPE_PROG };

	KUNIT_ASSERT_TRUE(test, mux && psock);
	psock->mux = mux;
	KUNIT_ASSERT_EQ(test, bpf_prog_create(&fn.prog, &f1), 0);
	KUNIT_EXPECT_EQ(test, kcm_kt_key(test, psock, &fn, msg, 16, 8),
			0x0a0b0c0dU);
	/* A load past the message ends the program: key 0. */
	KUNIT_EXPECT_EQ(test, kcm_kt_key(test, psock, &fn, msg, 16, 6), 0U);
	bpf_prog_destroy(fn.prog);

	KUNIT_ASSERT_EQ(test, bpf_prog_create(&fn.prog, &f2), 0);
	KUNIT_EXPECT_EQ(test, kcm_kt_key(test, psock, &fn, msg, 16, 9), 9U);
	bpf_prog_destroy(fn.prog);
	kcm_mux_free(mux);
}

/*
 * A pack of @n messages of @len bytes, message i filled with i + 1, with
 * keys @keys in an array.
 */
static struct sk_buff *kcm_kt_keyed_pack(struct kunit *test, const u32 *keys,
					 unsigned int n, unsigned int len)
{
	unsigned int i, koff = ALIGN(n * sizeof(u16), sizeof(u32));
	struct kcm_rx_msg *rxm;
	struct sk_buff *skb;

	skb = alloc_skb(koff + n * sizeof(u32) + n * len, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, skb);
	skb_reserve(skb, koff + n * sizeof(u32));
	for (i = 0; i < n; i++) {
		kcm_pack_lens(skb)[i] = len;
		((u32 *)(skb->head + koff))[i] = keys[i];
		memset(skb_put(skb, len), i + 1, len);
	}
	rxm = kcm_rx_msg(skb);
	memset(rxm, 0, sizeof(*rxm));
	rxm->nmsgs = n;
	rxm->pack = true;
	rxm->keys_off = koff;
	rxm->conn_id = 3;
	return skb;
}

/*
 * Checks the messages of the parts of @part: those of the pack built by
 * kcm_kt_keyed_pack() from @keys whose owner (@own) is @kcm (NULL: none),
 * in their order, whole, with their keys (none in the rest).
 */
static void kcm_kt_steer_check_part(struct kunit *test,
				    struct kcm_steer_part *part,
				    struct kcm_sock *kcm, const u32 *keys,
				    struct kcm_sock *const *own,
				    unsigned int n, unsigned int len)
{
	struct sk_buff *skb = skb_peek(&part->skbs);
	unsigned int i, j = 0, pos = 0;
	u8 buf[64];

	for (i = 0; i < n; i++) {
		if (own[i] != kcm)
			continue;
		if (skb && j == kcm_rx_msg(skb)->nmsgs) {
			skb = skb_peek_next(skb, &part->skbs);
			j = 0;
			pos = 0;
		}
		KUNIT_ASSERT_NOT_NULL(test, skb);
		KUNIT_EXPECT_EQ(test, kcm_rx_len_at(skb, j, pos), len);
		KUNIT_EXPECT_EQ(test, kcm_rx_msg(skb)->conn_id, 3U);
		KUNIT_EXPECT_EQ(test, kcm_rx_key_at(skb, j),
				kcm ? keys[i] : KCM_NO_KEY);
		KUNIT_ASSERT_EQ(test, skb_copy_bits(skb, pos, buf, len), 0);
		KUNIT_EXPECT_EQ(test, buf[0], i + 1);
		KUNIT_EXPECT_EQ(test, buf[len - 1], i + 1);
		pos += len;
		j++;
	}
	KUNIT_EXPECT_TRUE(test, !skb || (j == kcm_rx_msg(skb)->nmsgs &&
					 skb_queue_is_last(&part->skbs, skb)));
}

/* Sorts @skb under the mux lock, the owners of @keys to @own first. */
static int kcm_kt_sort(struct kcm_kt_steer *kt, struct sk_buff *skb,
		       const u32 *keys, struct kcm_sock **own, unsigned int n,
		       struct list_head *list, struct kcm_steer_part *rest)
{
	unsigned int i;
	int err;

	spin_lock_bh(&kt->mux->lock);
	for (i = 0; i < n; i++)
		own[i] = __kcm_steer_owner(kt->mux, keys[i]);
	err = __kcm_steer_sort(kt->mux, skb, list, rest);
	spin_unlock_bh(&kt->mux->lock);
	return err;
}

/* A pack is cut into one pack per owner, and the rest, in order. */
static void kcm_kt_steer_sort(struct kunit *test)
{
	enum { N = 40, LEN = 60 };
	struct kcm_kt_steer *kt = kcm_kt_steer_setup(test);
	struct kcm_sock *kcm, *own[N];
	struct kcm_steer_part rest;
	unsigned int i, owners = 0;
	struct sk_buff *skb;
	u32 keys[N];
	LIST_HEAD(list);

	for (i = 0; i < N; i++)
		keys[i] = i % 9 == 4 ? KCM_NO_KEY : i * 7;
	kcm_steer_part_init(&rest);
	for (i = 0; i < 3; i++)
		kcm_kt_member(kt, i, true);

	skb = kcm_kt_keyed_pack(test, keys, N, LEN);
	KUNIT_ASSERT_EQ(test, kcm_kt_sort(kt, skb, keys, own, N, &list, &rest),
			0);
	list_for_each_entry(kcm, &list, steer.part.node) {
		kcm_kt_steer_check_part(test, &kcm->steer.part, kcm, keys, own,
					N, LEN);
		owners++;
	}
	KUNIT_EXPECT_EQ(test, owners, 3U);
	kcm_kt_steer_check_part(test, &rest, NULL, keys, own, N, LEN);
	__kcm_steer_parts_drop(&list, &rest);

	/* One owner for all: the pack itself goes to it, uncut. */
	for (i = 0; i < N; i++)
		keys[i] = 5;
	skb = kcm_kt_keyed_pack(test, keys, N, LEN);
	KUNIT_ASSERT_EQ(test, kcm_kt_sort(kt, skb, keys, own, N, &list, &rest),
			0);
	KUNIT_ASSERT_TRUE(test, list_is_singular(&list));
	kcm = list_first_entry(&list, struct kcm_sock, steer.part.node);
	KUNIT_EXPECT_PTR_EQ(test, kcm, own[0]);
	KUNIT_EXPECT_PTR_EQ(test, skb_peek(&kcm->steer.part.skbs), skb);
	KUNIT_EXPECT_TRUE(test, skb_queue_empty(&rest.skbs));
	__kcm_steer_parts_drop(&list, &rest);

	/* Nobody owns anything: all of it is the rest, without keys. */
	for (i = 0; i < KCM_KT_SOCKS; i++)
		kcm_kt_member(kt, i, false);
	skb = kcm_kt_keyed_pack(test, keys, N, LEN);
	KUNIT_ASSERT_EQ(test, kcm_kt_sort(kt, skb, keys, own, N, &list, &rest),
			0);
	KUNIT_EXPECT_TRUE(test, list_empty(&list));
	KUNIT_EXPECT_PTR_EQ(test, skb_peek(&rest.skbs), skb);
	KUNIT_EXPECT_FALSE(test, kcm_rx_keyed(skb));
	__kcm_steer_parts_drop(&list, &rest);
	kcm_kt_steer_teardown(kt);
}

static struct kunit_case kcm_steer_test_cases[] = {
	KUNIT_CASE(kcm_kt_steer_rendezvous),
	KUNIT_CASE(kcm_kt_steer_owner),
	KUNIT_CASE(kcm_kt_steer_field),
	KUNIT_CASE(kcm_kt_steer_cbpf),
	KUNIT_CASE(kcm_kt_steer_sort),
	{}
};

static struct kunit_suite kcm_steer_test_suite = {
	.name = "kcm_steer",
	.test_cases = kcm_steer_test_cases,
};

kunit_test_suite(kcm_steer_test_suite);
