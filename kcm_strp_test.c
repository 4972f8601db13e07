// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit tests of the framing of a psock's stream (kcm_strp.c), fed with
 * hand-made TCP skbs: every split of a stream, offsets, zero-length
 * reads, lengths at and beyond the limits, parser errors, timeouts, the
 * memory charged per message, packs and the reuse of framing buffers.
 *
 * Included at the end of kcm_strp.c when CONFIG_AF_KCM_KUNIT_TEST is set,
 * so that it sees the engine's static functions.  The psock under test
 * has a real (unconnected) kernel TCP socket and a classic BPF parser;
 * with no KCM socket on its mux, framed messages wait on mux->rx_hold,
 * where the tests pick them up.
 */

#include <kunit/test.h>
#include <linux/delay.h>
#include <linux/filter.h>

struct kcm_kt {
	struct kcm_mux *mux;
	struct kcm_psock *psock;
	struct socket *tcp;
	struct bpf_prog *prog;
	struct sk_buff *cur;
};

/* The documented parser: return load_word(skb, 0) + 4; */
static struct sock_filter kcm_kt_len4[] = {
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0),
	BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, 4),
	BPF_STMT(BPF_RET | BPF_A, 0),
};

/* return skb->len < 8 ? 0 : 2; (a length it should have given earlier) */
static struct sock_filter kcm_kt_late[] = {
	BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0),
	BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 8, 1, 0),
	BPF_STMT(BPF_RET | BPF_K, 0),
	BPF_STMT(BPF_RET | BPF_K, 2),
};

static struct kcm_kt *kcm_kt_setup(struct kunit *test,
				   struct sock_filter *insns,
				   unsigned int n)
{
	struct sock_fprog_kern fprog = { .len = n, .filter = insns };
	struct kcm_kt *kt = kunit_kzalloc(test, sizeof(*kt), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, kt);
	KUNIT_ASSERT_EQ(test, bpf_prog_create(&kt->prog, &fprog), 0);
	KUNIT_ASSERT_EQ(test, sock_create_kern(&init_net, PF_INET, SOCK_STREAM,
					       IPPROTO_TCP, &kt->tcp), 0);
	kt->mux = kcm_mux_alloc(&init_net);
	KUNIT_ASSERT_NOT_NULL(test, kt->mux);
	kt->psock = kzalloc(sizeof(*kt->psock), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, kt->psock);
	kcm_strp_init(kt->psock);
	kt->psock->mux = kt->mux;
	kt->psock->sk = kt->tcp->sk;
	kt->psock->prog = kt->prog;
	kt->psock->strp.gfp = GFP_KERNEL;
	/* What kcm_strp_read() does before its first bytes. */
	KUNIT_ASSERT_EQ(test, kcm_strp_buf_get(kt->psock), 0);
	return kt;
}

static void kcm_kt_teardown(struct kcm_kt *kt)
{
	struct sock *csk = kt->tcp->sk;

	kfree_skb(kt->cur);
	cancel_delayed_work_sync(&kt->psock->strp.work);
	cancel_delayed_work_sync(&kt->psock->strp.timer_work);
	cancel_delayed_work_sync(&kt->psock->strp.trim_work);
	lock_sock(csk);
	kcm_strp_flush(kt->psock);
	release_sock(csk);
	spin_lock_bh(&kt->mux->lock);
	__kcm_mux_psock_gone(kt->mux, kt->psock);
	__skb_queue_purge(&kt->mux->rx_hold);
	spin_unlock_bh(&kt->mux->lock);
	kfree(kt->psock);
	kcm_mux_free(kt->mux);
	sock_release(kt->tcp);
	bpf_prog_destroy(kt->prog);
}

/*
 * What tcp_read_sock() and its caller do with one TCP skb: the actor on
 * @len bytes from @off, delivery of the batch, the verdict.  Frees @skb.
 */
static int kcm_kt_read(struct kcm_kt *kt, struct sk_buff *skb,
		       unsigned int off, size_t len)
{
	read_descriptor_t desc = { .arg.data = kt->psock, .count = 1 };
	int used;

	/* As tcp_read_sock() callers do; rx_trim_work may run meanwhile. */
	lock_sock(kt->tcp->sk);
	used = kcm_strp_actor(&desc, skb, off, len);
	kcm_strp_read_end(kt->psock, desc.error);
	release_sock(kt->tcp->sk);
	kfree_skb(skb);
	return desc.error ? desc.error : used;
}

/* Hands @len bytes to the engine as a TCP skb holding them at @off. */
static int kcm_kt_feed(struct kcm_kt *kt, const u8 *data, size_t len,
		       unsigned int off)
{
	struct sk_buff *skb = alloc_skb(off + len, GFP_KERNEL);

	if (!skb)
		return -ENOMEM;
	memset(skb_put(skb, off), 0xee, off);
	skb_put_data(skb, data, len);
	return kcm_kt_read(kt, skb, off, len);
}

/* The next framed message, or NULL. */
static struct sk_buff *kcm_kt_take(struct kcm_kt *kt)
{
	struct sk_buff *skb;

	spin_lock_bh(&kt->mux->lock);
	skb = __skb_dequeue(&kt->mux->rx_hold);
	if (skb)
		__kcm_rx_unhold(kt->mux, skb);
	spin_unlock_bh(&kt->mux->lock);
	return skb;
}

/*
 * The skb holding the next framed message as its current one (length
 * kcm_rx_cur_len(), from kcm_rx_msg()->pos on), or NULL.  The previous
 * message is moved past, its skb freed after its last one.
 */
static struct sk_buff *kcm_kt_next(struct kcm_kt *kt)
{
	struct sk_buff *skb = kt->cur;

	if (skb) {
		if (kcm_rx_left(skb) > 1) {
			kcm_rx_msg(skb)->pos += kcm_rx_cur_len(skb);
			kcm_rx_msg(skb)->next++;
			return skb;
		}
		kfree_skb(skb);
	}
	kt->cur = kcm_kt_take(kt);
	return kt->cur;
}

/* Builds a message with a 4-byte length header and @plen payload bytes. */
static size_t kcm_kt_msg(u8 *buf, u32 plen, u8 fill)
{
	put_unaligned_be32(plen, buf);
	memset(buf + 4, fill, plen);
	return plen + 4;
}

/* Checks that exactly the messages of @stream (lengths @lens) came out. */
static void kcm_kt_expect(struct kunit *test, struct kcm_kt *kt,
			  const u8 *stream, const size_t *lens, int n)
{
	struct sk_buff *skb;
	unsigned int len;
	size_t off = 0;
	u8 *copy;
	int i;

	for (i = 0; i < n; i++) {
		skb = kcm_kt_next(kt);
		KUNIT_ASSERT_NOT_NULL(test, skb);
		len = kcm_rx_cur_len(skb);
		KUNIT_ASSERT_EQ(test, len, lens[i]);
		copy = kmalloc(len, GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, copy);
		KUNIT_EXPECT_EQ(test, skb_copy_bits(skb, kcm_rx_msg(skb)->pos,
						    copy, len), 0);
		KUNIT_EXPECT_EQ(test, memcmp(copy, stream + off, lens[i]), 0);
		kfree(copy);
		off += lens[i];
	}
	KUNIT_EXPECT_NULL(test, kcm_kt_next(kt));
}

/*
 * Feeds the @n bytes of @stream in two skbs cut at every point (every
 * byte up to 100, then every 37th), the first part at an in-skb offset;
 * the @nmsg messages of lengths @lens come out whole every time.
 */
static void kcm_kt_every_cut(struct kunit *test, struct kcm_kt *kt,
			     const u8 *stream, size_t n, const size_t *lens,
			     int nmsg)
{
	size_t cut;

	for (cut = 0; cut <= n; cut += cut < 100 ? 1 : 37) {
		KUNIT_ASSERT_EQ(test, kcm_kt_feed(kt, stream, cut, cut % 7),
				(int)cut);
		KUNIT_ASSERT_EQ(test, kcm_kt_feed(kt, stream + cut, n - cut, 0),
				(int)(n - cut));
		kcm_kt_expect(test, kt, stream, lens, nmsg);
	}
}

/* Three messages (empty, small, past the small-message cut) split at
 * every byte: they come out whole every time.
 */
static void kcm_kt_every_split(struct kunit *test)
{
	static u8 stream[4 + 4 + 60 + 4 + 3000];
	size_t lens[3], n = 0;
	struct kcm_kt *kt;

	lens[0] = kcm_kt_msg(stream, 0, 1);
	n += lens[0];
	lens[1] = kcm_kt_msg(stream + n, 60, 2);
	n += lens[1];
	lens[2] = kcm_kt_msg(stream + n, 3000, 3);
	n += lens[2];

	kt = kcm_kt_setup(test, kcm_kt_len4, ARRAY_SIZE(kcm_kt_len4));
	kcm_kt_every_cut(test, kt, stream, n, lens, 3);
	KUNIT_EXPECT_FALSE(test, kt->psock->rx_stopped);
	kcm_kt_teardown(kt);
}

/* One byte at a time, then the whole stream in one skb, twice over. */
static void kcm_kt_bytewise_and_coalesced(struct kunit *test)
{
	static u8 stream[2 * (4 + 100)];
	size_t lens[4], n = 0, i;
	struct kcm_kt *kt;

	lens[0] = kcm_kt_msg(stream, 100, 5);
	n += lens[0];
	lens[1] = kcm_kt_msg(stream + n, 100, 6);
	n += lens[1];
	lens[2] = lens[0];
	lens[3] = lens[1];

	kt = kcm_kt_setup(test, kcm_kt_len4, ARRAY_SIZE(kcm_kt_len4));
	for (i = 0; i < n; i++)
		KUNIT_ASSERT_EQ(test, kcm_kt_feed(kt, stream + i, 1, 3), 1);
	kcm_kt_expect(test, kt, stream, lens, 2);
	KUNIT_ASSERT_EQ(test, kcm_kt_feed(kt, stream, n, 0), (int)n);
	kcm_kt_expect(test, kt, stream, lens + 2, 2);
	/*
	 * Byte by byte, the parser asked for more at 1, 2 and 3 bytes of
	 * each header, and never again once it had a length.
	 */
	KUNIT_EXPECT_EQ(test, kt->psock->stats.rx_need_more, 6);
	kcm_kt_teardown(kt);
}

/* A psock has no framing buffer until its first bytes are read. */
static void kcm_kt_buffer_on_first_bytes(struct kunit *test)
{
	struct kcm_psock *psock = kunit_kzalloc(test, sizeof(*psock),
						GFP_KERNEL);
	struct sk_buff *buf;

	KUNIT_ASSERT_NOT_NULL(test, psock);
	kcm_strp_init(psock);
	KUNIT_EXPECT_PTR_EQ(test, psock->strp.buf, NULL);
	psock->strp.gfp = GFP_KERNEL;
	KUNIT_ASSERT_EQ(test, kcm_strp_buf_get(psock), 0);
	buf = psock->strp.buf;
	KUNIT_ASSERT_NOT_NULL(test, buf);
	KUNIT_EXPECT_EQ(test, buf->len, 0);
	KUNIT_EXPECT_GE(test, skb_tailroom(buf), (int)KCM_STRP_BUF);
	/* Later reads keep it. */
	KUNIT_EXPECT_EQ(test, kcm_strp_buf_get(psock), 0);
	KUNIT_EXPECT_PTR_EQ(test, psock->strp.buf, buf);
	kfree_skb(buf);
}

static void kcm_kt_zero_length_read(struct kunit *test)
{
	struct kcm_kt *kt = kcm_kt_setup(test, kcm_kt_len4,
					 ARRAY_SIZE(kcm_kt_len4));
	u8 msg[8];
	size_t len = kcm_kt_msg(msg, 4, 9);

	KUNIT_EXPECT_EQ(test, kcm_kt_feed(kt, msg, 0, 0), 0);
	KUNIT_EXPECT_EQ(test, kt->psock->strp.buf->len, 0);
	KUNIT_EXPECT_EQ(test, kcm_kt_feed(kt, msg, len, 0), (int)len);
	kcm_kt_expect(test, kt, msg, &len, 1);
	kcm_kt_teardown(kt);
}

/* A length equal to SO_RCVBUF is fine; one byte more is EMSGSIZE. */
static void kcm_kt_length_limits(struct kunit *test)
{
	struct kcm_kt *kt = kcm_kt_setup(test, kcm_kt_len4,
					 ARRAY_SIZE(kcm_kt_len4));
	int rcvbuf = READ_ONCE(kt->tcp->sk->sk_rcvbuf);
	u8 hdr[4];

	put_unaligned_be32(rcvbuf - 4, hdr);
	KUNIT_EXPECT_EQ(test, kcm_kt_feed(kt, hdr, 4, 0), 4);
	KUNIT_EXPECT_FALSE(test, kt->psock->rx_stopped);
	KUNIT_EXPECT_NOT_NULL(test, kt->psock->strp.msg);
	kcm_kt_teardown(kt);

	kt = kcm_kt_setup(test, kcm_kt_len4, ARRAY_SIZE(kcm_kt_len4));
	rcvbuf = READ_ONCE(kt->tcp->sk->sk_rcvbuf);
	put_unaligned_be32(rcvbuf - 3, hdr);
	KUNIT_EXPECT_EQ(test, kcm_kt_feed(kt, hdr, 4, 0), -EMSGSIZE);
	KUNIT_EXPECT_TRUE(test, kt->psock->rx_stopped);
	KUNIT_EXPECT_EQ(test, READ_ONCE(kt->tcp->sk->sk_err), EMSGSIZE);
	KUNIT_EXPECT_EQ(test, kt->psock->stats.rx_too_big, 1);
	kcm_kt_teardown(kt);
}

static void kcm_kt_late_length(struct kunit *test)
{
	struct kcm_kt *kt = kcm_kt_setup(test, kcm_kt_late,
					 ARRAY_SIZE(kcm_kt_late));

	KUNIT_EXPECT_EQ(test, kcm_kt_feed(kt, (const u8 *)"abcd", 4, 0), 4);
	KUNIT_EXPECT_FALSE(test, kt->psock->rx_stopped);
	KUNIT_EXPECT_EQ(test, kcm_kt_feed(kt, (const u8 *)"efgh", 4, 0),
			-EPROTO);
	KUNIT_EXPECT_TRUE(test, kt->psock->rx_stopped);
	KUNIT_EXPECT_EQ(test, kt->psock->stats.rx_bad_len, 1);
	kcm_kt_teardown(kt);
}

/* Parser errors: user-space errnos pass, anything else is EPROTO. */
static void kcm_kt_parser_errors(struct kunit *test)
{
	static const struct {
		u32 ret;
		int err;
	} cases[] = {
		{ (u32)-EACCES, -EACCES }, { (u32)-EHWPOISON, -EHWPOISON },
		{ (u32)-(EHWPOISON + 1), -EPROTO }, { (u32)-512, -EPROTO },
		{ 0x80000000u, -EPROTO },
	};
	struct sock_filter prog[] = { BPF_STMT(BPF_RET | BPF_K, 0) };
	struct kcm_kt *kt;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		prog[0].k = cases[i].ret;
		kt = kcm_kt_setup(test, prog, 1);
		KUNIT_EXPECT_EQ(test, kcm_kt_feed(kt, (const u8 *)"x", 1, 0),
				cases[i].err);
		KUNIT_EXPECT_EQ(test, READ_ONCE(kt->tcp->sk->sk_err),
				-cases[i].err);
		KUNIT_EXPECT_EQ(test, kt->psock->stats.rx_unrecov, 1);
		kcm_kt_teardown(kt);
	}
}

/* A large message is assembled in chunks and comes out byte exact. */
static void kcm_kt_large_message(struct kunit *test)
{
	const size_t plen = 200000, step = 1000;
	struct kcm_kt *kt;
	size_t n, off;
	u8 *stream;
	int i;

	stream = kunit_kmalloc(test, plen + 4, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, stream);
	n = kcm_kt_msg(stream, plen, 0);
	for (i = 4; i < (int)n; i++)
		stream[i] = i * 7;

	kt = kcm_kt_setup(test, kcm_kt_len4, ARRAY_SIZE(kcm_kt_len4));
	WRITE_ONCE(kt->tcp->sk->sk_rcvbuf, 1 << 20);
	for (off = 0; off < n; off += step)
		KUNIT_ASSERT_EQ(test, kcm_kt_feed(kt, stream + off,
						  min(step, n - off), 0),
				(int)min(step, n - off));
	kcm_kt_expect(test, kt, stream, &n, 1);
	kcm_kt_teardown(kt);
}

/*
 * Hands the engine @len bytes as a TCP skb like loopback makes them:
 * @linear bytes in the head, the rest in page fragments of @frag bytes.
 * With @shared, the fragments are marked as pages their owner may change.
 * Returns the bytes taken or an errno; the skb is freed at once, so the
 * messages must hold their own references.
 */
static int kcm_kt_feed_paged(struct kcm_kt *kt, const u8 *data, size_t len,
			     size_t linear, size_t frag, bool shared)
{
	struct sk_buff *skb = alloc_skb(linear, GFP_KERNEL);
	size_t off = linear, n;
	struct page *page;

	if (!skb)
		return -ENOMEM;
	skb_put_data(skb, data, linear);
	while (off < len && skb_shinfo(skb)->nr_frags < MAX_SKB_FRAGS) {
		n = min3(len - off, frag, (size_t)(PAGE_SIZE << 2));
		page = alloc_pages(GFP_KERNEL | __GFP_COMP, 2);
		if (!page) {
			kfree_skb(skb);
			return -ENOMEM;
		}
		memcpy(page_address(page), data + off, n);
		skb_add_rx_frag(skb, skb_shinfo(skb)->nr_frags, page, 0, n,
				PAGE_SIZE << 2);
		off += n;
	}
	if (shared)
		skb_shinfo(skb)->flags |= SKBFL_SHARED_FRAG;
	return kcm_kt_read(kt, skb, 0, skb->len);
}

/* Fragments of @skb whose pages are of @order (0: not compound). */
static unsigned int kcm_kt_order_frags(struct sk_buff *skb, unsigned int order)
{
	unsigned int i, n = 0;
	struct page *page;

	for (i = 0; i < skb_shinfo(skb)->nr_frags; i++) {
		page = compound_head(skb_frag_page(&skb_shinfo(skb)->frags[i]));
		n += (PageCompound(page) ? compound_order(page) : 0) == order;
	}
	return n;
}

/*
 * Fragments of @skb (a message) and of its frag_list whose pages are of
 * @order: 2 the test's TCP pages (references), 0 chunks a piece was
 * copied into, 3 the psock's fragment cache.
 */
static unsigned int kcm_kt_pieces(struct sk_buff *skb, unsigned int order)
{
	unsigned int n = kcm_kt_order_frags(skb, order);
	struct sk_buff *piece;

	skb_walk_frags(skb, piece)
		n += kcm_kt_order_frags(piece, order);
	return n;
}

/*
 * Large messages in paged TCP skbs are taken by reference, but copied
 * from small TCP skbs and from shared pages; they come out byte exact
 * after the TCP skbs are gone, each charged about what it holds.  The
 * few bytes TCP's skb boundaries leave of a message (33000-byte skbs),
 * and linear bytes, are copied into the psock's fragment cache rather
 * than a new page each, and the pages after linear bytes referenced.
 */
static void kcm_kt_large_by_reference(struct kunit *test)
{
	static const struct {
		size_t step, frag;
		bool shared, ref;
	} cases[] = {
		{ 102000, 12000, false, true },
		{ 3000, 1000, false, false },
		{ 102000, 12000, true, false },
		{ 33000, 12000, false, true },
	};
	const size_t lens[] = { 30004, 40004, 9004 };
	size_t n = 0, off, j;
	struct sk_buff *skb;
	struct kcm_kt *kt;
	unsigned int c, i;
	u8 *stream;

	stream = kunit_kmalloc(test, 80000, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, stream);
	for (i = 0; i < ARRAY_SIZE(lens); n += lens[i++]) {
		kcm_kt_msg(stream + n, lens[i] - 4, 0);
		for (j = 4; j < lens[i]; j++)
			stream[n + j] = (n + j) * 13;
	}

	for (c = 0; c < ARRAY_SIZE(cases); c++) {
		kt = kcm_kt_setup(test, kcm_kt_len4, ARRAY_SIZE(kcm_kt_len4));
		WRITE_ONCE(kt->tcp->sk->sk_rcvbuf, 1 << 20);
		for (off = 0; off < n; off += cases[c].step)
			KUNIT_ASSERT_EQ(test,
					kcm_kt_feed_paged(kt, stream + off,
							  min(cases[c].step,
							      n - off),
							  3, cases[c].frag,
							  cases[c].shared),
					(int)min(cases[c].step, n - off));
		i = 0;
		skb_queue_walk(&kt->mux->rx_hold, skb) {
			KUNIT_EXPECT_EQ(test, !!kcm_kt_pieces(skb, 2),
					cases[c].ref);
			KUNIT_EXPECT_LE(test, skb->truesize,
					skb->len + skb->len / 4 + 8192);
			/*
			 * The second message after its head: 2484 bytes at
			 * the end of the first skb, the 3 linear bytes of the
			 * second and of the third, and the 4005 it ends with
			 * in the third are copied; the rest is referenced.
			 */
			if (cases[c].step == 33000 && i == 1) {
				KUNIT_EXPECT_EQ(test, kcm_kt_pieces(skb, 0), 0);
				KUNIT_EXPECT_EQ(test, kcm_kt_pieces(skb, 3), 4);
			}
			i++;
		}
		KUNIT_EXPECT_EQ(test, i, ARRAY_SIZE(lens));
		kcm_kt_expect(test, kt, stream, lens, ARRAY_SIZE(lens));
		kcm_kt_teardown(kt);
	}
}

/*
 * Small messages in paged TCP skbs are framed in place across every
 * fragment and skb boundary (headers cut by fragments too), and come out
 * byte exact after the TCP skbs are gone; from shared pages, or from
 * skbs with less than KCM_STRP_REF_MIN bytes in pages, they are copied.
 */
static void kcm_kt_in_place(struct kunit *test)
{
	static const struct {
		size_t step, frag;
		bool shared, in_place;
	} cases[] = {
		{ 9000, 3000, false, true },
		{ 9000, 301, false, true },
		{ 4800, 1000, false, true },
		{ 9000, 3000, true, false },
		{ 3000, 3000, false, false },
	};
	enum { NMSG = 400 };
	size_t lens[NMSG], n = 0, off;
	struct kcm_kt *kt;
	unsigned int c, i;
	u8 *stream;
	u64 framed;
	int ret;

	stream = kunit_kmalloc(test, NMSG * 104, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, stream);
	for (i = 0; i < NMSG; i++) {
		lens[i] = kcm_kt_msg(stream + n, i % 100, i);
		n += lens[i];
	}

	for (c = 0; c < ARRAY_SIZE(cases); c++) {
		kt = kcm_kt_setup(test, kcm_kt_len4, ARRAY_SIZE(kcm_kt_len4));
		WRITE_ONCE(kt->tcp->sk->sk_rcvbuf, 1 << 26);
		for (off = 0; off < n; off += ret) {
			ret = kcm_kt_feed_paged(kt, stream + off,
						min(cases[c].step, n - off), 0,
						cases[c].frag, cases[c].shared);
			KUNIT_ASSERT_GT(test, ret, 0);
		}
		framed = kt->psock->stats.rx_in_place;
		if (cases[c].in_place)
			KUNIT_EXPECT_GT(test, framed, (u64)NMSG / 2);
		else
			KUNIT_EXPECT_EQ(test, framed, 0);
		KUNIT_EXPECT_EQ(test, kt->psock->stats.rx_msgs, (u64)NMSG);
		kcm_kt_expect(test, kt, stream, lens, NMSG);
		kcm_kt_teardown(kt);
	}
}

/* A message not complete within SO_RCVTIMEO stops the psock. */
static void kcm_kt_timeout(struct kunit *test)
{
	struct kcm_kt *kt = kcm_kt_setup(test, kcm_kt_len4,
					 ARRAY_SIZE(kcm_kt_len4));
	u8 part[10] = {};

	/* The first 10 bytes of a 104-byte message. */
	put_unaligned_be32(100, part);
	WRITE_ONCE(kt->tcp->sk->sk_rcvtimeo, msecs_to_jiffies(50));
	KUNIT_EXPECT_EQ(test, kcm_kt_feed(kt, part, sizeof(part), 0),
			(int)sizeof(part));
	KUNIT_EXPECT_FALSE(test, READ_ONCE(kt->psock->rx_stopped));
	msleep(500);
	KUNIT_EXPECT_TRUE(test, READ_ONCE(kt->psock->rx_stopped));
	KUNIT_EXPECT_EQ(test, READ_ONCE(kt->tcp->sk->sk_err), ETIMEDOUT);
	KUNIT_EXPECT_EQ(test, kt->psock->stats.rx_timeouts, 1);
	kcm_kt_teardown(kt);
}

/*
 * Small messages framed together come out as packs, one skb for up to
 * KCM_RX_PACK_MAX of them, charged what they hold, not a TCP buffer.
 */
static void kcm_kt_small_message_charge(struct kunit *test)
{
	struct kcm_kt *kt = kcm_kt_setup(test, kcm_kt_len4,
					 ARRAY_SIZE(kcm_kt_len4));
	static u8 stream[100 * 64];
	unsigned int truesize = 0, nskb = 0;
	size_t lens[100], n = 0;
	struct sk_buff *skb;
	int i;

	for (i = 0; i < 100; i++) {
		lens[i] = kcm_kt_msg(stream + n, 60, i);
		n += lens[i];
	}
	KUNIT_ASSERT_EQ(test, kcm_kt_feed(kt, stream, n, 0), (int)n);
	skb_queue_walk(&kt->mux->rx_hold, skb) {
		truesize += skb->truesize;
		nskb++;
	}
	KUNIT_EXPECT_EQ(test, nskb, DIV_ROUND_UP(100, KCM_RX_PACK_MAX));
	KUNIT_EXPECT_LE(test, truesize, 100 * (64 + 64));
	kcm_kt_expect(test, kt, stream, lens, 100);
	kcm_kt_teardown(kt);
}

/* Is @buf one of the @n in @set? */
static bool kcm_kt_buf_in(struct sk_buff *const *set, int n,
			  const struct sk_buff *buf)
{
	int i;

	for (i = 0; i < n; i++)
		if (set[i] == buf)
			return true;
	return false;
}

/*
 * Packs reference the framing buffer: bytes still referenced are never
 * overwritten when the buffer fills (it is replaced), and a buffer no
 * pack references any more is reused from its start, a spare first.
 */
static void kcm_kt_packs_and_buffer_reuse(struct kunit *test)
{
	struct kcm_kt *kt = kcm_kt_setup(test, kcm_kt_len4,
					 ARRAY_SIZE(kcm_kt_len4));
	static size_t lens[1200];
	size_t n = 0, off, step;
	struct sk_buff *spares[8], *buf;
	int nspares;
	bool reused;
	u8 *stream;
	int i, round;

	stream = kunit_kmalloc(test, 1200 * 64, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, stream);
	for (i = 0; i < 1200; i++) {
		lens[i] = kcm_kt_msg(stream + n, 20 + i % 41, i);
		n += lens[i];
	}
	for (round = 0; round < 2; round++) {
		nspares = 0;
		skb_queue_walk(&kt->psock->strp.spares, buf)
			if (nspares < ARRAY_SIZE(spares))
				spares[nspares++] = buf;
		reused = false;
		for (off = 0; off < n; off += step) {
			step = min_t(size_t, n - off, 1000 + round * 3000);
			KUNIT_ASSERT_EQ(test, kcm_kt_feed(kt, stream + off,
							  step, off % 5),
					(int)step);
			reused |= kcm_kt_buf_in(spares, nspares,
						kt->psock->strp.buf);
		}
		/* The stream is several buffers long: they were replaced. */
		KUNIT_EXPECT_GT(test, n, 3 * KCM_STRP_BUF);
		KUNIT_EXPECT_GT(test, skb_queue_len(&kt->psock->strp.spares), 0);
		/* The spare nothing referenced any more came back first. */
		KUNIT_EXPECT_EQ(test, reused, round > 0);
		kcm_kt_expect(test, kt, stream, lens, 1200);
		KUNIT_EXPECT_TRUE(test, kcm_strp_buf_private(kt->psock));
	}
	kcm_kt_teardown(kt);
}

/*
 * Feeds the @n bytes of @stream in skbs of 1000 bytes.  Return: whether
 * the framing buffer was one of the @nset in @set after any of them.
 */
static bool kcm_kt_feed_all(struct kunit *test, struct kcm_kt *kt,
			    const u8 *stream, size_t n,
			    struct sk_buff *const *set, int nset)
{
	bool seen = false;
	size_t off, step;

	for (off = 0; off < n; off += step) {
		step = min_t(size_t, n - off, 1000);
		KUNIT_EXPECT_EQ(test, kcm_kt_feed(kt, stream + off, step, 0),
				(int)step);
		seen |= kcm_kt_buf_in(set, nset, kt->psock->strp.buf);
	}
	return seen;
}

/*
 * A reader several buffers behind: the buffers the stream filled are
 * kept as spares, those read are framed into again, oldest first,
 * instead of new ones being allocated; rx_trim_work lets go of those a
 * busy stream did not need, and of all but one once it is quiet.
 */
static void kcm_kt_spares_reused(struct kunit *test)
{
	struct kcm_kt *kt = kcm_kt_setup(test, kcm_kt_len4,
					 ARRAY_SIZE(kcm_kt_len4));
	struct sk_buff_head *spares = &kt->psock->strp.spares;
	struct sk_buff *set[8], *buf;
	static size_t lens[2400];
	size_t n = 0, skipped = 0;
	unsigned int left;
	int i, nset = 0;
	u8 *stream;

	stream = kunit_kmalloc(test, 2 * 1200 * 64, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, stream);
	for (i = 0; i < 1200; i++) {
		lens[i] = kcm_kt_msg(stream + n, 20 + i % 41, i);
		lens[1200 + i] = lens[i];
		n += lens[i];
	}
	memcpy(stream + n, stream, n);

	kcm_kt_feed_all(test, kt, stream, n, set, 0);
	/* Nothing read yet: every filled buffer is kept, and referenced. */
	KUNIT_ASSERT_GE(test, skb_queue_len(spares), 3);
	KUNIT_EXPECT_TRUE(test, delayed_work_pending(&kt->psock->strp.trim_work));
	KUNIT_ASSERT_LE(test, skb_queue_len(spares), ARRAY_SIZE(set));
	skb_queue_walk(spares, buf)
		set[nset++] = buf;

	/* Read the first two buffers' worth (and a bit). */
	for (i = 0; skipped <= 2 * KCM_STRP_BUF; i++) {
		buf = kcm_kt_next(kt);
		KUNIT_ASSERT_NOT_NULL(test, buf);
		KUNIT_ASSERT_EQ(test, kcm_rx_cur_len(buf), lens[i]);
		skipped += lens[i];
	}
	/* Framing the stream again takes a buffer that was read. */
	KUNIT_EXPECT_TRUE(test, kcm_kt_feed_all(test, kt, stream, n,
						set, nset));
	/* No rx_trim_work from here on but the runs below. */
	cancel_delayed_work_sync(&kt->psock->strp.trim_work);
	/* The rest of the first stream, then the second, in order. */
	kcm_kt_expect(test, kt, stream + skipped, lens + i, 2400 - i);

	/* Everything read: every spare is unreferenced. */
	left = skb_queue_len(spares);
	KUNIT_ASSERT_GE(test, left, 3);
	/* Busy, and some replacement found no unreferenced spare: keep. */
	kt->psock->strp.spares_low = 0;
	kcm_strp_trim_work(&kt->psock->strp.trim_work.work);
	KUNIT_EXPECT_EQ(test, skb_queue_len(spares), left);
	/* Busy, and each found two at least: one was never needed. */
	cancel_delayed_work_sync(&kt->psock->strp.trim_work);
	kt->psock->strp.spares_low = 2;
	kcm_strp_trim_work(&kt->psock->strp.trim_work.work);
	KUNIT_EXPECT_EQ(test, skb_queue_len(spares), left - 1);
	/* Quiet (nothing replaced since): one spare stays. */
	cancel_delayed_work_sync(&kt->psock->strp.trim_work);
	kcm_strp_trim_work(&kt->psock->strp.trim_work.work);
	KUNIT_EXPECT_EQ(test, skb_queue_len(spares), 1);
	KUNIT_EXPECT_FALSE(test,
			   delayed_work_pending(&kt->psock->strp.trim_work));
	kcm_kt_teardown(kt);
}

/* Builds: one filler byte, a 2-byte little-endian payload length, payload. */
static size_t kcm_kt_msg_le16(u8 *buf, u16 plen, u8 fill)
{
	buf[0] = 0xa5;
	put_unaligned_le16(plen, buf + 1);
	memset(buf + 3, fill, plen);
	return plen + 3;
}

/*
 * The built-in length field parser (an extension) frames like a BPF one:
 * every split of a stream, a field off the start, a little-endian width,
 * a positive adjustment; then a length over its maximum stops the psock.
 */
static void kcm_kt_lenfield(struct kunit *test)
{
	static u8 stream[3 + 3 + 60 + 3 + 3000];
	struct kcm_parser lf = {
		.kind = KCM_PARSER_LENFIELD, .offset = 1, .width = 2,
		.le = true, .adjust = 3, .max_len = 3003,
	};
	size_t lens[3], n = 0;
	struct kcm_kt *kt;

	lens[0] = kcm_kt_msg_le16(stream, 0, 1);
	n += lens[0];
	lens[1] = kcm_kt_msg_le16(stream + n, 60, 2);
	n += lens[1];
	lens[2] = kcm_kt_msg_le16(stream + n, 3000, 3);
	n += lens[2];

	kt = kcm_kt_setup(test, kcm_kt_len4, ARRAY_SIZE(kcm_kt_len4));
	kt->psock->parser = lf;
	kcm_kt_every_cut(test, kt, stream, n, lens, 3);
	KUNIT_EXPECT_FALSE(test, kt->psock->rx_stopped);

	/* 3001 + 3 is one byte over the maximum. */
	put_unaligned_le16(3001, stream + 1);
	kcm_kt_feed(kt, stream, 3, 0);
	KUNIT_EXPECT_TRUE(test, kt->psock->rx_stopped);
	KUNIT_EXPECT_EQ(test, kt->psock->stats.rx_too_big, 1);
	KUNIT_EXPECT_EQ(test, READ_ONCE(kt->tcp->sk->sk_err), EMSGSIZE);
	kcm_kt_teardown(kt);
}

/*
 * One read of many small messages, a large one, two more small ones and a
 * length over SO_RCVBUF: the small ones are framed in runs under one
 * parser section (kcm_strp_parse()), a full pack is handed over and a new
 * one started, and the error stops the psock only after every message
 * before it came out whole and in order.
 */
static void kcm_kt_parse_run(struct kunit *test)
{
	const int nsmall = KCM_RX_PACK_MAX + 3, nmsg = nsmall + 3;
	unsigned int first;
	size_t *lens, n = 0;
	struct kcm_kt *kt;
	struct sk_buff *skb;
	u8 *stream;
	int i;

	stream = kunit_kmalloc(test, nsmall * 20 + 3004 + 2 * 20 + 4,
			       GFP_KERNEL);
	lens = kunit_kmalloc_array(test, nmsg, sizeof(*lens), GFP_KERNEL);
	KUNIT_ASSERT_TRUE(test, stream && lens);
	for (i = 0; i < nsmall; i++) {
		lens[i] = kcm_kt_msg(stream + n, i % 16, i);
		n += lens[i];
	}
	lens[i] = kcm_kt_msg(stream + n, 3000, 0x77);
	n += lens[i++];
	for (; i < nmsg; i++) {
		lens[i] = kcm_kt_msg(stream + n, 10, i);
		n += lens[i];
	}

	kt = kcm_kt_setup(test, kcm_kt_len4, ARRAY_SIZE(kcm_kt_len4));
	put_unaligned_be32(READ_ONCE(kt->tcp->sk->sk_rcvbuf), stream + n);
	KUNIT_EXPECT_EQ(test, kcm_kt_feed(kt, stream, n + 4, 0), -EMSGSIZE);
	KUNIT_EXPECT_TRUE(test, kt->psock->rx_stopped);
	KUNIT_EXPECT_EQ(test, READ_ONCE(kt->tcp->sk->sk_err), EMSGSIZE);
	KUNIT_EXPECT_EQ(test, kt->psock->stats.rx_too_big, 1);
	KUNIT_EXPECT_EQ(test, kt->psock->stats.rx_msgs, nmsg);

	spin_lock_bh(&kt->mux->lock);
	skb = skb_peek(&kt->mux->rx_hold);
	first = skb ? kcm_rx_msg(skb)->nmsgs : 0;
	spin_unlock_bh(&kt->mux->lock);
	KUNIT_EXPECT_EQ(test, first, KCM_RX_PACK_MAX);
	kcm_kt_expect(test, kt, stream, lens, nmsg);
	kcm_kt_teardown(kt);

	/* A run that ends in a partial header asks for more, once. */
	kt = kcm_kt_setup(test, kcm_kt_len4, ARRAY_SIZE(kcm_kt_len4));
	KUNIT_EXPECT_EQ(test, kcm_kt_feed(kt, stream, lens[0] + lens[1] + 2, 0),
			(int)(lens[0] + lens[1] + 2));
	KUNIT_EXPECT_FALSE(test, kt->psock->rx_stopped);
	KUNIT_EXPECT_EQ(test, kt->psock->stats.rx_msgs, 2);
	KUNIT_EXPECT_EQ(test, kt->psock->stats.rx_need_more, 1);
	kcm_kt_expect(test, kt, stream, lens, 2);
	kcm_kt_teardown(kt);
}

/*
 * Message @i of kcm_kt_keys(): a 4-byte length, then (payloads of 4 bytes
 * or more) a 4-byte key, then filler; *@key is what a key field at offset
 * 4 reads, KCM_NO_KEY for a message too short to hold it.
 */
static size_t kcm_kt_keyed_msg(u8 *buf, unsigned int i, u32 *key)
{
	u32 plen = i == 150 ? 3000 : i % 50 == 7 ? 2 : 20 + i % 60;

	kcm_kt_msg(buf, plen, i);
	*key = KCM_NO_KEY;
	if (plen >= 4) {
		/* Runs of equal keys, and keys that change every message. */
		*key = i < 100 ? i / 30 : i * 2654435761u;
		put_unaligned_be32(*key, buf + 4);
	}
	return plen + 4;
}

/*
 * With a key function on the mux, every message framed carries its key:
 * small ones framed in the buffer and in place (in a pack, one key for
 * all when they share it, else an array beside the lengths) and a large
 * one; a message too short for its key field has none, though the bytes
 * of the next message follow it where the parser saw it.
 */
static void kcm_kt_keys(struct kunit *test)
{
	enum { NMSG = 300 };
	static const size_t steps[] = { 1000, 9000 };
	struct kcm_steer_fn fn = {};
	unsigned int i, m, mixed;
	size_t *lens, n = 0, off;
	struct sk_buff *skb;
	struct kcm_kt *kt;
	u8 *stream;
	u32 *keys;
	int ret;

	stream = kunit_kmalloc(test, NMSG * 84 + 3000, GFP_KERNEL);
	lens = kunit_kcalloc(test, NMSG, sizeof(*lens), GFP_KERNEL);
	keys = kunit_kcalloc(test, NMSG, sizeof(*keys), GFP_KERNEL);
	KUNIT_ASSERT_TRUE(test, stream && lens && keys);
	for (i = 0; i < NMSG; i++) {
		lens[i] = kcm_kt_keyed_msg(stream + n, i, &keys[i]);
		n += lens[i];
	}
	KUNIT_ASSERT_EQ(test, kcm_field_set(&fn.f, KCM_KEY_FIELD, 4, 4,
					    KCM_LENFIELD_BE), 0);

	/* Through the framing buffer, then framed in place in pages. */
	for (m = 0; m < ARRAY_SIZE(steps); m++) {
		kt = kcm_kt_setup(test, kcm_kt_len4, ARRAY_SIZE(kcm_kt_len4));
		WRITE_ONCE(kt->tcp->sk->sk_rcvbuf, 1 << 26);
		RCU_INIT_POINTER(kt->mux->steer.fn, &fn);
		for (off = 0; off < n; off += ret) {
			if (m)
				ret = kcm_kt_feed_paged(kt, stream + off,
							min(steps[m], n - off),
							0, 3000, false);
			else
				ret = kcm_kt_feed(kt, stream + off,
						  min(steps[m], n - off), 0);
			KUNIT_ASSERT_GT(test, ret, 0);
		}
		if (m)
			KUNIT_EXPECT_GT(test, kt->psock->stats.rx_in_place,
					(u64)NMSG / 2);
		mixed = 0;
		for (i = 0; i < NMSG; i++) {
			skb = kcm_kt_next(kt);
			KUNIT_ASSERT_NOT_NULL(test, skb);
			KUNIT_EXPECT_EQ(test, kcm_rx_cur_len(skb), lens[i]);
			KUNIT_EXPECT_EQ(test,
					kcm_rx_key_at(skb, kcm_rx_msg(skb)->next),
					keys[i]);
			mixed += !kcm_rx_msg(skb)->next &&
				 kcm_rx_msg(skb)->keys_off;
		}
		KUNIT_EXPECT_NULL(test, kcm_kt_next(kt));
		KUNIT_EXPECT_GT(test, mixed, 0);
		RCU_INIT_POINTER(kt->mux->steer.fn, NULL);
		kcm_kt_teardown(kt);
	}
}

static struct kunit_case kcm_strp_test_cases[] = {
	KUNIT_CASE(kcm_kt_every_split),
	KUNIT_CASE(kcm_kt_bytewise_and_coalesced),
	KUNIT_CASE(kcm_kt_buffer_on_first_bytes),
	KUNIT_CASE(kcm_kt_zero_length_read),
	KUNIT_CASE(kcm_kt_length_limits),
	KUNIT_CASE(kcm_kt_late_length),
	KUNIT_CASE(kcm_kt_parser_errors),
	KUNIT_CASE(kcm_kt_parse_run),
	KUNIT_CASE(kcm_kt_large_message),
	KUNIT_CASE(kcm_kt_large_by_reference),
	KUNIT_CASE(kcm_kt_in_place),
	KUNIT_CASE(kcm_kt_timeout),
	KUNIT_CASE(kcm_kt_small_message_charge),
	KUNIT_CASE(kcm_kt_packs_and_buffer_reuse),
	KUNIT_CASE(kcm_kt_spares_reused),
	KUNIT_CASE(kcm_kt_lenfield),
	KUNIT_CASE(kcm_kt_keys),
	{}
};

static struct kunit_suite kcm_strp_test_suite = {
	.name = "kcm_strp",
	.test_cases = kcm_strp_test_cases,
};

kunit_test_suite(kcm_strp_test_suite);
