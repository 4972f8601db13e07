// SPDX-License-Identifier: GPL-2.0-only
/*
 * Kernel Connection Multiplexor: framing the byte stream of an attached
 * TCP socket into messages (the psock's struct kcm_strp).
 *
 * Bytes are taken from an attached TCP socket with tcp_read_sock().  Small
 * messages that lie whole in the page fragments of the TCP skb being read
 * are framed in place: the parser runs on the psock's view (strp.view), an
 * skb whose fragments describe TCP's from the message start on, and a
 * pack of them (below) references TCP's pages, so such a message is
 * copied once, to the reader.  For messages that lie in one fragment the
 * view's data points into it, as linear data; for one that goes on into
 * the next, the view's head holds a copy of its first KCM_STRP_VIEW_HEAD
 * bytes, for the loads of a header.  The rest (bytes in TCP's
 * linear data or in pages a sender may still change, a message that goes
 * on in the next TCP skb, one the parser cannot judge yet, and the start
 * of a large one) is copied into the psock's framing buffer (strp.buf), a
 * private linear skb whose data always starts at the first byte of the
 * current message; a buffer that holds part of a message gets only what
 * that message needs, so the one after it is framed in place again.
 * Either way the parser sees the message at offset 0 and skb->len counts
 * the bytes received from there on.  It runs again only when it asked for
 * more and more has arrived.  A mux's key function (kcm_steer.c) runs
 * once on each whole message, on the same skb with skb->len cut to the
 * message; the keys of a pack's messages go with its lengths.
 *
 * Small messages (up to KCM_STRP_SMALL bytes) stay where they are, in
 * TCP's pages or in the buffer.  Those framed one after another go out together
 * as a pack: one skb, whose fragments reference their bytes and whose
 * headroom holds their lengths, up to KCM_RX_PACK_MAX of them.  A pack
 * costs one sk_buff however many messages it carries, a message framed in
 * the buffer is copied twice (TCP to the buffer, the buffer to the
 * reader), and a KCM socket is charged the bytes a pack holds (in TCP's
 * pages, their share of what TCP was charged for them), not the TCP
 * segment they came in.  Bytes a pack references are never
 * overwritten: a buffer that fills while packs still use it is replaced
 * (the unframed rest is moved), one that no pack uses any more is reused
 * from its start.  The heads of packs and of large messages come from a
 * per-psock page fragment cache (build_skb()): a kmalloc() per skb, zeroed
 * by init_on_alloc on distro kernels, was the largest single cost of small
 * messages.  A larger message is assembled as skbs chained on the
 * frag_list of strp.msg: pieces that reference the page fragments of TCP's
 * own skbs (no copy; each is charged for the bytes it references), or, for
 * bytes in TCP's linear data, in small segments or in pages a sender may
 * still change, page-backed chunks the bytes are copied into.  After a
 * large message only KCM_STRP_STEP bytes at a time go through the buffer,
 * so the next one is not copied twice.  A small message whose first bytes arrived
 * in the buffer's last room is moved with the unframed rest when the
 * buffer is replaced: only those bytes are copied a third time.
 *
 * Interface
 * ---------
 * Framing is driven from the psock's TCP callback (kcm_psock_data_ready())
 * and its work items; it hands finished messages and packs to delivery
 * with kcm_rx_deliver() (kcm_rx.c) and reads the psock's rx_paused, which
 * delivery sets while the mux holds too much of the connection's data;
 * delivery kicks it again with kcm_strp_kick().  Unattach drops what is
 * left with kcm_strp_flush().
 *
 * Locking: every function of this file runs under the TCP socket's lock,
 * which serialises all of struct kcm_strp: its spinlock in the data_ready
 * softirq when no task owns the socket, else lock_sock() in a work item or
 * in unattach.  The entry points check it.
 */

#include <linux/bpf.h>
#include <linux/filter.h>
#include <linux/sched/signal.h>
#include <linux/skbuff.h>
#include <linux/workqueue.h>
#include <net/compat.h>
#include <net/sock.h>
#include <net/tcp.h>
#include <net/kcm.h>
#include <trace/events/kcm.h>

#include "kcm_compat.h"

/* Initial size of a psock's framing buffer (its pages: 16 KB). */
#define KCM_STRP_BUF		(16 * 1024 - \
				 SKB_DATA_ALIGN(sizeof(struct skb_shared_info)))
/* Framing buffers kept for reuse once no pack references them. */
#define KCM_STRP_SPARES		1024
/* Unreferenced spares counted at most per replacement. */
#define KCM_STRP_SPARES_COUNT	64
/* How often a psock with spares checks whether it still uses them. */
#define KCM_STRP_TRIM_DELAY	HZ
/* Messages up to this size are cut from the framing buffer. */
#define KCM_STRP_SMALL		2048
/* Bytes per skb of a large message, where it is copied. */
#define KCM_STRP_CHUNK		(16U * PAGE_SIZE)
/* TCP's pages are referenced only where at least this many bytes lie. */
#define KCM_STRP_REF_MIN	4096U
/* Small pieces of a large message copied into the fragment cache, at most. */
#define KCM_STRP_FRAG_COPIES	4
/* Bytes framed at a time when the last message was a large one. */
#define KCM_STRP_STEP		512U
/* Bytes of a message's start the parser reads from the view's own head. */
#define KCM_STRP_VIEW_HEAD	16U
/* Retry delay after a failed allocation in process context. */
#define KCM_STRP_RETRY		(HZ / 10)
/* Bytes a psock may take in a read before its TCP socket is charged. */
#define KCM_STRP_MEM_STEP	(256 * 1024)
/* Messages framed before they are delivered together. */
#define KCM_STRP_BATCH		32
/* kcm_strp_parse(): small messages were framed, nothing more is parsed. */
#define KCM_STRP_RUN		2

/* The assembly timeout starts with the first bytes of a message. */
static void kcm_strp_timer_start(struct kcm_psock *psock)
{
	long timeo = READ_ONCE(psock->sk->sk_rcvtimeo);

	if (psock->strp.timing)
		return;

	psock->strp.timing = true;
	psock->strp.start = jiffies;
	if (timeo != MAX_SCHEDULE_TIMEOUT)
		mod_delayed_work(system_wq, &psock->strp.timer_work, timeo);
}

/* A message is whole, or framing stops: no more timeout. */
static void kcm_strp_timer_stop(struct kcm_psock *psock)
{
	if (!psock->strp.timing)
		return;

	psock->strp.timing = false;
	/* Queued only with SO_RCVTIMEO set: skip the cancel's irq-off grab. */
	if (delayed_work_pending(&psock->strp.timer_work))
		cancel_delayed_work(&psock->strp.timer_work);
}

/*
 * Stop receiving on @psock and post -@err on its TCP socket.
 */
static void kcm_strp_fail(struct kcm_psock *psock, int err)
{
	struct sock *csk = psock->sk;

	trace_kcm_rx_error(psock, err);
	WRITE_ONCE(psock->rx_stopped, true);
	kcm_stat_add(&psock->stats.rx_unrecov, 1);
	kcm_strp_timer_stop(psock);
	WRITE_ONCE(csk->sk_err, -err);
	sk_error_report(csk);
}

/* @n messages, @bytes in all, are framed. */
static void kcm_strp_framed_n(struct kcm_psock *psock, unsigned int n,
			      unsigned int bytes)
{
	kcm_stat_add(&psock->stats.rx_msgs, n);
	kcm_stat_add(&psock->stats.rx_bytes, bytes);
	psock->strp.msg_len = 0;
	psock->strp.seen = 0;
	kcm_strp_timer_stop(psock);
}

/* A message of @len bytes is framed. */
static void kcm_strp_framed(struct kcm_psock *psock, unsigned int len)
{
	trace_kcm_rx_framed(psock, len);
	kcm_strp_framed_n(psock, 1, len);
}

/*
 * @skb, one message or a pack of @nmsgs, joins the batch delivered at the
 * end of this read (or now, when the batch is full).  Its messages have
 * the steering key @key, unless @keys_off says where their keys are.
 */
static void kcm_strp_emit(struct kcm_psock *psock, struct sk_buff *skb,
			  unsigned int nmsgs, u32 key, unsigned int keys_off)
{
	struct kcm_rx_msg *rxm = kcm_rx_msg(skb);

	memset(rxm, 0, sizeof(*rxm));
	rxm->conn_id = psock->index;
	rxm->nmsgs = nmsgs;
	rxm->pack = nmsgs > 1;
	rxm->key = key;
	rxm->keys_off = keys_off;
	__skb_queue_tail(&psock->strp.batch, skb);
	if (skb_queue_len(&psock->strp.batch) >= KCM_STRP_BATCH ||
	    nmsgs >= KCM_RX_PACK_MAX)
		kcm_rx_deliver(psock, &psock->strp.batch);
}

/* A large message is complete. */
static void kcm_strp_complete(struct kcm_psock *psock, struct sk_buff *skb)
{
	u32 key = kcm_steer_key(psock, skb, skb->len);

	kcm_strp_framed(psock, skb->len);
	kcm_strp_emit(psock, skb, 1, key, 0);
}

/*
 * Judge the parser's answer @ret for the message at the start of the
 * framing buffer.
 *
 * Return: 1 when the message length is known, 0 when more bytes are
 * needed, or the negative errno that stops the psock.
 */
static int kcm_strp_judge(struct kcm_psock *psock, int ret)
{
	struct sk_buff *buf = psock->strp.buf;

	/* Only errnos user space knows; never internal ones like -512. */
	if (ret < 0)
		return ret >= -EHWPOISON ? ret : -EPROTO;
	if (!ret) {
		kcm_stat_add(&psock->stats.rx_need_more, 1);
		psock->strp.seen = buf->len;
		return 0;
	}
	if ((unsigned int)ret <= psock->strp.seen) {
		kcm_stat_add(&psock->stats.rx_bad_len, 1);
		trace_kcm_rx_bad_len(psock, ret);
		return -EPROTO;
	}
	if (ret > READ_ONCE(psock->sk->sk_rcvbuf)) {
		kcm_stat_add(&psock->stats.rx_too_big, 1);
		trace_kcm_rx_too_big(psock, ret);
		return -EMSGSIZE;
	}
	psock->strp.msg_len = ret;
	return 1;
}

/*
 * A framing buffer: a linear skb whose head is pages of its own (at least
 * @size bytes of room), so that packs can take references to its bytes.
 *
 * Context: any; @gfp says what may be done.
 * Return: the skb, or NULL.
 */
static struct sk_buff *kcm_strp_buf_alloc(unsigned int size, gfp_t gfp)
{
	unsigned int order = get_order(SKB_DATA_ALIGN(size) +
			SKB_DATA_ALIGN(sizeof(struct skb_shared_info)));
	struct sk_buff *skb;
	struct page *page;

	page = alloc_pages(gfp | __GFP_COMP | __GFP_NOWARN, order);
	if (!page)
		return NULL;
	skb = build_skb(page_address(page), PAGE_SIZE << order);
	if (!skb)
		__free_pages(page, order);
	return skb;
}

/*
 * A psock gets its framing buffer with its first bytes, not when it is
 * attached: an idle connection costs no 16 KB of zeroed pages, and
 * attaching one no time to clear them.
 *
 * Return: 0, or -ENOMEM to be retried.
 */
static int kcm_strp_buf_get(struct kcm_psock *psock)
{
	if (likely(psock->strp.buf))
		return 0;
	psock->strp.buf = kcm_strp_buf_alloc(KCM_STRP_BUF,
					     psock->strp.gfp | __GFP_NOWARN);
	if (psock->strp.buf)
		return 0;
	kcm_stat_add(&psock->stats.rx_mem_fail, 1);
	return -ENOMEM;
}

/*
 * May the framing buffer's bytes before its data be overwritten?  Only
 * when no pack references them any more.
 *
 * Context: only we take references to the page.
 */
static bool kcm_strp_buf_private(struct kcm_psock *psock)
{
	struct page *page = virt_to_head_page(psock->strp.buf->head);

	if (psock->strp.buf_shared && page_count(page) == 1)
		psock->strp.buf_shared = false;
	return !psock->strp.buf_shared;
}

/*
 * Move the unframed bytes to the start of the framing buffer.
 *
 * Context: no message waits to be packed and the
 * buffer is private (kcm_strp_buf_private()).
 */
static void kcm_strp_buf_compact(struct kcm_psock *psock)
{
	struct sk_buff *buf = psock->strp.buf;
	unsigned int len = buf->len;

	if (len)
		memmove(buf->head, buf->data, len);
	buf->data = buf->head;
	skb_set_tail_pointer(buf, len);
	psock->strp.pack_off = 0;
}

/* @buf joins the spares, newest last. */
static void kcm_strp_spare_add(struct kcm_psock *psock, struct sk_buff *buf)
{
	__skb_queue_tail(&psock->strp.spares, buf);
	psock->strp.spares_size += buf->truesize;
}

/* @buf, a spare, leaves them. */
static void kcm_strp_spare_del(struct kcm_psock *psock, struct sk_buff *buf)
{
	__skb_unlink(buf, &psock->strp.spares);
	psock->strp.spares_size -= buf->truesize;
}

/* No pack references @buf's bytes. */
static bool kcm_strp_spare_free(const struct sk_buff *buf)
{
	return page_count(virt_to_head_page(buf->head)) == 1;
}

/*
 * Unreferenced spares at the head of the list, counted up to
 * KCM_STRP_SPARES_COUNT.
 */
static unsigned int kcm_strp_spares_free_head(struct kcm_psock *psock)
{
	unsigned int n = 0;
	struct sk_buff *buf;

	skb_queue_walk(&psock->strp.spares, buf) {
		if (n == KCM_STRP_SPARES_COUNT || !kcm_strp_spare_free(buf))
			break;
		n++;
	}
	return n;
}

/*
 * The oldest spare framing buffer, emptied, if no pack references it any
 * more and it has room for @size bytes.  Packs are read in the order they
 * were framed, so the oldest spare is the first to be let go: while the
 * readers are less than KCM_STRP_SPARES buffers behind, buffers take turns
 * with no allocation (and no page zeroing) per buffer.  A free spare too
 * small for @size (the buffer grew since) is dropped.  How many were
 * free is remembered for kcm_strp_trim_work().
 */
static struct sk_buff *kcm_strp_buf_spare(struct kcm_psock *psock,
					  unsigned int size)
{
	struct sk_buff *buf;

	psock->strp.spares_low = min(psock->strp.spares_low,
				     kcm_strp_spares_free_head(psock));
	while ((buf = skb_peek(&psock->strp.spares)) && kcm_strp_spare_free(buf)) {
		kcm_strp_spare_del(psock, buf);
		if (skb_end_offset(buf) >= size) {
			buf->data = buf->head;
			buf->len = 0;
			skb_reset_tail_pointer(buf);
			return buf;
		}
		consume_skb(buf);
	}
	return NULL;
}

/*
 * Let go of up to @surplus spares no pack references, always keeping
 * one of those.
 */
static void kcm_strp_spares_trim(struct kcm_psock *psock, unsigned int surplus)
{
	struct sk_buff *buf, *tmp;
	bool kept = false;

	skb_queue_walk_safe(&psock->strp.spares, buf, tmp) {
		if (!surplus)
			break;
		if (!kcm_strp_spare_free(buf))
			continue;
		if (!kept) {
			kept = true;
			continue;
		}
		kcm_strp_spare_del(psock, buf);
		consume_skb(buf);
		surplus--;
	}
}

/*
 * A psock with more than one spare looks at them every
 * KCM_STRP_TRIM_DELAY (kcm_strp_trim_work(), armed when a buffer joins the
 * spares and by itself while there are more than one).  If it replaced no buffer
 * since the last look, the connection is quiet and it keeps one spare
 * that no pack references.  If it did, each replacement found some
 * number of unreferenced spares at the head: all but one of the fewest
 * it found were never needed, and go.  So a busy stream keeps what its
 * readers' bursts use (a spare let go of now would be a zeroed
 * allocation a moment later), and spares left over from a burst are let
 * go of within seconds.
 */
static void kcm_strp_spares_arm(struct kcm_psock *psock)
{
	if (skb_queue_len(&psock->strp.spares) > 1)
		queue_delayed_work(system_wq, &psock->strp.trim_work,
				   KCM_STRP_TRIM_DELAY);
}

/*
 * Move the unframed bytes to another framing buffer of at least @size
 * bytes; the old one joins the spares.
 *
 * Context: no message waits to be packed.
 * Return: 0 or -ENOMEM (the old buffer stays).
 */
static int kcm_strp_buf_replace(struct kcm_psock *psock, unsigned int size)
{
	struct sk_buff *old = psock->strp.buf, *buf;

	buf = kcm_strp_buf_spare(psock, size);
	if (!buf)
		buf = kcm_strp_buf_alloc(size, psock->strp.gfp);
	if (!buf) {
		kcm_stat_add(&psock->stats.rx_mem_fail, 1);
		return -ENOMEM;
	}
	skb_put_data(buf, old->data, old->len);
	kcm_strp_spare_add(psock, old);
	/* Packs keep the pages they reference; only ours are let go. */
	if (skb_queue_len(&psock->strp.spares) > KCM_STRP_SPARES) {
		old = skb_peek(&psock->strp.spares);
		kcm_strp_spare_del(psock, old);
		consume_skb(old);
	}
	kcm_strp_spares_arm(psock);
	psock->strp.buf = buf;
	psock->strp.pack_off = 0;
	psock->strp.buf_shared = false;
	return 0;
}

/* Where the keys of a pack of @n messages start: after their lengths. */
static unsigned int kcm_strp_keys_off(unsigned int n)
{
	return ALIGN(n * sizeof(u16), sizeof(u32));
}

/* Do the first @n messages of rx_pack_keys have different keys? */
static bool kcm_strp_keys_differ(struct kcm_psock *psock, unsigned int n)
{
	const u32 *keys = psock->strp.pack_keys;
	unsigned int i;

	for (i = 1; i < n; i++)
		if (keys[i] != keys[0])
			return true;
	return false;
}

/*
 * The head of a pack of @n messages, their lengths (rx_pack_lens) in its
 * headroom and, when they differ, their keys (rx_pack_keys) after them
 * (*@keys_off, else 0); no bytes yet.
 *
 * Return: the skb, or NULL (counted as a failed allocation).
 */
static struct sk_buff *kcm_strp_pack_alloc(struct kcm_psock *psock,
					   unsigned int n,
					   unsigned int *keys_off)
{
	unsigned int lsize = n * sizeof(u16), size = lsize;
	struct sk_buff *skb;

	*keys_off = 0;
	if (kcm_strp_keys_differ(psock, n)) {
		*keys_off = kcm_strp_keys_off(n);
		size = *keys_off + n * sizeof(u32);
	}
	skb = kcm_frag_skb(&psock->strp.frag, size,
			   psock->strp.gfp | __GFP_NOWARN);
	if (!skb) {
		kcm_stat_add(&psock->stats.rx_mem_fail, 1);
		return NULL;
	}
	skb_reserve(skb, size);
	memcpy(kcm_pack_lens(skb), psock->strp.pack_lens, lsize);
	if (*keys_off)
		memcpy(skb->head + *keys_off, psock->strp.pack_keys,
		       n * sizeof(u32));
	return skb;
}

/*
 * Hand the small messages framed since the last pack over as one skb: a
 * fragment referencing their bytes in the framing buffer (no copy), their
 * lengths in its headroom.  It is charged for those bytes only.
 *
 * Return: 0, or -ENOMEM with the messages left to be packed on a retry.
 */
static int kcm_strp_pack_seal(struct kcm_psock *psock)
{
	struct sk_buff *buf = psock->strp.buf, *skb;
	unsigned int n = psock->strp.pack_n, keys_off;
	u8 *start = buf->head + psock->strp.pack_off;
	unsigned int bytes = buf->data - start;
	struct page *page;

	if (!n) {
		psock->strp.pack_off = skb_headroom(buf);
		return 0;
	}
	skb = kcm_strp_pack_alloc(psock, n, &keys_off);
	if (!skb)
		return -ENOMEM;
	page = virt_to_head_page(start);
	get_page(page);
	skb_fill_page_desc(skb, 0, page, start - (u8 *)page_address(page),
			   bytes);
	skb->len = bytes;
	skb->data_len = bytes;
	skb->truesize += bytes;

	psock->strp.pack_n = 0;
	psock->strp.pack_off = skb_headroom(buf);
	psock->strp.buf_shared = true;
	kcm_strp_emit(psock, skb, n, psock->strp.pack_keys[0], keys_off);
	return 0;
}

/*
 * Make room in the framing buffer for at least one more byte: compact it
 * or, when packs still reference its bytes, move to a new one; grow it
 * while the parser still needs more, up to the TCP socket's receive
 * buffer.
 */
static int kcm_strp_buf_room(struct kcm_psock *psock)
{
	struct sk_buff *buf = psock->strp.buf;
	unsigned int size = skb_end_offset(buf);
	int limit = READ_ONCE(psock->sk->sk_rcvbuf);
	int err;

	if (skb_tailroom(buf))
		return 0;

	err = kcm_strp_pack_seal(psock);
	if (err)
		return err;
	if (buf->data != buf->head) {
		if (kcm_strp_buf_private(psock)) {
			kcm_strp_buf_compact(psock);
			return 0;
		}
		return kcm_strp_buf_replace(psock, size);
	}
	if (size >= limit) {
		kcm_stat_add(&psock->stats.rx_too_big, 1);
		trace_kcm_rx_too_big(psock, buf->len);
		return -EMSGSIZE;
	}
	return kcm_strp_buf_replace(psock, size + min_t(unsigned int, size,
						      limit - size));
}

/*
 * The small whole message of @len bytes at the start of the framing
 * buffer joins the pack being built, which has room for it: it stays where
 * it is, and is only counted (and given its key).
 *
 * Context: may run in the parser's section.
 */
static void kcm_strp_pack_in(struct kcm_psock *psock, unsigned int len)
{
	psock->strp.pack_keys[psock->strp.pack_n] =
		kcm_steer_key(psock, psock->strp.buf, len);
	psock->strp.pack_lens[psock->strp.pack_n++] = len;
	__skb_pull(psock->strp.buf, len);
	kcm_strp_framed(psock, len);
}

/*
 * The small message at the start of the framing buffer joins the pack
 * being built, which is handed over first when it is full.
 *
 * Return: 0 or -ENOMEM (a full pack could not be handed over).
 */
static int kcm_strp_emit_small(struct kcm_psock *psock)
{
	unsigned int len = psock->strp.msg_len;
	int err;

	if (psock->strp.pack_n == KCM_RX_PACK_MAX) {
		err = kcm_strp_pack_seal(psock);
		if (err)
			return err;
	}
	kcm_strp_pack_in(psock, len);
	return 0;
}

/*
 * Run the parser on the framing buffer.  While it finds small whole
 * messages that fit the pack being built, they are framed right away:
 * that needs no allocation, so one parser section (kcm_parse_lock(): RCU
 * and, for BPF, migrate_disable()) covers the parser runs of all of them
 * instead of one section each.  The first other answer is judged
 * (kcm_strp_judge()).
 *
 * Return: 1 when the length of the message at the start of the buffer is
 * known, 0 when more bytes are needed, KCM_STRP_RUN when messages were
 * framed and the buffer is empty or the psock paused, or an errno that
 * stops the psock.
 */
static int kcm_strp_parse(struct kcm_psock *psock)
{
	struct sk_buff *buf = psock->strp.buf;
	bool run = false;
	int ret;

	if (buf->len <= psock->strp.seen)
		return 0;

	kcm_parse_lock(psock);
	for (;;) {
		ret = kcm_parse_locked(psock, buf, true);
		if (ret <= (int)psock->strp.seen || ret > KCM_STRP_SMALL ||
		    ret > buf->len || psock->strp.pack_n == KCM_RX_PACK_MAX ||
		    ret > READ_ONCE(psock->sk->sk_rcvbuf))
			break;
		psock->strp.last_large = false;
		kcm_strp_pack_in(psock, ret);
		if (!buf->len || READ_ONCE(psock->rx_paused)) {
			run = true;
			break;
		}
	}
	kcm_parse_unlock(psock);
	return run ? KCM_STRP_RUN : kcm_strp_judge(psock, ret);
}

/* Appends @piece to the large message. */
static void kcm_strp_msg_append(struct kcm_psock *psock, struct sk_buff *piece)
{
	struct sk_buff *msg = psock->strp.msg;

	if (!msg) {
		psock->strp.msg = piece;
		psock->strp.frag_copies = 0;
	} else {
		if (psock->strp.chunk == msg)
			skb_shinfo(msg)->frag_list = piece;
		else
			psock->strp.chunk->next = piece;
		msg->len += piece->len;
		msg->data_len += piece->len;
		msg->truesize += piece->truesize;
	}
	psock->strp.chunk = piece;
}

/*
 * Add an empty page-backed chunk to the large message, to copy @want bytes
 * into: a page-rounded fit at first, the largest size while copying goes
 * on (a stream of small segments).
 */
static int kcm_strp_chunk_add(struct kcm_psock *psock, unsigned int want)
{
	unsigned int size = psock->strp.copying ? KCM_STRP_CHUNK :
			    round_up(want, PAGE_SIZE);
	struct sk_buff *chunk;
	int err;

	size = min3(size, KCM_STRP_CHUNK, psock->strp.msg_len - psock->strp.msg_fill);
	chunk = alloc_skb_with_frags(0, size, 0, &err,
				     psock->strp.gfp | __GFP_NOWARN);
	if (!chunk) {
		kcm_stat_add(&psock->stats.rx_mem_fail, 1);
		return -ENOMEM;
	}
	chunk->len = size;
	chunk->data_len = size;
	kcm_strp_msg_append(psock, chunk);
	psock->strp.chunk_fill = 0;
	psock->strp.copying = true;
	return 0;
}

/*
 * Shrink the last chunk of the large message to the bytes copied into it,
 * before a piece that is not copied follows it.
 */
static void kcm_strp_chunk_seal(struct kcm_psock *psock)
{
	struct sk_buff *chunk = psock->strp.chunk, *msg = psock->strp.msg;
	unsigned int unused = chunk->data_len - psock->strp.chunk_fill;
	struct skb_shared_info *shinfo = skb_shinfo(chunk);
	unsigned int cut = unused, freed = 0, size;
	skb_frag_t *frag;

	while (cut) {
		frag = &shinfo->frags[shinfo->nr_frags - 1];
		size = skb_frag_size(frag);
		if (size > cut) {
			skb_frag_size_sub(frag, cut);
			break;
		}
		skb_frag_unref(chunk, shinfo->nr_frags - 1);
		shinfo->nr_frags--;
		freed += PAGE_SIZE;
		cut -= size;
	}
	chunk->len -= unused;
	chunk->data_len -= unused;
	chunk->truesize -= freed;
	if (chunk != msg) {
		msg->len -= unused;
		msg->data_len -= unused;
		msg->truesize -= freed;
	}
	psock->strp.copying = false;
}

/* Context: any.  Copies @len bytes of @src into the page frags of @chunk. */
static void kcm_strp_chunk_copy(struct sk_buff *chunk, unsigned int off,
				const struct sk_buff *src, unsigned int src_off,
			      unsigned int len)
{
	struct skb_shared_info *shinfo = skb_shinfo(chunk);
	unsigned int i, n, size;
	skb_frag_t *frag;

	for (i = 0; len && i < shinfo->nr_frags; i++) {
		frag = &shinfo->frags[i];
		size = skb_frag_size(frag);
		if (off >= size) {
			off -= size;
			continue;
		}
		n = min(len, size - off);
		WARN_ON_ONCE(skb_copy_bits(src, src_off,
					   skb_frag_address(frag) + off, n));
		src_off += n;
		len -= n;
		off = 0;
	}
}

/*
 * May @len bytes of @src from @off on be taken by reference (pieces of a
 * large message, packs framed in place) rather than copied?  Only from
 * its own page fragments, only when at least KCM_STRP_REF_MIN of them lie
 * there (a few bytes are copied rather than keep a page), and never from
 * pages their owner may still change (zerocopy user pages, spliced page
 * cache) nor from device memory.
 */
static bool kcm_strp_may_ref(struct sk_buff *src, unsigned int off,
			     unsigned int len)
{
	if (off < skb_headlen(src) || off >= skb_pagelen(src))
		return false;
	if (min(len, skb_pagelen(src) - off) < KCM_STRP_REF_MIN)
		return false;
	return !skb_zcopy(src) && !skb_has_shared_frag(src) &&
	       kcm_skb_frags_readable(src);
}

/*
 * Reference up to @len bytes of @src's page fragments from @off on (see
 * kcm_strp_may_ref()) as fragments of @to, while it has free slots.  @to is
 * charged for the bytes referenced.
 *
 * Return: bytes taken, 0 when @to has no free slot.
 */
static unsigned int kcm_strp_frags_ref(struct sk_buff *to,
				       const struct sk_buff *src,
				     unsigned int off, unsigned int len)
{
	const struct skb_shared_info *sinfo = skb_shinfo(src);
	unsigned int pos = skb_headlen(src), done = 0;
	int i, nr = skb_shinfo(to)->nr_frags;
	unsigned int cur, size, skip, n;
	const skb_frag_t *frag;

	for (i = 0; i < sinfo->nr_frags && done < len; i++) {
		frag = &sinfo->frags[i];
		size = skb_frag_size(frag);
		cur = off + done;
		if (cur >= pos + size) {
			pos += size;
			continue;
		}
		if (nr == MAX_SKB_FRAGS)
			break;
		skip = cur - pos;
		n = min(size - skip, len - done);
		get_page(skb_frag_page(frag));
		skb_fill_page_desc(to, nr++, skb_frag_page(frag),
				   skb_frag_off(frag) + skip, n);
		done += n;
		pos += size;
	}
	to->len += done;
	to->data_len += done;
	to->truesize += done;
	return done;
}

/*
 * @to, the last skb of the large message, grew by @n bytes of fragments
 * (and was charged for them): so does the message, when @to is on its
 * frag_list.
 */
static void kcm_strp_msg_grew(struct kcm_psock *psock, struct sk_buff *to,
			      unsigned int n)
{
	struct sk_buff *msg = psock->strp.msg;

	if (to != msg) {
		msg->len += n;
		msg->data_len += n;
		msg->truesize += n;
	}
}

/*
 * Reference bytes of @src as fragments of @to, the last skb of the large
 * message (kcm_strp_frags_ref()); the message is charged for them too.
 *
 * Return: bytes taken, 0 when @to has no free slot.
 */
static unsigned int kcm_strp_ref_frags(struct kcm_psock *psock,
				       struct sk_buff *to, struct sk_buff *src,
				     unsigned int off, unsigned int len)
{
	unsigned int done = kcm_strp_frags_ref(to, src, off, len);

	kcm_strp_msg_grew(psock, to, done);
	return done;
}

/*
 * Take up to @len bytes of @src from @off on into the large message by
 * reference: into the free fragment slots of its last skb, or of a new
 * empty skb chained after it.
 *
 * Return: bytes taken; 0 with *@err = -ENOMEM when no skb could be had.
 */
static unsigned int kcm_strp_ref(struct kcm_psock *psock, struct sk_buff *src,
				 unsigned int off, unsigned int len, int *err)
{
	struct sk_buff *piece;
	unsigned int n = 0;

	if (psock->strp.copying)
		kcm_strp_chunk_seal(psock);
	if (psock->strp.msg)
		n = kcm_strp_ref_frags(psock, psock->strp.chunk, src, off, len);
	if (n)
		return n;

	piece = alloc_skb(0, psock->strp.gfp | __GFP_NOWARN);
	if (!piece) {
		kcm_stat_add(&psock->stats.rx_mem_fail, 1);
		*err = -ENOMEM;
		return 0;
	}
	kcm_strp_msg_append(psock, piece);
	return kcm_strp_ref_frags(psock, piece, src, off, len);
}

/*
 * Start a large message with the @len bytes at the start of the framing
 * buffer as the linear part of its first skb, carved like a small
 * message; what follows is referenced or copied behind them.
 *
 * Return: 0 or -ENOMEM.
 */
static int kcm_strp_large_head(struct kcm_psock *psock, unsigned int len)
{
	struct sk_buff *head = kcm_frag_skb(&psock->strp.frag, len,
					    psock->strp.gfp | __GFP_NOWARN);

	if (!head) {
		kcm_stat_add(&psock->stats.rx_mem_fail, 1);
		return -ENOMEM;
	}
	skb_put_data(head, psock->strp.buf->data, len);
	kcm_strp_msg_append(psock, head);
	psock->strp.copying = false;
	return 0;
}

/*
 * Of @len bytes of @src from @off on that cannot be referenced, those to
 * copy now: those in its linear data alone, as the bytes in its pages
 * after them may be referenced.
 *
 * Context: any.
 */
static unsigned int kcm_strp_copy_len(const struct sk_buff *src,
				      unsigned int off, unsigned int len)
{
	if (off < skb_headlen(src))
		return min(len, skb_headlen(src) - off);
	return len;
}

/*
 * May @len bytes that cannot be referenced be copied into the fragment
 * cache rather than into a chunk?  A chunk takes new pages, zeroed with
 * init_on_alloc, for a few bytes: the piece of a message TCP cut at an
 * skb boundary.  A run of such pieces (small segments) goes to chunks.
 */
static bool kcm_strp_may_copy_frag(struct kcm_psock *psock, unsigned int len)
{
	return psock->strp.msg && !psock->strp.copying && len < KCM_STRP_REF_MIN &&
	       psock->strp.frag_copies < KCM_STRP_FRAG_COPIES &&
	       skb_shinfo(psock->strp.chunk)->nr_frags < MAX_SKB_FRAGS;
}

/*
 * Copy @len bytes of @src from @off on into the psock's fragment cache,
 * as a fragment of the large message's last skb (kcm_strp_may_copy_frag()).
 * It is charged for the bytes copied.
 *
 * Return: 0 or -ENOMEM.
 */
static int kcm_strp_copy_frag(struct kcm_psock *psock, struct sk_buff *src,
			      unsigned int off, unsigned int len)
{
	struct sk_buff *to = psock->strp.chunk;
	struct page *page;
	void *data;

	data = page_frag_alloc(&psock->strp.frag, len,
			       psock->strp.gfp | __GFP_NOWARN);
	if (!data) {
		kcm_stat_add(&psock->stats.rx_mem_fail, 1);
		return -ENOMEM;
	}
	WARN_ON_ONCE(skb_copy_bits(src, off, data, len));
	page = virt_to_head_page(data);
	skb_fill_page_desc(to, skb_shinfo(to)->nr_frags, page,
			   data - page_address(page), len);
	to->len += len;
	to->data_len += len;
	to->truesize += len;
	kcm_strp_msg_grew(psock, to, len);
	psock->strp.frag_copies++;
	return 0;
}

/*
 * Copy up to @len bytes of @src from @off on into the large message: a
 * small piece into the fragment cache, else into its chunk being copied
 * into, or a new one.
 *
 * Return: bytes copied; 0 with *@err = -ENOMEM when no memory could be had.
 */
static unsigned int kcm_strp_copy(struct kcm_psock *psock, struct sk_buff *src,
				  unsigned int off, unsigned int len, int *err)
{
	unsigned int n = kcm_strp_copy_len(src, off, len);

	if (kcm_strp_may_copy_frag(psock, n)) {
		*err = kcm_strp_copy_frag(psock, src, off, n);
		return *err ? 0 : n;
	}
	if (!psock->strp.copying ||
	    psock->strp.chunk_fill == psock->strp.chunk->len) {
		*err = kcm_strp_chunk_add(psock, n);
		if (*err)
			return 0;
	}
	n = min(n, psock->strp.chunk->len - psock->strp.chunk_fill);
	kcm_strp_chunk_copy(psock->strp.chunk, psock->strp.chunk_fill, src, off, n);
	psock->strp.chunk_fill += n;
	return n;
}

/*
 * Take up to @len bytes of @src from @off into the large message: by
 * reference when kcm_strp_may_ref() allows it, else copied into chunks (a
 * small piece into the fragment cache).
 *
 * Return: bytes taken; *@err is set when an allocation failed.
 */
static unsigned int kcm_strp_fill(struct kcm_psock *psock,
				  struct sk_buff *src, unsigned int off,
				unsigned int len, int *err)
{
	unsigned int done = 0, want, n;

	*err = 0;
	while (done < len && psock->strp.msg_fill < psock->strp.msg_len) {
		want = min(len - done, psock->strp.msg_len - psock->strp.msg_fill);
		if (kcm_strp_may_ref(src, off + done, want))
			n = kcm_strp_ref(psock, src, off + done, want, err);
		else
			n = kcm_strp_copy(psock, src, off + done, want, err);
		if (*err)
			break;
		psock->strp.msg_fill += n;
		done += n;
	}
	return done;
}

/* Delivers the large message if whole. */
static void kcm_strp_large_check(struct kcm_psock *psock)
{
	struct sk_buff *msg = psock->strp.msg;

	if (psock->strp.msg_fill < psock->strp.msg_len) {
		kcm_strp_timer_start(psock);
		return;
	}
	psock->strp.msg = NULL;
	psock->strp.chunk = NULL;
	psock->strp.msg_fill = 0;
	psock->strp.copying = false;
	kcm_strp_complete(psock, msg);
}

/* Moves buffered bytes to the large message. */
static int kcm_strp_take_large(struct kcm_psock *psock)
{
	struct sk_buff *buf = psock->strp.buf;
	unsigned int n;
	int err;

	/* A pack holds only bytes that run up to the buffer's data. */
	err = kcm_strp_pack_seal(psock);
	if (err)
		return err;
	psock->strp.last_large = true;
	n = min(buf->len, psock->strp.msg_len - psock->strp.msg_fill);
	if (!psock->strp.msg && n <= KCM_STRP_SMALL) {
		err = kcm_strp_large_head(psock, n);
		if (!err)
			psock->strp.msg_fill = n;
		else
			n = 0;
	} else {
		n = kcm_strp_fill(psock, buf, 0, n, &err);
	}
	__skb_pull(buf, n);
	psock->strp.pack_off = skb_headroom(buf);
	if (psock->strp.msg)
		kcm_strp_large_check(psock);
	return err;
}

/*
 * Frame and deliver every message the framing buffer holds.
 *
 * Return: 0, -EAGAIN when the psock is paused, -ENOMEM to be retried, or
 * an errno that stops the psock.
 */
static int kcm_strp_frame(struct kcm_psock *psock)
{
	struct sk_buff *buf = psock->strp.buf;
	int err = 0;

	while (buf->len) {
		if (READ_ONCE(psock->rx_paused))
			return -EAGAIN;

		if (!psock->strp.msg_len) {
			err = kcm_strp_parse(psock);
			if (err < 0)
				return err;
			if (err == KCM_STRP_RUN)
				continue;
			if (!err) {
				kcm_strp_timer_start(psock);
				break;
			}
		}

		if (psock->strp.msg_len > KCM_STRP_SMALL) {
			err = kcm_strp_take_large(psock);
		} else if (buf->len >= psock->strp.msg_len) {
			psock->strp.last_large = false;
			err = kcm_strp_emit_small(psock);
		} else {
			kcm_strp_timer_start(psock);
			break;
		}
		if (err)
			return err;
	}

	if (!buf->len && !psock->strp.pack_n && buf->data != buf->head &&
	    kcm_strp_buf_private(psock))
		kcm_strp_buf_compact(psock);
	return 0;
}

/*
 * Framing in place.  Small messages that lie whole in the page fragments
 * of the TCP skb being read are framed where they are: the parser runs on
 * the psock's view (strp.view), an skb whose fragments describe, without
 * references, TCP's fragments from the message start on (while the
 * parser reads messages that lie in one fragment its data points into
 * that fragment; for one across fragments its head copies a header's
 * worth); a pack then takes references to TCP's pages.  Only a message
 * that goes on in the next TCP skb, a large one, or one the parser
 * cannot judge yet goes through the framing buffer.
 */

/*
 * The psock's view, allocated with the first bytes framed in place.
 *
 * Return: the view, or NULL: then the framing buffer is used.
 */
static struct sk_buff *kcm_strp_view_get(struct kcm_psock *psock)
{
	if (unlikely(!psock->strp.view))
		psock->strp.view = alloc_skb(KCM_STRP_VIEW_HEAD,
					     psock->strp.gfp | __GFP_NOWARN);
	return psock->strp.view;
}

/*
 * Point @view at @len bytes of @src's page fragments from @off on.  It
 * takes no references: it is used only while @src is, under the lock.
 *
 * Return: the bytes it shows, at most @len.
 */
static unsigned int kcm_strp_view_set(struct sk_buff *view,
				      const struct sk_buff *src,
				    unsigned int off, unsigned int len)
{
	const struct skb_shared_info *sinfo = skb_shinfo(src);
	struct skb_shared_info *vinfo = skb_shinfo(view);
	unsigned int pos = skb_headlen(src), done = 0;
	unsigned int size, skip;
	skb_frag_t *frag;
	int i, nr = 0;

	for (i = 0; i < sinfo->nr_frags && done < len; i++) {
		size = skb_frag_size(&sinfo->frags[i]);
		if (off + done >= pos + size) {
			pos += size;
			continue;
		}
		skip = off + done - pos;
		frag = &vinfo->frags[nr++];
		*frag = sinfo->frags[i];
		skb_frag_off_add(frag, skip);
		skb_frag_size_set(frag, min(size - skip, len - done));
		done += skb_frag_size(frag);
		pos += size;
	}
	vinfo->nr_frags = nr;
	view->len = done;
	view->data_len = done;
	return done;
}

/* @view moves past its first @n bytes. */
static void kcm_strp_view_pull(struct sk_buff *view, unsigned int n)
{
	struct skb_shared_info *vinfo = skb_shinfo(view);
	skb_frag_t *frag = &vinfo->frags[0];

	view->len -= n;
	view->data_len -= n;
	while (n) {
		if (skb_frag_size(frag) > n) {
			skb_frag_off_add(frag, n);
			skb_frag_size_sub(frag, n);
			return;
		}
		n -= skb_frag_size(frag);
		vinfo->nr_frags--;
		memmove(frag, frag + 1, vinfo->nr_frags * sizeof(*frag));
	}
}

/*
 * Copy the first bytes @view shows into its own head, so that a parser's
 * loads of a header read them there rather than through skb_copy_bits()
 * on TCP's fragments: the first fragment then starts after them.
 *
 * Context: @view shows at least one byte.
 * Return: the bytes copied, for kcm_strp_view_unhead().
 */
static unsigned int kcm_strp_view_head(struct sk_buff *view)
{
	skb_frag_t *frag = &skb_shinfo(view)->frags[0];
	void *addr = skb_frag_address_safe(frag);
	unsigned int h;

	if (!addr)
		return 0;
	h = min_t(unsigned int, KCM_STRP_VIEW_HEAD, skb_frag_size(frag));
	memcpy(view->data, addr, h);
	skb_frag_off_add(frag, h);
	skb_frag_size_sub(frag, h);
	view->data_len -= h;
	skb_set_tail_pointer(view, h);
	return h;
}

/* Undoes kcm_strp_view_head(). */
static void kcm_strp_view_unhead(struct sk_buff *view, unsigned int h)
{
	skb_frag_t *frag = &skb_shinfo(view)->frags[0];

	skb_frag_off_add(frag, -(int)h);
	skb_frag_size_add(frag, h);
	view->data_len += h;
	skb_set_tail_pointer(view, 0);
}

/* @view shows nothing (it may be freed). */
static void kcm_strp_view_clear(struct sk_buff *view)
{
	skb_shinfo(view)->nr_frags = 0;
	view->len = 0;
	view->data_len = 0;
}

/*
 * Is @ret the length of a small whole message of at most @have bytes,
 * one a socket could take (at most @limit, the TCP socket's receive
 * buffer)?
 *
 * Context: any.
 */
static bool kcm_strp_view_whole(int ret, unsigned int have, int limit)
{
	return ret > 0 && ret <= KCM_STRP_SMALL && ret <= have && ret <= limit;
}

/*
 * Parse the small whole messages that lie in @view's first fragment,
 * while the pack has room.  The parser reads the fragment where it is,
 * as linear data: the view's data points into it, so a header costs no
 * copy and no walk of fragments.  The first message that does not lie
 * whole in the fragment (or that the parser does not judge from it)
 * stops it; the view is left as it was.  @limit: see kcm_strp_view_whole().
 *
 * Context: in the parser's section.
 * Return: the bytes of the messages found (added to rx_pack_lens).
 */
static unsigned int kcm_strp_view_parse_frag(struct kcm_psock *psock,
					     struct sk_buff *view,
					   unsigned int *n, int limit)
{
	struct skb_shared_info *vinfo = skb_shinfo(view);
	unsigned int size = skb_frag_size(&vinfo->frags[0]);
	u8 *addr = skb_frag_address_safe(&vinfo->frags[0]);
	unsigned int len = view->len, data_len = view->data_len;
	unsigned int nr = vinfo->nr_frags, done = 0;
	u8 *data = view->data;
	int ret;

	if (!addr)
		return 0;
	vinfo->nr_frags = 0;
	view->data_len = 0;
	while (*n < KCM_RX_PACK_MAX && done < size) {
		view->data = addr + done;
		view->len = size - done;
		ret = kcm_parse_locked(psock, view, false);
		if (!kcm_strp_view_whole(ret, size - done, limit))
			break;
		psock->strp.pack_keys[*n] = kcm_steer_key(psock, view, ret);
		psock->strp.pack_lens[(*n)++] = ret;
		done += ret;
	}
	view->data = data;
	view->len = len;
	view->data_len = data_len;
	vinfo->nr_frags = nr;
	return done;
}

/*
 * Parse the message at the start of @view over all the fragments it
 * shows, its first bytes copied into the view's own head for a header's
 * loads: a message that goes on in the next fragment.  A small whole one
 * (see kcm_strp_view_whole(); @limit) gets its key, in *@key.
 *
 * Context: in the parser's section.
 * Return: the parser's answer.
 */
static int kcm_strp_view_parse_one(struct kcm_psock *psock,
				   struct sk_buff *view, int limit, u32 *key)
{
	unsigned int head = kcm_strp_view_head(view);
	int ret;

	ret = kcm_parse_locked(psock, view, false);
	if (kcm_strp_view_whole(ret, view->len, limit))
		*key = kcm_steer_key(psock, view, ret);
	kcm_strp_view_unhead(view, head);
	return ret;
}

/*
 * Parse small whole messages at the start of @view, at most
 * KCM_RX_PACK_MAX, their lengths into rx_pack_lens, under one parser
 * section (kcm_strp_parse()): those in one fragment where they lie
 * (kcm_strp_view_parse_frag()), one across fragments over the whole view.
 * The first other answer stops it: the framing buffer gets those bytes
 * and judges it.
 *
 * Context: no message waits to be packed.
 * Return: the number of messages, their bytes in *@bytes.
 */
static unsigned int kcm_strp_view_parse(struct kcm_psock *psock,
					struct sk_buff *view,
				      unsigned int *bytes)
{
	int limit = READ_ONCE(psock->sk->sk_rcvbuf);
	unsigned int n = 0, size, done;
	int ret;

	*bytes = 0;
	kcm_parse_lock(psock);
	while (n < KCM_RX_PACK_MAX && view->len) {
		size = skb_frag_size(&skb_shinfo(view)->frags[0]);
		done = kcm_strp_view_parse_frag(psock, view, &n, limit);
		*bytes += done;
		kcm_strp_view_pull(view, done);
		/* The fragment is used up: the next one, where they lie. */
		if (done == size)
			continue;
		if (n == KCM_RX_PACK_MAX || !view->len)
			break;
		ret = kcm_strp_view_parse_one(psock, view, limit,
					      &psock->strp.pack_keys[n]);
		if (!kcm_strp_view_whole(ret, view->len, limit))
			break;
		psock->strp.pack_lens[n++] = ret;
		*bytes += ret;
		kcm_strp_view_pull(view, ret);
	}
	kcm_parse_unlock(psock);
	return n;
}

/*
 * The part of @src's truesize its @bytes of data stand for, at least
 * @bytes: a pack referencing them is charged what TCP was, so a message
 * in a small segment of a large page costs its share of the page.
 */
static unsigned int kcm_strp_share(const struct sk_buff *src,
				   unsigned int bytes)
{
	if (src->truesize <= src->len)
		return bytes;
	return div_u64((u64)bytes * src->truesize, src->len);
}

/*
 * Hand over the @n messages of rx_pack_lens, @bytes of @src from @off on,
 * as a pack referencing @src's pages.
 *
 * Return: 0, or -ENOMEM with nothing framed.
 */
static int kcm_strp_view_seal(struct kcm_psock *psock, struct sk_buff *src,
			      unsigned int off, unsigned int bytes,
			    unsigned int n)
{
	unsigned int i, keys_off;
	struct sk_buff *skb;

	skb = kcm_strp_pack_alloc(psock, n, &keys_off);
	if (!skb)
		return -ENOMEM;
	/* A view has at most MAX_SKB_FRAGS fragments: all of them fit. */
	WARN_ON_ONCE(kcm_strp_frags_ref(skb, src, off, bytes) != bytes);
	skb->truesize += kcm_strp_share(src, bytes) - bytes;
	psock->strp.last_large = false;
	kcm_stat_add(&psock->stats.rx_in_place, n);
	if (trace_kcm_rx_framed_enabled())
		for (i = 0; i < n; i++)
			trace_kcm_rx_framed(psock, psock->strp.pack_lens[i]);
	kcm_strp_framed_n(psock, n, bytes);
	kcm_strp_emit(psock, skb, n, psock->strp.pack_keys[0], keys_off);
	return 0;
}

/*
 * Frame in place the small whole messages at the start of @len bytes of
 * @src from @off on (kcm_strp_may_ref()), a pack at a time.
 *
 * Context: the framing buffer is empty and no
 * message waits to be packed.
 * Return: the bytes framed; *@err is -ENOMEM when a pack could not be had.
 */
static unsigned int kcm_strp_in_place(struct kcm_psock *psock,
				      struct sk_buff *src, unsigned int off,
				    unsigned int len, int *err)
{
	struct sk_buff *view = kcm_strp_view_get(psock);
	unsigned int done = 0, bytes, n;

	if (!view)
		return 0;
	len = kcm_strp_view_set(view, src, off, len);
	while (done < len && !READ_ONCE(psock->rx_paused)) {
		n = kcm_strp_view_parse(psock, view, &bytes);
		if (!n)
			break;
		*err = kcm_strp_view_seal(psock, src, off + done, bytes, n);
		if (*err)
			break;
		done += bytes;
		if (n < KCM_RX_PACK_MAX)
			break;
	}
	kcm_strp_view_clear(view);
	return done;
}

/*
 * How many bytes to copy into the framing buffer when what follows could
 * be framed in place: what the message started there still needs, or a
 * header's worth while its length is unknown.
 */
static unsigned int kcm_strp_buf_need(struct kcm_psock *psock)
{
	unsigned int have = psock->strp.buf->len;

	if (psock->strp.msg_len > have)
		return psock->strp.msg_len - have;
	return KCM_STRP_STEP;
}

/*
 * What the psock holds, which its TCP socket is charged for: its framing
 * buffers, the large message being assembled, the page its small heads
 * are carved from and its messages waiting on the mux (rx_held, which
 * delivery changes under the mux lock).
 */
static unsigned int kcm_strp_held(struct kcm_psock *psock)
{
	struct kcm_strp *strp = &psock->strp;

	return (strp->buf ? strp->buf->truesize : 0) + strp->spares_size +
	       (strp->msg ? strp->msg->truesize : 0) +
	       (kcm_frag_cache_has_page(&strp->frag) ?
		PAGE_FRAG_CACHE_MAX_SIZE : 0) +
	       READ_ONCE(psock->rx_held);
}

/*
 * Charge the TCP socket for what the psock holds now (kcm_mem.c).  When
 * its memory refuses, the psock reads nothing more until the charge
 * goes through: its work item makes the memory cgroup reclaim and tries
 * again at once, then a while later each time; TCP's window closes on
 * the peer meanwhile.
 *
 * Return: true when the charge covers what the psock holds.
 */
static bool kcm_strp_mem_sync(struct kcm_psock *psock)
{
	struct kcm_strp *strp = &psock->strp;
	unsigned long delay = KCM_STRP_RETRY;

	if (kcm_mem_psock_sync(psock, kcm_strp_held(psock))) {
		if (unlikely(strp->mem_short))
			WRITE_ONCE(strp->mem_short, false);
		return true;
	}
	if (!strp->mem_short) {
		WRITE_ONCE(strp->mem_short, true);
		kcm_stat_add(&psock->stats.rx_mem_fail, 1);
		delay = 0;
	}
	queue_delayed_work(system_wq, &strp->work, delay);
	return false;
}

/*
 * Has the psock taken so much since it was last charged that it must be
 * charged before it reads on?  Then it is, and false is returned when
 * that failed.
 */
static bool kcm_strp_mem_ok(struct kcm_psock *psock)
{
	if (kcm_strp_held(psock) <
	    READ_ONCE(psock->strp.charged) + KCM_STRP_MEM_STEP)
		return true;
	return kcm_strp_mem_sync(psock);
}

/*
 * tcp_read_sock() actor: take bytes into the large message being
 * assembled or into the framing buffer, and frame them.
 */
static int kcm_strp_actor(read_descriptor_t *desc, struct sk_buff *skb,
			  unsigned int offset, size_t len)
{
	struct kcm_psock *psock = desc->arg.data;
	unsigned int done = 0, n;
	struct sk_buff *buf;
	int err = 0;

	while (done < len) {
		buf = psock->strp.buf;
		if (READ_ONCE(psock->rx_paused) || !kcm_strp_mem_ok(psock)) {
			err = -EAGAIN;
			break;
		}
		if (psock->strp.msg && !buf->len) {
			done += kcm_strp_fill(psock, skb, offset + done,
					    len - done, &err);
			kcm_strp_large_check(psock);
			if (err)
				break;
			continue;
		}
		if (!buf->len && !psock->strp.msg_len &&
		    kcm_strp_may_ref(skb, offset + done, len - done)) {
			err = kcm_strp_pack_seal(psock);
			if (err)
				break;
			done += kcm_strp_in_place(psock, skb, offset + done,
						len - done, &err);
			if (err || done == len)
				break;
			if (READ_ONCE(psock->rx_paused))
				continue;
		}
		err = kcm_strp_buf_room(psock);
		if (err)
			break;
		/* kcm_strp_buf_room() may have replaced it. */
		buf = psock->strp.buf;
		n = min_t(size_t, len - done, skb_tailroom(buf));
		/* After a large message, copy only what a header needs. */
		if (psock->strp.last_large && !psock->strp.msg_len)
			n = min_t(unsigned int, n, KCM_STRP_STEP);
		/* Copy what the next message needs: the rest may not. */
		else if (kcm_strp_may_ref(skb, offset + done, len - done))
			n = min(n, kcm_strp_buf_need(psock));
		WARN_ON_ONCE(skb_copy_bits(skb, offset + done,
					   skb_put(buf, n), n));
		done += n;
		err = kcm_strp_frame(psock);
		if (err)
			break;
	}

	if (err) {
		desc->error = err;
		desc->count = 0;
	}
	return done;
}

/* What to do after a read stopped. */
static void kcm_strp_read_done(struct kcm_psock *psock, int err)
{
	switch (err) {
	case 0:
	case -EAGAIN:
		/* Paused: the mux kicks the work item when it has drained. */
		break;
	case -ENOMEM:
		queue_delayed_work(system_wq, &psock->strp.work,
				   psock->strp.gfp == GFP_ATOMIC ? 0 :
				   KCM_STRP_RETRY);
		break;
	default:
		kcm_strp_fail(psock, err);
	}
}

/*
 * A read from TCP stopped with @err: the messages framed go out, packed
 * and delivered even when framing stopped, then the verdict, and the TCP
 * socket is charged for what the psock kept.
 */
static void kcm_strp_read_end(struct kcm_psock *psock, int err)
{
	if (kcm_strp_pack_seal(psock) && (!err || err == -EAGAIN))
		err = -ENOMEM;
	kcm_rx_deliver(psock, &psock->strp.batch);
	kcm_strp_read_done(psock, err);
	kcm_strp_mem_sync(psock);
}

/*
 * Let the coming read acknowledge the bytes it drains.  TCP schedules an
 * ACK for each segment before it calls sk_data_ready, and decides after
 * that call whether to send it now or on its delayed-ACK timer.  A read
 * that empties the receive queue (tcp_cleanup_rbuf()) sends it at once
 * only after a segment TCP took for the end of a write, and many are not
 * taken so.  KCM reads in sk_data_ready: the bytes are gone, the ACK
 * waits, and a peer writing a few KB at a time with Nagle on holds its
 * next write until the timer, 40 ms or more (measured: one write in
 * twenty, 25k messages/s on one connection).  With the mark, the read
 * sends the ACK when it empties the queue, as does a read from the work
 * item after TCP chose to wait.  The mark is the one TCP_QUICKACK sets; an
 * interactive (ping-pong) connection keeps its ACKs delayed, for its
 * replies to carry.
 */
static void kcm_strp_ack_drained(struct sock *csk)
{
	struct inet_connection_sock *icsk = inet_csk(csk);

	if (inet_csk_ack_scheduled(csk))
		icsk->icsk_ack.pending |= ICSK_ACK_PUSHED;
}

/*
 * Hand the actor what TCP, or kTLS (@io, with lock_sock()), has received.
 *
 * Return: 0, or the error that stopped the read.
 */
static int kcm_strp_read_sock(struct kcm_psock *psock, int io)
{
	read_descriptor_t desc = { .arg.data = psock, .count = 1 };
	int ret;

	if (io == KCM_IO_TCP) {
		kcm_strp_ack_drained(psock->sk);
		tcp_read_sock(psock->sk, &desc, kcm_strp_actor);
		return desc.error;
	}
	ret = kcm_tls_read_sock(psock->sk, &desc, kcm_strp_actor);
	if (desc.error)
		return desc.error;
	/* No record ready, or the end of the stream: nothing to say. */
	return ret < 0 && ret != -EAGAIN ? ret : 0;
}

/*
 * Frame what the TCP socket has received: the entry point of framing,
 * from the TCP callback (softirq, the socket not owned by a task, @gfp
 * atomic) and from the work item (lock_sock(), GFP_KERNEL).
 */
static void kcm_strp_read(struct kcm_psock *psock, gfp_t gfp)
{
	int err, io;

	lockdep_assert(lockdep_sock_is_held(psock->sk));
	if (!kcm_strp_mem_sync(psock) || READ_ONCE(psock->rx_stopped))
		return;
	io = kcm_psock_io(psock, false);
	if (io < 0 || io == KCM_IO_WAIT)
		return;
	/* kTLS decrypts with the socket owned: in the work item. */
	if (io == KCM_IO_TLS && gfp != GFP_KERNEL) {
		kcm_strp_kick(psock);
		return;
	}

	psock->strp.gfp = gfp;
	if (kcm_strp_buf_get(psock)) {
		kcm_strp_read_done(psock, -ENOMEM);
		return;
	}
	/* Bytes left over from a pause or a failed allocation come first. */
	err = kcm_strp_frame(psock);
	if (!err)
		err = kcm_strp_read_sock(psock, io);
	kcm_strp_read_end(psock, err);
}

/**
 * kcm_psock_data_ready() - sk_data_ready of an attached TCP socket, or
 *	what kTLS calls when a record is ready (kcm_tls.c)
 * @csk: the TCP socket
 *
 * Context: softirq with the socket spinlock held, or process context when
 * a task owns the socket (then framing is left to the work item, as it
 * is for a socket with a ULP).
 */
void kcm_psock_data_ready(struct sock *csk)
{
	struct kcm_psock *psock;

	read_lock_bh(&csk->sk_callback_lock);
	psock = kcm_psock_of(csk);
	if (likely(psock) && !READ_ONCE(psock->rx_stopped) &&
	    !READ_ONCE(psock->rx_paused)) {
		if (sock_owned_by_user_nocheck(csk) ||
		    inet_csk(csk)->icsk_ulp_ops)
			kcm_strp_kick(psock);
		else
			kcm_strp_read(psock, GFP_ATOMIC);
	}
	read_unlock_bh(&csk->sk_callback_lock);
}

/* Context: process context (workqueue). */
static void kcm_strp_work(struct work_struct *work)
{
	struct kcm_psock *psock = container_of(to_delayed_work(work),
					       struct kcm_psock, strp.work);
	struct sock *csk = psock->sk;

	if (READ_ONCE(psock->strp.mem_short))
		kcm_mem_reclaim(csk, KCM_STRP_MEM_STEP);
	lock_sock(csk);
	kcm_strp_read(psock, GFP_KERNEL);
	release_sock(csk);
}

/* Context: process context (workqueue).  The assembly timeout. */
static void kcm_strp_timer_work(struct work_struct *work)
{
	struct kcm_psock *psock = container_of(to_delayed_work(work),
					       struct kcm_psock,
					       strp.timer_work);
	struct sock *csk = psock->sk;
	unsigned long deadline;
	long timeo;

	lock_sock(csk);
	timeo = READ_ONCE(csk->sk_rcvtimeo);
	if (READ_ONCE(psock->rx_stopped) || !psock->strp.timing ||
	    timeo == MAX_SCHEDULE_TIMEOUT)
		goto out;

	deadline = psock->strp.start + timeo;
	if (time_after_eq(jiffies, deadline)) {
		kcm_stat_add(&psock->stats.rx_timeouts, 1);
		trace_kcm_rx_timeout(psock);
		kcm_strp_fail(psock, -ETIMEDOUT);
	} else {
		mod_delayed_work(system_wq, &psock->strp.timer_work,
				 deadline - jiffies);
	}
out:
	release_sock(csk);
}

/*
 * Context: process context (workqueue).  See kcm_strp_spares_arm(); a
 * stopped psock frames nothing more and trims as a quiet one.
 */
static void kcm_strp_trim_work(struct work_struct *work)
{
	struct kcm_psock *psock = container_of(to_delayed_work(work),
					       struct kcm_psock,
					       strp.trim_work);
	struct sock *csk = psock->sk;
	unsigned int low;

	lock_sock(csk);
	/* UINT_MAX, no buffer replaced since the last look: no bound. */
	low = READ_ONCE(psock->rx_stopped) ? UINT_MAX : psock->strp.spares_low;
	psock->strp.spares_low = UINT_MAX;
	kcm_strp_spares_trim(psock, low ? low - 1 : 0);
	kcm_strp_spares_arm(psock);
	kcm_strp_mem_sync(psock);
	release_sock(csk);
}

/**
 * kcm_strp_kick() - frame in process context soon
 * @psock: a psock that may have bytes to read
 *
 * Context: any.
 */
void kcm_strp_kick(struct kcm_psock *psock)
{
	queue_delayed_work(system_wq, &psock->strp.work, 0);
}

/**
 * kcm_strp_init() - set up the receive side of a new psock
 * @psock: a psock not attached yet
 *
 * Its framing buffer comes with its first bytes (kcm_strp_buf_get()).
 *
 * Context: any.
 */
void kcm_strp_init(struct kcm_psock *psock)
{
	__skb_queue_head_init(&psock->strp.batch);
	__skb_queue_head_init(&psock->strp.spares);
	psock->strp.spares_low = UINT_MAX;
	INIT_DELAYED_WORK(&psock->strp.work, kcm_strp_work);
	INIT_DELAYED_WORK(&psock->strp.timer_work, kcm_strp_timer_work);
	INIT_DELAYED_WORK(&psock->strp.trim_work, kcm_strp_trim_work);
}

/**
 * kcm_strp_flush() - drop the receive state of an unattached psock
 * @psock: a psock whose callbacks are restored and whose work is cancelled
 *
 * A half-assembled message is lost and counted as aborted.
 *
 * Context: lock_sock() of the TCP socket held.
 */
void kcm_strp_flush(struct kcm_psock *psock)
{
	struct sk_buff *spare;

	sock_owned_by_me(psock->sk);
	/* Whole messages are the application's, even now. */
	psock->strp.gfp = GFP_KERNEL;
	if (psock->strp.buf && kcm_strp_pack_seal(psock))
		kcm_stat_add(&psock->stats.rx_aborts, 1);
	kcm_rx_deliver(psock, &psock->strp.batch);
	if (psock->strp.msg || (psock->strp.buf && psock->strp.buf->len))
		kcm_stat_add(&psock->stats.rx_aborts, 1);

	kfree_skb(psock->strp.msg);
	psock->strp.msg = NULL;
	psock->strp.chunk = NULL;
	kfree_skb(psock->strp.buf);
	psock->strp.buf = NULL;
	consume_skb(psock->strp.view);
	psock->strp.view = NULL;
	psock->strp.spares_size = 0;
	while ((spare = __skb_dequeue(&psock->strp.spares)))
		consume_skb(spare);
	psock->strp.timing = false;
	kcm_frag_cache_drain(&psock->strp.frag);
	/* Its held messages were forgotten (__kcm_mux_psock_gone()). */
	WARN_ON_ONCE(!kcm_mem_psock_sync(psock, 0));
}

#if IS_ENABLED(CONFIG_AF_KCM_KUNIT_TEST)
#include "kcm_strp_test.c"
#endif
