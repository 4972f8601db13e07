// SPDX-License-Identifier: GPL-2.0-only
/*
 * Kernel Connection Multiplexor: the receive path.
 *
 * Framing
 * -------
 * Bytes are taken from an attached TCP socket with tcp_read_sock().  Small
 * messages that lie whole in the page fragments of the TCP skb being read
 * are framed in place: the parser runs on the psock's view (rx_view), an
 * skb whose fragments describe TCP's from the message start on, and a
 * pack of them (below) references TCP's pages, so such a message is
 * copied once, to the reader.  For messages that lie in one fragment the
 * view's data points into it, as linear data; for one that goes on into
 * the next, the view's head holds a copy of its first KCM_RX_VIEW_HEAD
 * bytes, for the loads of a header.  The rest (bytes in TCP's
 * linear data or in pages a sender may still change, a message that goes
 * on in the next TCP skb, one the parser cannot judge yet, and the start
 * of a large one) is copied into the psock's framing buffer (rx_skb), a
 * private linear skb whose data always starts at the first byte of the
 * current message; a buffer that holds part of a message gets only what
 * that message needs, so the one after it is framed in place again.
 * Either way the parser sees the message at offset 0 and skb->len counts
 * the bytes received from there on.  It runs again only when it asked for
 * more and more has arrived.
 *
 * Small messages (up to KCM_RX_SMALL bytes) stay where they are, in TCP's
 * pages or in the buffer.  Those framed one after another go out together
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
 * frag_list of rx_msg: pieces that reference the page fragments of TCP's
 * own skbs (no copy; each is charged for the bytes it references), or, for
 * bytes in TCP's linear data, in small segments or in pages a sender may
 * still change, page-backed chunks the bytes are copied into.  After a
 * large message only KCM_RX_STEP bytes at a time go through rx_skb, so the
 * next one is not copied twice.  A small message whose first bytes arrived
 * in the buffer's last room is moved with the unframed rest when the
 * buffer is replaced: only those bytes are copied a third time.
 *
 * Framing runs under the TCP socket's lock: in the data_ready softirq when
 * the socket is not owned by a task, otherwise in rx_work.
 *
 * Delivery
 * --------
 * A complete message (or pack) goes to the next KCM socket in the mux's
 * rx_ready rotation whose receive queue has room; a socket without room
 * leaves the rotation and rejoins when its reader makes room.  When no
 * socket can take a message it waits on the mux's rx_hold queue.  Each
 * psock may have up to its TCP socket's receive buffer of messages held;
 * beyond that it stops reading (the peer sees TCP flow control) until
 * half of it has been delivered.  Other connections of the mux carry on.
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
#define KCM_RX_BUF		(16 * 1024 - \
				 SKB_DATA_ALIGN(sizeof(struct skb_shared_info)))
/* Framing buffers kept for reuse once no pack references them. */
#define KCM_RX_SPARES		1024
/* Unreferenced spares counted at most per replacement. */
#define KCM_RX_SPARES_COUNT	64
/* How often a psock with spares checks whether it still uses them. */
#define KCM_RX_TRIM_DELAY	HZ
/* Messages up to this size are cut from the framing buffer. */
#define KCM_RX_SMALL		2048
/* Bytes per skb of a large message, where it is copied. */
#define KCM_RX_CHUNK		(16U * PAGE_SIZE)
/* TCP's pages are referenced only where at least this many bytes lie. */
#define KCM_RX_REF_MIN		4096U
/* Small pieces of a large message copied into the fragment cache, at most. */
#define KCM_RX_FRAG_COPIES	4
/* Bytes framed at a time when the last message was a large one. */
#define KCM_RX_STEP		512U
/* Bytes of a message's start the parser reads from the view's own head. */
#define KCM_RX_VIEW_HEAD	16U
/* Retry delay after a failed allocation in process context. */
#define KCM_RX_RETRY		(HZ / 10)
/* Messages framed before they are delivered together. */
#define KCM_RX_BATCH		32
/* Receiving sockets remembered per batch, to wake each once. */
#define KCM_RX_WAKE_MAX		8
/* kcm_rx_parse(): small messages were framed, nothing more is parsed. */
#define KCM_RX_RUN		2
/* Lengths and ids of a batched read kept on the stack (KCM_RECV_BATCH). */
#define KCM_RECV_STACK		32
/* Most entries of a socket's kept array for them (32 KB). */
#define KCM_RECV_KEEP		4096

/* ---- delivery to KCM sockets ---------------------------------------- */

/* Context: any; reads the receive queue's memory locklessly. */
static bool kcm_rx_has_room(struct kcm_sock *kcm)
{
	struct sock *sk = &kcm->sk;

	return atomic_read(&sk->sk_rmem_alloc) < READ_ONCE(sk->sk_rcvbuf);
}

/*
 * May a socket out of the rotation rejoin it?  Once full, it waits until
 * its reader has drained half of its buffer (or all of it), so it takes
 * the next messages in a batch rather than one per recvmsg().
 *
 * Context: any; reads the receive queue's memory locklessly.
 */
static bool kcm_rx_may_join(struct kcm_sock *kcm)
{
	struct sock *sk = &kcm->sk;

	if (skb_queue_empty_lockless(&sk->sk_receive_queue))
		return kcm_rx_has_room(kcm);
	return atomic_read(&sk->sk_rmem_alloc) <= READ_ONCE(sk->sk_rcvbuf) / 2;
}

/* Context: mux->lock held. */
static struct kcm_sock *__kcm_rx_pick(struct kcm_mux *mux)
{
	struct kcm_sock *kcm, *tmp;

	lockdep_assert_held(&mux->lock);
	list_for_each_entry_safe(kcm, tmp, &mux->rx_ready, rx_node) {
		if (kcm_rx_has_room(kcm)) {
			list_move_tail(&kcm->rx_node, &mux->rx_ready);
			return kcm;
		}
		__kcm_rx_remove(kcm);
	}
	return NULL;
}

/* KCM sockets to wake once a batch of messages is delivered. */
struct kcm_rx_wake {
	struct kcm_sock *socks[KCM_RX_WAKE_MAX];
	unsigned int n;
};

/* Context: any.  Returns false when @kcm must be woken right away. */
static bool kcm_rx_wake_later(struct kcm_rx_wake *wake, struct kcm_sock *kcm)
{
	unsigned int i;

	if (!wake)
		return false;
	for (i = 0; i < wake->n; i++)
		if (wake->socks[i] == kcm)
			return true;
	if (wake->n == KCM_RX_WAKE_MAX)
		return false;
	wake->socks[wake->n++] = kcm;
	return true;
}

/* Context: mux->lock held, which keeps the sockets alive. */
static void __kcm_rx_wake_all(struct kcm_rx_wake *wake)
{
	unsigned int i;

	for (i = 0; i < wake->n; i++)
		wake->socks[i]->sk.sk_data_ready(&wake->socks[i]->sk);
}

/*
 * Context: mux->lock held; @kcm is in the rotation.  The reader is woken
 * now, or with the rest of the batch when @wake is given.
 */
static void __kcm_rx_queue(struct kcm_sock *kcm, struct sk_buff *skb,
			   struct kcm_rx_wake *wake)
{
	struct sock *sk = &kcm->sk;

	lockdep_assert_held(&kcm->mux->lock);
	trace_kcm_rx_deliver(kcm, skb);
	skb_set_owner_r(skb, sk);
	skb_queue_tail(&sk->sk_receive_queue, skb);
	if (!kcm_rx_wake_later(wake, kcm))
		sk->sk_data_ready(sk);
}

/* Context: mux->lock held; @skb was just taken off mux->rx_hold. */
static void __kcm_rx_unhold(struct kcm_mux *mux, struct sk_buff *skb)
{
	struct kcm_psock *psock = kcm_rx_msg(skb)->psock;

	lockdep_assert_held(&mux->lock);
	if (!psock)
		return;

	kcm_rx_msg(skb)->psock = NULL;
	psock->rx_held -= skb->truesize;
	if (psock->rx_paused &&
	    psock->rx_held <= READ_ONCE(psock->sk->sk_rcvbuf) / 2) {
		WRITE_ONCE(psock->rx_paused, false);
		trace_kcm_psock_resume(psock);
		kcm_psock_rx_kick(psock);
	}
}

/* Context: mux->lock held.  Hands held messages to sockets with room. */
static void __kcm_rx_dispatch(struct kcm_mux *mux)
{
	struct kcm_sock *kcm;
	struct sk_buff *skb;

	lockdep_assert_held(&mux->lock);
	while ((skb = skb_peek(&mux->rx_hold))) {
		kcm = __kcm_rx_pick(mux);
		if (!kcm)
			break;
		__skb_unlink(skb, &mux->rx_hold);
		__kcm_rx_unhold(mux, skb);
		__kcm_rx_queue(kcm, skb, NULL);
	}
}

/* Context: mux->lock held.  Parks a message no socket can take now. */
static void __kcm_rx_hold(struct kcm_mux *mux, struct kcm_psock *psock,
			  struct sk_buff *skb)
{
	lockdep_assert_held(&mux->lock);
	/* An unattaching psock has already had its held messages orphaned. */
	if (!READ_ONCE(psock->rx_stopped)) {
		kcm_rx_msg(skb)->psock = psock;
		psock->rx_held += skb->truesize;
		if (!psock->rx_paused &&
		    psock->rx_held > READ_ONCE(psock->sk->sk_rcvbuf)) {
			WRITE_ONCE(psock->rx_paused, true);
			trace_kcm_psock_pause(psock);
			kcm_stat_add(&psock->stats.rx_intr, 1);
		}
	}
	__skb_queue_tail(&mux->rx_hold, skb);
	trace_kcm_rx_hold(psock, skb);
}

/* Context: mux->lock held.  Sockets in the rotation, counted up to @max. */
static unsigned int __kcm_rx_nready(struct kcm_mux *mux, unsigned int max)
{
	struct kcm_sock *kcm;
	unsigned int n = 0;

	lockdep_assert_held(&mux->lock);
	list_for_each_entry(kcm, &mux->rx_ready, rx_node)
		if (++n >= max)
			break;
	return n;
}

/*
 * The first @n messages of the pack @skb as a clone of it, charged their
 * share of its memory; @skb keeps the others.
 *
 * Context: any (atomic allocation); @skb is not charged to a socket yet.
 * Return: the clone, or NULL.
 */
static struct sk_buff *kcm_rx_split_front(struct sk_buff *skb,
					  unsigned int n)
{
	struct kcm_rx_msg *rxm = kcm_rx_msg(skb);
	unsigned int i, bytes = 0, share;
	struct sk_buff *front;

	front = skb_clone(skb, GFP_ATOMIC);
	if (!front)
		return NULL;
	for (i = 0; i < n; i++)
		bytes += kcm_pack_lens(skb)[rxm->next + i];
	share = skb->truesize * n / kcm_rx_left(skb);
	kcm_rx_msg(front)->nmsgs = rxm->next + n;
	front->truesize = share;
	skb->truesize -= share;
	rxm->pos += bytes;
	rxm->next += n;
	return front;
}

/*
 * Share the messages of a pack among the sockets of the rotation, a run
 * of them to each, as one message to each in turn would; the last run
 * is left in @skb for the caller to deliver.
 *
 * Context: mux->lock held, nothing held on the mux.
 */
static void __kcm_rx_spread(struct kcm_mux *mux, struct sk_buff *skb,
			    struct kcm_rx_wake *wake)
{
	unsigned int parts = __kcm_rx_nready(mux, kcm_rx_left(skb));
	struct sk_buff *front;
	struct kcm_sock *kcm;

	lockdep_assert_held(&mux->lock);
	for (; parts > 1; parts--) {
		kcm = __kcm_rx_pick(mux);
		if (!kcm)
			return;
		front = kcm_rx_split_front(skb, kcm_rx_left(skb) / parts);
		if (!front) {
			/* It still gets the whole pack next. */
			list_move(&kcm->rx_node, &mux->rx_ready);
			return;
		}
		__kcm_rx_queue(kcm, front, wake);
	}
}

/* Context: mux->lock held.  One framed message or pack goes out or waits. */
static void __kcm_rx_deliver(struct kcm_psock *psock, struct sk_buff *skb,
			     struct kcm_rx_wake *wake)
{
	struct kcm_mux *mux = psock->mux;
	struct kcm_sock *kcm;

	lockdep_assert_held(&mux->lock);
	if (likely(skb_queue_empty(&mux->rx_hold))) {
		if (kcm_rx_left(skb) > 1)
			__kcm_rx_spread(mux, skb, wake);
		kcm = __kcm_rx_pick(mux);
		if (likely(kcm))
			__kcm_rx_queue(kcm, skb, wake);
		else
			__kcm_rx_hold(mux, psock, skb);
	} else {
		__kcm_rx_hold(mux, psock, skb);
		__kcm_rx_dispatch(mux);
	}
}

/*
 * Deliver the messages framed since the last flush: one mux lock and one
 * wake-up per receiving socket for the whole batch.
 *
 * Context: TCP socket lock held; takes mux->lock.
 */
static void kcm_rx_flush_batch(struct kcm_psock *psock)
{
	/* Only its count needs a value (kcmsock.c, "Stack buffers"). */
	struct kcm_rx_wake wake __uninitialized;
	struct kcm_mux *mux = psock->mux;
	struct sk_buff *skb;

	if (skb_queue_empty(&psock->rx_batch))
		return;

	wake.n = 0;
	spin_lock_bh(&mux->lock);
	while ((skb = __skb_dequeue(&psock->rx_batch)))
		__kcm_rx_deliver(psock, skb, &wake);
	__kcm_rx_wake_all(&wake);
	spin_unlock_bh(&mux->lock);
}

/**
 * __kcm_mux_psock_gone() - forget a psock in the messages it has held
 * @mux: its mux
 * @psock: a psock being unattached; it no longer reads
 *
 * Its held messages stay on the mux and are delivered as usual.
 *
 * Context: mux->lock held.
 */
void __kcm_mux_psock_gone(struct kcm_mux *mux, struct kcm_psock *psock)
{
	struct sk_buff *skb;

	lockdep_assert_held(&mux->lock);
	skb_queue_walk(&mux->rx_hold, skb) {
		if (kcm_rx_msg(skb)->psock == psock)
			kcm_rx_msg(skb)->psock = NULL;
	}
	psock->rx_held = 0;
}

/**
 * kcm_mux_rx_purge() - drop the messages of a dying mux
 * @mux: a mux without KCM sockets or psocks
 *
 * Context: process context.
 */
void kcm_mux_rx_purge(struct kcm_mux *mux)
{
	struct sk_buff *skb;

	spin_lock_bh(&mux->lock);
	skb_queue_walk(&mux->rx_hold, skb)
		mux->mstats.rx_ready_drops += kcm_rx_left(skb);
	__skb_queue_purge(&mux->rx_hold);
	spin_unlock_bh(&mux->lock);
}

/* ---- the receive rotation of KCM sockets ---------------------------- */

/**
 * __kcm_rx_join() - put a KCM socket in its mux's receive rotation
 * @kcm: a member socket with receiving enabled
 *
 * Held messages are handed out at once.
 *
 * Context: mux->lock held.
 */
void __kcm_rx_join(struct kcm_sock *kcm)
{
	struct kcm_mux *mux = kcm->mux;

	lockdep_assert_held(&mux->lock);
	if (kcm->rx_ready || kcm->rx_disabled || !kcm_rx_may_join(kcm))
		return;

	list_add_tail(&kcm->rx_node, &mux->rx_ready);
	WRITE_ONCE(kcm->rx_ready, true);
	__kcm_rx_dispatch(mux);
}

/**
 * __kcm_rx_remove() - take a KCM socket out of the receive rotation
 * @kcm: a member socket
 *
 * Context: mux->lock held.
 */
void __kcm_rx_remove(struct kcm_sock *kcm)
{
	lockdep_assert_held(&kcm->mux->lock);
	if (!kcm->rx_ready)
		return;

	list_del_init(&kcm->rx_node);
	WRITE_ONCE(kcm->rx_ready, false);
}

/**
 * kcm_rx_sock_join() - let a socket receive again once it has room
 * @kcm: a member socket
 *
 * Context: process context; takes mux->lock.
 */
void kcm_rx_sock_join(struct kcm_sock *kcm)
{
	struct kcm_mux *mux = kcm->mux;

	if (READ_ONCE(kcm->rx_ready) || READ_ONCE(kcm->rx_disabled) ||
	    !kcm_rx_may_join(kcm))
		return;

	spin_lock_bh(&mux->lock);
	__kcm_rx_join(kcm);
	spin_unlock_bh(&mux->lock);
}

/*
 * The messages of a pack after its current one, as a clone of it that
 * can be queued on its own; @skb keeps only its current message.
 *
 * Context: any (atomic allocation).
 * Return: the clone, or NULL when there is nothing after the current
 * message or no memory (then @skb keeps them all).
 */
static struct sk_buff *kcm_rx_split_rest(struct sk_buff *skb)
{
	struct kcm_rx_msg *rxm = kcm_rx_msg(skb), *rest_rxm;
	struct sk_buff *rest;

	if (kcm_rx_left(skb) == 1)
		return NULL;
	rest = skb_clone(skb, GFP_ATOMIC);
	if (!rest)
		return NULL;
	rest_rxm = kcm_rx_msg(rest);
	rest_rxm->pos = rxm->pos + kcm_rx_cur_len(skb);
	rest_rxm->next = rxm->next + 1;
	rest_rxm->offset = 0;
	rxm->nmsgs = rxm->next + 1;
	return rest;
}

/*
 * A closing SEQPACKET socket had started reading the current message of
 * @skb: that message is dropped, and the skb is returned if messages are
 * left in it, or freed.
 *
 * Context: mux->lock held; @skb is off every queue.
 */
static struct sk_buff *__kcm_rx_drop_partial(struct kcm_mux *mux,
					     struct sk_buff *skb)
{
	struct kcm_rx_msg *rxm = kcm_rx_msg(skb);

	lockdep_assert_held(&mux->lock);
	mux->mstats.rx_ready_drops++;
	if (kcm_rx_left(skb) == 1) {
		kfree_skb(skb);
		return NULL;
	}
	rxm->pos += kcm_rx_cur_len(skb);
	rxm->next++;
	rxm->offset = 0;
	return skb;
}

/*
 * Move the unread messages of @kcm back to the mux, ahead of the messages
 * waiting there, and hand them to other sockets.  A message a SEQPACKET
 * reader has started stays with it when @keep_partial; the messages
 * packed after it move on.
 *
 * Context: lock_sock(kcm) and mux->lock held.
 */
static void __kcm_rx_requeue(struct kcm_sock *kcm, bool keep_partial)
{
	struct sk_buff_head *queue = &kcm->sk.sk_receive_queue;
	struct kcm_mux *mux = kcm->mux;
	struct sk_buff *skb, *partial = NULL, *rest = NULL;
	struct sk_buff_head moved;
	unsigned long flags;

	sock_owned_by_me(&kcm->sk);
	lockdep_assert_held(&mux->lock);
	__kcm_rx_remove(kcm);

	__skb_queue_head_init(&moved);
	spin_lock_irqsave(&queue->lock, flags);
	skb = skb_peek(queue);
	if (skb && kcm_rx_msg(skb)->offset) {
		partial = skb;
		__skb_unlink(skb, queue);
	}
	skb_queue_splice_init(queue, &moved);
	if (partial && keep_partial) {
		rest = kcm_rx_split_rest(partial);
		__skb_queue_head(queue, partial);
	}
	spin_unlock_irqrestore(&queue->lock, flags);

	if (partial && !keep_partial)
		rest = __kcm_rx_drop_partial(mux, partial);
	if (rest)
		__skb_queue_head(&moved, rest);

	skb_queue_walk(&moved, skb)
		skb_orphan(skb);
	skb_queue_splice(&moved, &mux->rx_hold);
	__kcm_rx_dispatch(mux);
}

/**
 * kcm_rx_sock_leave() - a closing socket gives its messages back
 * @kcm: a socket being released
 *
 * Context: lock_sock(kcm) held; takes mux->lock.
 */
void kcm_rx_sock_leave(struct kcm_sock *kcm)
{
	struct kcm_mux *mux = kcm->mux;

	spin_lock_bh(&mux->lock);
	WRITE_ONCE(kcm->rx_disabled, true);
	__kcm_rx_requeue(kcm, false);
	spin_unlock_bh(&mux->lock);
}

/**
 * kcm_rx_set_disabled() - KCM_RECV_DISABLE
 * @kcm: the socket
 * @disable: take it out of the rotation and give its messages away, or
 *	let it receive again
 *
 * Context: lock_sock(kcm) held; takes mux->lock.
 */
void kcm_rx_set_disabled(struct kcm_sock *kcm, bool disable)
{
	struct kcm_mux *mux = kcm->mux;

	sock_owned_by_me(&kcm->sk);
	if (READ_ONCE(kcm->rx_disabled) == disable)
		return;

	spin_lock_bh(&mux->lock);
	WRITE_ONCE(kcm->rx_disabled, disable);
	if (disable)
		__kcm_rx_requeue(kcm, true);
	else
		__kcm_rx_join(kcm);
	spin_unlock_bh(&mux->lock);
}

/* ---- framing --------------------------------------------------------- */

/* Context: TCP socket lock held. */
static void kcm_rx_timer_start(struct kcm_psock *psock)
{
	long timeo = READ_ONCE(psock->sk->sk_rcvtimeo);

	if (psock->rx_timing)
		return;

	psock->rx_timing = true;
	psock->rx_start = jiffies;
	if (timeo != MAX_SCHEDULE_TIMEOUT)
		mod_delayed_work(system_wq, &psock->rx_timer_work, timeo);
}

/* Context: TCP socket lock held. */
static void kcm_rx_timer_stop(struct kcm_psock *psock)
{
	if (!psock->rx_timing)
		return;

	psock->rx_timing = false;
	/* Queued only with SO_RCVTIMEO set: skip the cancel's irq-off grab. */
	if (delayed_work_pending(&psock->rx_timer_work))
		cancel_delayed_work(&psock->rx_timer_work);
}

/*
 * Stop receiving on @psock and post -@err on its TCP socket.
 *
 * Context: TCP socket lock held.
 */
static void kcm_rx_fail(struct kcm_psock *psock, int err)
{
	struct sock *csk = psock->sk;

	trace_kcm_rx_error(psock, err);
	WRITE_ONCE(psock->rx_stopped, true);
	kcm_stat_add(&psock->stats.rx_unrecov, 1);
	kcm_rx_timer_stop(psock);
	WRITE_ONCE(csk->sk_err, -err);
	sk_error_report(csk);
}

/* Context: TCP socket lock held.  @n messages, @bytes in all, are framed. */
static void kcm_rx_framed_n(struct kcm_psock *psock, unsigned int n,
			    unsigned int bytes)
{
	kcm_stat_add(&psock->stats.rx_msgs, n);
	kcm_stat_add(&psock->stats.rx_bytes, bytes);
	psock->rx_msg_len = 0;
	psock->rx_seen = 0;
	kcm_rx_timer_stop(psock);
}

/* Context: TCP socket lock held.  A message of @len bytes is framed. */
static void kcm_rx_framed(struct kcm_psock *psock, unsigned int len)
{
	trace_kcm_rx_framed(psock, len);
	kcm_rx_framed_n(psock, 1, len);
}

/*
 * @skb, one message or a pack of @nmsgs, joins the batch delivered at the
 * end of this read (or now, when the batch is full).
 *
 * Context: TCP socket lock held.
 */
static void kcm_rx_emit(struct kcm_psock *psock, struct sk_buff *skb,
			unsigned int nmsgs)
{
	struct kcm_rx_msg *rxm = kcm_rx_msg(skb);

	memset(rxm, 0, sizeof(*rxm));
	rxm->conn_id = psock->index;
	rxm->nmsgs = nmsgs;
	rxm->pack = nmsgs > 1;
	__skb_queue_tail(&psock->rx_batch, skb);
	if (skb_queue_len(&psock->rx_batch) >= KCM_RX_BATCH ||
	    nmsgs >= KCM_RX_PACK_MAX)
		kcm_rx_flush_batch(psock);
}

/* Context: TCP socket lock held.  A large message is complete. */
static void kcm_rx_complete(struct kcm_psock *psock, struct sk_buff *skb)
{
	kcm_rx_framed(psock, skb->len);
	kcm_rx_emit(psock, skb, 1);
}

/*
 * Judge the parser's answer @ret for the message at the start of the
 * framing buffer.
 *
 * Context: TCP socket lock held.
 * Return: 1 when the message length is known, 0 when more bytes are
 * needed, or the negative errno that stops the psock.
 */
static int kcm_rx_judge(struct kcm_psock *psock, int ret)
{
	struct sk_buff *buf = psock->rx_skb;

	/* Only errnos user space knows; never internal ones like -512. */
	if (ret < 0)
		return ret >= -EHWPOISON ? ret : -EPROTO;
	if (!ret) {
		kcm_stat_add(&psock->stats.rx_need_more, 1);
		psock->rx_seen = buf->len;
		return 0;
	}
	if ((unsigned int)ret <= psock->rx_seen) {
		kcm_stat_add(&psock->stats.rx_bad_len, 1);
		trace_kcm_rx_bad_len(psock, ret);
		return -EPROTO;
	}
	if (ret > READ_ONCE(psock->sk->sk_rcvbuf)) {
		kcm_stat_add(&psock->stats.rx_too_big, 1);
		trace_kcm_rx_too_big(psock, ret);
		return -EMSGSIZE;
	}
	psock->rx_msg_len = ret;
	return 1;
}

/*
 * A framing buffer: a linear skb whose head is pages of its own (at least
 * @size bytes of room), so that packs can take references to its bytes.
 *
 * Context: any; @gfp says what may be done.
 * Return: the skb, or NULL.
 */
static struct sk_buff *kcm_rx_buf_alloc(unsigned int size, gfp_t gfp)
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
 * Context: TCP socket lock held.
 * Return: 0, or -ENOMEM to be retried.
 */
static int kcm_rx_buf_get(struct kcm_psock *psock)
{
	if (likely(psock->rx_skb))
		return 0;
	psock->rx_skb = kcm_rx_buf_alloc(KCM_RX_BUF,
					 psock->rx_gfp | __GFP_NOWARN);
	if (psock->rx_skb)
		return 0;
	kcm_stat_add(&psock->stats.rx_mem_fail, 1);
	return -ENOMEM;
}

/*
 * May the framing buffer's bytes before its data be overwritten?  Only
 * when no pack references them any more.
 *
 * Context: TCP socket lock held: only we take references to the page.
 */
static bool kcm_rx_buf_private(struct kcm_psock *psock)
{
	struct page *page = virt_to_head_page(psock->rx_skb->head);

	if (psock->rx_buf_shared && page_count(page) == 1)
		psock->rx_buf_shared = false;
	return !psock->rx_buf_shared;
}

/*
 * Move the unframed bytes to the start of the framing buffer.
 *
 * Context: TCP socket lock held; no message waits to be packed and the
 * buffer is private (kcm_rx_buf_private()).
 */
static void kcm_rx_buf_compact(struct kcm_psock *psock)
{
	struct sk_buff *buf = psock->rx_skb;
	unsigned int len = buf->len;

	if (len)
		memmove(buf->head, buf->data, len);
	buf->data = buf->head;
	skb_set_tail_pointer(buf, len);
	psock->rx_pack_off = 0;
}

/* Context: TCP socket lock held.  No pack references @buf's bytes. */
static bool kcm_rx_spare_free(const struct sk_buff *buf)
{
	return page_count(virt_to_head_page(buf->head)) == 1;
}

/*
 * Unreferenced spares at the head of the list, counted up to
 * KCM_RX_SPARES_COUNT.
 *
 * Context: TCP socket lock held.
 */
static unsigned int kcm_rx_spares_free_head(struct kcm_psock *psock)
{
	unsigned int n = 0;
	struct sk_buff *buf;

	skb_queue_walk(&psock->rx_spares, buf) {
		if (n == KCM_RX_SPARES_COUNT || !kcm_rx_spare_free(buf))
			break;
		n++;
	}
	return n;
}

/*
 * The oldest spare framing buffer, emptied, if no pack references it any
 * more and it has room for @size bytes.  Packs are read in the order they
 * were framed, so the oldest spare is the first to be let go: while the
 * readers are less than KCM_RX_SPARES buffers behind, buffers take turns
 * with no allocation (and no page zeroing) per buffer.  A free spare too
 * small for @size (the buffer grew since) is dropped.  How many were
 * free is remembered for kcm_rx_trim_work().
 *
 * Context: TCP socket lock held.
 */
static struct sk_buff *kcm_rx_buf_spare(struct kcm_psock *psock,
					unsigned int size)
{
	struct sk_buff *buf;

	psock->rx_spares_low = min(psock->rx_spares_low,
				   kcm_rx_spares_free_head(psock));
	while ((buf = skb_peek(&psock->rx_spares)) && kcm_rx_spare_free(buf)) {
		__skb_unlink(buf, &psock->rx_spares);
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
 *
 * Context: TCP socket lock held.
 */
static void kcm_rx_spares_trim(struct kcm_psock *psock, unsigned int surplus)
{
	struct sk_buff *buf, *tmp;
	bool kept = false;

	skb_queue_walk_safe(&psock->rx_spares, buf, tmp) {
		if (!surplus)
			break;
		if (!kcm_rx_spare_free(buf))
			continue;
		if (!kept) {
			kept = true;
			continue;
		}
		__skb_unlink(buf, &psock->rx_spares);
		consume_skb(buf);
		surplus--;
	}
}

/*
 * A psock with more than one spare looks at them every
 * KCM_RX_TRIM_DELAY (kcm_rx_trim_work(), armed when a buffer joins the
 * spares and by itself while there are more than one).  If it replaced no buffer
 * since the last look, the connection is quiet and it keeps one spare
 * that no pack references.  If it did, each replacement found some
 * number of unreferenced spares at the head: all but one of the fewest
 * it found were never needed, and go.  So a busy stream keeps what its
 * readers' bursts use (a spare let go of now would be a zeroed
 * allocation a moment later), and spares left over from a burst are let
 * go of within seconds.
 *
 * Context: TCP socket lock held.
 */
static void kcm_rx_spares_arm(struct kcm_psock *psock)
{
	if (skb_queue_len(&psock->rx_spares) > 1)
		queue_delayed_work(system_wq, &psock->rx_trim_work,
				   KCM_RX_TRIM_DELAY);
}

/*
 * Move the unframed bytes to another framing buffer of at least @size
 * bytes; the old one joins the spares.
 *
 * Context: TCP socket lock held; no message waits to be packed.
 * Return: 0 or -ENOMEM (the old buffer stays).
 */
static int kcm_rx_buf_replace(struct kcm_psock *psock, unsigned int size)
{
	struct sk_buff *old = psock->rx_skb, *buf;

	buf = kcm_rx_buf_spare(psock, size);
	if (!buf)
		buf = kcm_rx_buf_alloc(size, psock->rx_gfp);
	if (!buf) {
		kcm_stat_add(&psock->stats.rx_mem_fail, 1);
		return -ENOMEM;
	}
	skb_put_data(buf, old->data, old->len);
	__skb_queue_tail(&psock->rx_spares, old);
	/* Packs keep the pages they reference; only ours are let go. */
	if (skb_queue_len(&psock->rx_spares) > KCM_RX_SPARES)
		consume_skb(__skb_dequeue(&psock->rx_spares));
	kcm_rx_spares_arm(psock);
	psock->rx_skb = buf;
	psock->rx_pack_off = 0;
	psock->rx_buf_shared = false;
	return 0;
}

/*
 * The head of a pack of @n messages, their lengths (rx_pack_lens) in its
 * headroom, no bytes yet.
 *
 * Context: TCP socket lock held.
 * Return: the skb, or NULL (counted as a failed allocation).
 */
static struct sk_buff *kcm_rx_pack_alloc(struct kcm_psock *psock,
					 unsigned int n)
{
	unsigned int lsize = n * sizeof(u16);
	struct sk_buff *skb;

	skb = kcm_frag_skb(&psock->rx_frag, lsize,
			   psock->rx_gfp | __GFP_NOWARN);
	if (!skb) {
		kcm_stat_add(&psock->stats.rx_mem_fail, 1);
		return NULL;
	}
	skb_reserve(skb, lsize);
	memcpy(kcm_pack_lens(skb), psock->rx_pack_lens, lsize);
	return skb;
}

/*
 * Hand the small messages framed since the last pack over as one skb: a
 * fragment referencing their bytes in the framing buffer (no copy), their
 * lengths in its headroom.  It is charged for those bytes only.
 *
 * Context: TCP socket lock held.
 * Return: 0, or -ENOMEM with the messages left to be packed on a retry.
 */
static int kcm_rx_pack_seal(struct kcm_psock *psock)
{
	struct sk_buff *buf = psock->rx_skb, *skb;
	unsigned int n = psock->rx_pack_n;
	u8 *start = buf->head + psock->rx_pack_off;
	unsigned int bytes = buf->data - start;
	struct page *page;

	if (!n) {
		psock->rx_pack_off = skb_headroom(buf);
		return 0;
	}
	skb = kcm_rx_pack_alloc(psock, n);
	if (!skb)
		return -ENOMEM;
	page = virt_to_head_page(start);
	get_page(page);
	skb_fill_page_desc(skb, 0, page, start - (u8 *)page_address(page),
			   bytes);
	skb->len = bytes;
	skb->data_len = bytes;
	skb->truesize += bytes;

	psock->rx_pack_n = 0;
	psock->rx_pack_off = skb_headroom(buf);
	psock->rx_buf_shared = true;
	kcm_rx_emit(psock, skb, n);
	return 0;
}

/*
 * Make room in the framing buffer for at least one more byte: compact it
 * or, when packs still reference its bytes, move to a new one; grow it
 * while the parser still needs more, up to the TCP socket's receive
 * buffer.
 *
 * Context: TCP socket lock held.
 */
static int kcm_rx_buf_room(struct kcm_psock *psock)
{
	struct sk_buff *buf = psock->rx_skb;
	unsigned int size = skb_end_offset(buf);
	int limit = READ_ONCE(psock->sk->sk_rcvbuf);
	int err;

	if (skb_tailroom(buf))
		return 0;

	err = kcm_rx_pack_seal(psock);
	if (err)
		return err;
	if (buf->data != buf->head) {
		if (kcm_rx_buf_private(psock)) {
			kcm_rx_buf_compact(psock);
			return 0;
		}
		return kcm_rx_buf_replace(psock, size);
	}
	if (size >= limit) {
		kcm_stat_add(&psock->stats.rx_too_big, 1);
		trace_kcm_rx_too_big(psock, buf->len);
		return -EMSGSIZE;
	}
	return kcm_rx_buf_replace(psock, size + min_t(unsigned int, size,
						      limit - size));
}

/*
 * The small whole message of @len bytes at the start of the framing
 * buffer joins the pack being built, which has room for it: it stays where
 * it is, and is only counted.
 *
 * Context: TCP socket lock held; may run in the parser's section.
 */
static void kcm_rx_pack_in(struct kcm_psock *psock, unsigned int len)
{
	psock->rx_pack_lens[psock->rx_pack_n++] = len;
	__skb_pull(psock->rx_skb, len);
	kcm_rx_framed(psock, len);
}

/*
 * The small message at the start of the framing buffer joins the pack
 * being built, which is handed over first when it is full.
 *
 * Context: TCP socket lock held.
 * Return: 0 or -ENOMEM (a full pack could not be handed over).
 */
static int kcm_rx_emit_small(struct kcm_psock *psock)
{
	unsigned int len = psock->rx_msg_len;
	int err;

	if (psock->rx_pack_n == KCM_RX_PACK_MAX) {
		err = kcm_rx_pack_seal(psock);
		if (err)
			return err;
	}
	kcm_rx_pack_in(psock, len);
	return 0;
}

/*
 * Run the parser on the framing buffer.  While it finds small whole
 * messages that fit the pack being built, they are framed right away:
 * that needs no allocation, so one parser section (kcm_parse_lock(): RCU
 * and, for BPF, migrate_disable()) covers the parser runs of all of them
 * instead of one section each.  The first other answer is judged
 * (kcm_rx_judge()).
 *
 * Context: TCP socket lock held.
 * Return: 1 when the length of the message at the start of the buffer is
 * known, 0 when more bytes are needed, KCM_RX_RUN when messages were
 * framed and the buffer is empty or the psock paused, or an errno that
 * stops the psock.
 */
static int kcm_rx_parse(struct kcm_psock *psock)
{
	struct sk_buff *buf = psock->rx_skb;
	bool run = false;
	int ret;

	if (buf->len <= psock->rx_seen)
		return 0;

	kcm_parse_lock(psock);
	for (;;) {
		ret = kcm_parse_locked(psock, buf, true);
		if (ret <= (int)psock->rx_seen || ret > KCM_RX_SMALL ||
		    ret > buf->len || psock->rx_pack_n == KCM_RX_PACK_MAX ||
		    ret > READ_ONCE(psock->sk->sk_rcvbuf))
			break;
		psock->rx_last_large = false;
		kcm_rx_pack_in(psock, ret);
		if (!buf->len || READ_ONCE(psock->rx_paused)) {
			run = true;
			break;
		}
	}
	kcm_parse_unlock(psock);
	return run ? KCM_RX_RUN : kcm_rx_judge(psock, ret);
}

/* Context: TCP socket lock held.  Appends @piece to the large message. */
static void kcm_rx_msg_append(struct kcm_psock *psock, struct sk_buff *piece)
{
	struct sk_buff *msg = psock->rx_msg;

	if (!msg) {
		psock->rx_msg = piece;
		psock->rx_frag_copies = 0;
	} else {
		if (psock->rx_chunk == msg)
			skb_shinfo(msg)->frag_list = piece;
		else
			psock->rx_chunk->next = piece;
		msg->len += piece->len;
		msg->data_len += piece->len;
		msg->truesize += piece->truesize;
	}
	psock->rx_chunk = piece;
}

/*
 * Add an empty page-backed chunk to the large message, to copy @want bytes
 * into: a page-rounded fit at first, the largest size while copying goes
 * on (a stream of small segments).
 *
 * Context: TCP socket lock held.
 */
static int kcm_rx_chunk_add(struct kcm_psock *psock, unsigned int want)
{
	unsigned int size = psock->rx_copying ? KCM_RX_CHUNK :
			    round_up(want, PAGE_SIZE);
	struct sk_buff *chunk;
	int err;

	size = min3(size, KCM_RX_CHUNK, psock->rx_msg_len - psock->rx_msg_fill);
	chunk = alloc_skb_with_frags(0, size, 0, &err,
				     psock->rx_gfp | __GFP_NOWARN);
	if (!chunk) {
		kcm_stat_add(&psock->stats.rx_mem_fail, 1);
		return -ENOMEM;
	}
	chunk->len = size;
	chunk->data_len = size;
	kcm_rx_msg_append(psock, chunk);
	psock->rx_chunk_fill = 0;
	psock->rx_copying = true;
	return 0;
}

/*
 * Shrink the last chunk of the large message to the bytes copied into it,
 * before a piece that is not copied follows it.
 *
 * Context: TCP socket lock held.
 */
static void kcm_rx_chunk_seal(struct kcm_psock *psock)
{
	struct sk_buff *chunk = psock->rx_chunk, *msg = psock->rx_msg;
	unsigned int unused = chunk->data_len - psock->rx_chunk_fill;
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
	psock->rx_copying = false;
}

/* Context: any.  Copies @len bytes of @src into the page frags of @chunk. */
static void kcm_rx_chunk_copy(struct sk_buff *chunk, unsigned int off,
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
 * its own page fragments, only when at least KCM_RX_REF_MIN of them lie
 * there (a few bytes are copied rather than keep a page), and never from
 * pages their owner may still change (zerocopy user pages, spliced page
 * cache) nor from device memory.
 *
 * Context: TCP socket lock held.
 */
static bool kcm_rx_may_ref(struct sk_buff *src, unsigned int off,
			   unsigned int len)
{
	if (off < skb_headlen(src) || off >= skb_pagelen(src))
		return false;
	if (min(len, skb_pagelen(src) - off) < KCM_RX_REF_MIN)
		return false;
	return !skb_zcopy(src) && !skb_has_shared_frag(src) &&
	       kcm_skb_frags_readable(src);
}

/*
 * Reference up to @len bytes of @src's page fragments from @off on (see
 * kcm_rx_may_ref()) as fragments of @to, while it has free slots.  @to is
 * charged for the bytes referenced.
 *
 * Context: TCP socket lock held.
 * Return: bytes taken, 0 when @to has no free slot.
 */
static unsigned int kcm_rx_frags_ref(struct sk_buff *to,
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
 *
 * Context: TCP socket lock held.
 */
static void kcm_rx_msg_grew(struct kcm_psock *psock, struct sk_buff *to,
			    unsigned int n)
{
	struct sk_buff *msg = psock->rx_msg;

	if (to != msg) {
		msg->len += n;
		msg->data_len += n;
		msg->truesize += n;
	}
}

/*
 * Reference bytes of @src as fragments of @to, the last skb of the large
 * message (kcm_rx_frags_ref()); the message is charged for them too.
 *
 * Context: TCP socket lock held.
 * Return: bytes taken, 0 when @to has no free slot.
 */
static unsigned int kcm_rx_ref_frags(struct kcm_psock *psock,
				     struct sk_buff *to, struct sk_buff *src,
				     unsigned int off, unsigned int len)
{
	unsigned int done = kcm_rx_frags_ref(to, src, off, len);

	kcm_rx_msg_grew(psock, to, done);
	return done;
}

/*
 * Take up to @len bytes of @src from @off on into the large message by
 * reference: into the free fragment slots of its last skb, or of a new
 * empty skb chained after it.
 *
 * Context: TCP socket lock held.
 * Return: bytes taken; 0 with *@err = -ENOMEM when no skb could be had.
 */
static unsigned int kcm_rx_ref(struct kcm_psock *psock, struct sk_buff *src,
			       unsigned int off, unsigned int len, int *err)
{
	struct sk_buff *piece;
	unsigned int n = 0;

	if (psock->rx_copying)
		kcm_rx_chunk_seal(psock);
	if (psock->rx_msg)
		n = kcm_rx_ref_frags(psock, psock->rx_chunk, src, off, len);
	if (n)
		return n;

	piece = alloc_skb(0, psock->rx_gfp | __GFP_NOWARN);
	if (!piece) {
		kcm_stat_add(&psock->stats.rx_mem_fail, 1);
		*err = -ENOMEM;
		return 0;
	}
	kcm_rx_msg_append(psock, piece);
	return kcm_rx_ref_frags(psock, piece, src, off, len);
}

/*
 * Start a large message with the @len bytes at the start of the framing
 * buffer as the linear part of its first skb, carved like a small
 * message; what follows is referenced or copied behind them.
 *
 * Context: TCP socket lock held.
 * Return: 0 or -ENOMEM.
 */
static int kcm_rx_large_head(struct kcm_psock *psock, unsigned int len)
{
	struct sk_buff *head = kcm_frag_skb(&psock->rx_frag, len,
					    psock->rx_gfp | __GFP_NOWARN);

	if (!head) {
		kcm_stat_add(&psock->stats.rx_mem_fail, 1);
		return -ENOMEM;
	}
	skb_put_data(head, psock->rx_skb->data, len);
	kcm_rx_msg_append(psock, head);
	psock->rx_copying = false;
	return 0;
}

/*
 * Of @len bytes of @src from @off on that cannot be referenced, those to
 * copy now: those in its linear data alone, as the bytes in its pages
 * after them may be referenced.
 *
 * Context: any.
 */
static unsigned int kcm_rx_copy_len(const struct sk_buff *src,
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
 *
 * Context: TCP socket lock held.
 */
static bool kcm_rx_may_copy_frag(struct kcm_psock *psock, unsigned int len)
{
	return psock->rx_msg && !psock->rx_copying && len < KCM_RX_REF_MIN &&
	       psock->rx_frag_copies < KCM_RX_FRAG_COPIES &&
	       skb_shinfo(psock->rx_chunk)->nr_frags < MAX_SKB_FRAGS;
}

/*
 * Copy @len bytes of @src from @off on into the psock's fragment cache,
 * as a fragment of the large message's last skb (kcm_rx_may_copy_frag()).
 * It is charged for the bytes copied.
 *
 * Context: TCP socket lock held.
 * Return: 0 or -ENOMEM.
 */
static int kcm_rx_copy_frag(struct kcm_psock *psock, struct sk_buff *src,
			    unsigned int off, unsigned int len)
{
	struct sk_buff *to = psock->rx_chunk;
	struct page *page;
	void *data;

	data = page_frag_alloc(&psock->rx_frag, len,
			       psock->rx_gfp | __GFP_NOWARN);
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
	kcm_rx_msg_grew(psock, to, len);
	psock->rx_frag_copies++;
	return 0;
}

/*
 * Copy up to @len bytes of @src from @off on into the large message: a
 * small piece into the fragment cache, else into its chunk being copied
 * into, or a new one.
 *
 * Context: TCP socket lock held.
 * Return: bytes copied; 0 with *@err = -ENOMEM when no memory could be had.
 */
static unsigned int kcm_rx_copy(struct kcm_psock *psock, struct sk_buff *src,
				unsigned int off, unsigned int len, int *err)
{
	unsigned int n = kcm_rx_copy_len(src, off, len);

	if (kcm_rx_may_copy_frag(psock, n)) {
		*err = kcm_rx_copy_frag(psock, src, off, n);
		return *err ? 0 : n;
	}
	if (!psock->rx_copying ||
	    psock->rx_chunk_fill == psock->rx_chunk->len) {
		*err = kcm_rx_chunk_add(psock, n);
		if (*err)
			return 0;
	}
	n = min(n, psock->rx_chunk->len - psock->rx_chunk_fill);
	kcm_rx_chunk_copy(psock->rx_chunk, psock->rx_chunk_fill, src, off, n);
	psock->rx_chunk_fill += n;
	return n;
}

/*
 * Take up to @len bytes of @src from @off into the large message: by
 * reference when kcm_rx_may_ref() allows it, else copied into chunks (a
 * small piece into the fragment cache).
 *
 * Context: TCP socket lock held.
 * Return: bytes taken; *@err is set when an allocation failed.
 */
static unsigned int kcm_rx_fill(struct kcm_psock *psock,
				struct sk_buff *src, unsigned int off,
				unsigned int len, int *err)
{
	unsigned int done = 0, want, n;

	*err = 0;
	while (done < len && psock->rx_msg_fill < psock->rx_msg_len) {
		want = min(len - done, psock->rx_msg_len - psock->rx_msg_fill);
		if (kcm_rx_may_ref(src, off + done, want))
			n = kcm_rx_ref(psock, src, off + done, want, err);
		else
			n = kcm_rx_copy(psock, src, off + done, want, err);
		if (*err)
			break;
		psock->rx_msg_fill += n;
		done += n;
	}
	return done;
}

/* Context: TCP socket lock held.  Delivers the large message if whole. */
static void kcm_rx_large_check(struct kcm_psock *psock)
{
	struct sk_buff *msg = psock->rx_msg;

	if (psock->rx_msg_fill < psock->rx_msg_len) {
		kcm_rx_timer_start(psock);
		return;
	}
	psock->rx_msg = NULL;
	psock->rx_chunk = NULL;
	psock->rx_msg_fill = 0;
	psock->rx_copying = false;
	kcm_rx_complete(psock, msg);
}

/* Context: TCP socket lock held.  Moves buffered bytes to rx_msg. */
static int kcm_rx_take_large(struct kcm_psock *psock)
{
	struct sk_buff *buf = psock->rx_skb;
	unsigned int n;
	int err;

	/* A pack holds only bytes that run up to the buffer's data. */
	err = kcm_rx_pack_seal(psock);
	if (err)
		return err;
	psock->rx_last_large = true;
	n = min(buf->len, psock->rx_msg_len - psock->rx_msg_fill);
	if (!psock->rx_msg && n <= KCM_RX_SMALL) {
		err = kcm_rx_large_head(psock, n);
		if (!err)
			psock->rx_msg_fill = n;
		else
			n = 0;
	} else {
		n = kcm_rx_fill(psock, buf, 0, n, &err);
	}
	__skb_pull(buf, n);
	psock->rx_pack_off = skb_headroom(buf);
	if (psock->rx_msg)
		kcm_rx_large_check(psock);
	return err;
}

/*
 * Frame and deliver every message the framing buffer holds.
 *
 * Context: TCP socket lock held.
 * Return: 0, -EAGAIN when the psock is paused, -ENOMEM to be retried, or
 * an errno that stops the psock.
 */
static int kcm_rx_frame(struct kcm_psock *psock)
{
	struct sk_buff *buf = psock->rx_skb;
	int err = 0;

	while (buf->len) {
		if (READ_ONCE(psock->rx_paused))
			return -EAGAIN;

		if (!psock->rx_msg_len) {
			err = kcm_rx_parse(psock);
			if (err < 0)
				return err;
			if (err == KCM_RX_RUN)
				continue;
			if (!err) {
				kcm_rx_timer_start(psock);
				break;
			}
		}

		if (psock->rx_msg_len > KCM_RX_SMALL) {
			err = kcm_rx_take_large(psock);
		} else if (buf->len >= psock->rx_msg_len) {
			psock->rx_last_large = false;
			err = kcm_rx_emit_small(psock);
		} else {
			kcm_rx_timer_start(psock);
			break;
		}
		if (err)
			return err;
	}

	if (!buf->len && !psock->rx_pack_n && buf->data != buf->head &&
	    kcm_rx_buf_private(psock))
		kcm_rx_buf_compact(psock);
	return 0;
}

/*
 * Framing in place.  Small messages that lie whole in the page fragments
 * of the TCP skb being read are framed where they are: the parser runs on
 * the psock's view (rx_view), an skb whose fragments describe, without
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
 * Context: TCP socket lock held.
 * Return: the view, or NULL: then the framing buffer is used.
 */
static struct sk_buff *kcm_rx_view_get(struct kcm_psock *psock)
{
	if (unlikely(!psock->rx_view))
		psock->rx_view = alloc_skb(KCM_RX_VIEW_HEAD,
					   psock->rx_gfp | __GFP_NOWARN);
	return psock->rx_view;
}

/*
 * Point @view at @len bytes of @src's page fragments from @off on.  It
 * takes no references: it is used only while @src is, under the lock.
 *
 * Context: TCP socket lock held.
 * Return: the bytes it shows, at most @len.
 */
static unsigned int kcm_rx_view_set(struct sk_buff *view,
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

/* Context: TCP socket lock held.  @view moves past its first @n bytes. */
static void kcm_rx_view_pull(struct sk_buff *view, unsigned int n)
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
 * Context: TCP socket lock held; @view shows at least one byte.
 * Return: the bytes copied, for kcm_rx_view_unhead().
 */
static unsigned int kcm_rx_view_head(struct sk_buff *view)
{
	skb_frag_t *frag = &skb_shinfo(view)->frags[0];
	void *addr = skb_frag_address_safe(frag);
	unsigned int h;

	if (!addr)
		return 0;
	h = min_t(unsigned int, KCM_RX_VIEW_HEAD, skb_frag_size(frag));
	memcpy(view->data, addr, h);
	skb_frag_off_add(frag, h);
	skb_frag_size_sub(frag, h);
	view->data_len -= h;
	skb_set_tail_pointer(view, h);
	return h;
}

/* Context: TCP socket lock held.  Undoes kcm_rx_view_head(). */
static void kcm_rx_view_unhead(struct sk_buff *view, unsigned int h)
{
	skb_frag_t *frag = &skb_shinfo(view)->frags[0];

	skb_frag_off_add(frag, -(int)h);
	skb_frag_size_add(frag, h);
	view->data_len += h;
	skb_set_tail_pointer(view, 0);
}

/* Context: TCP socket lock held.  @view shows nothing (it may be freed). */
static void kcm_rx_view_clear(struct sk_buff *view)
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
static bool kcm_rx_view_whole(int ret, unsigned int have, int limit)
{
	return ret > 0 && ret <= KCM_RX_SMALL && ret <= have && ret <= limit;
}

/*
 * Parse the small whole messages that lie in @view's first fragment,
 * while the pack has room.  The parser reads the fragment where it is,
 * as linear data: the view's data points into it, so a header costs no
 * copy and no walk of fragments.  The first message that does not lie
 * whole in the fragment (or that the parser does not judge from it)
 * stops it; the view is left as it was.  @limit: see kcm_rx_view_whole().
 *
 * Context: TCP socket lock held, in the parser's section.
 * Return: the bytes of the messages found (added to rx_pack_lens).
 */
static unsigned int kcm_rx_view_parse_frag(struct kcm_psock *psock,
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
		if (!kcm_rx_view_whole(ret, size - done, limit))
			break;
		psock->rx_pack_lens[(*n)++] = ret;
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
 * loads: a message that goes on in the next fragment.
 *
 * Context: TCP socket lock held, in the parser's section.
 * Return: the parser's answer.
 */
static int kcm_rx_view_parse_one(struct kcm_psock *psock,
				 struct sk_buff *view)
{
	unsigned int head = kcm_rx_view_head(view);
	int ret;

	ret = kcm_parse_locked(psock, view, false);
	kcm_rx_view_unhead(view, head);
	return ret;
}

/*
 * Parse small whole messages at the start of @view, at most
 * KCM_RX_PACK_MAX, their lengths into rx_pack_lens, under one parser
 * section (kcm_rx_parse()): those in one fragment where they lie
 * (kcm_rx_view_parse_frag()), one across fragments over the whole view.
 * The first other answer stops it: the framing buffer gets those bytes
 * and judges it.
 *
 * Context: TCP socket lock held; no message waits to be packed.
 * Return: the number of messages, their bytes in *@bytes.
 */
static unsigned int kcm_rx_view_parse(struct kcm_psock *psock,
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
		done = kcm_rx_view_parse_frag(psock, view, &n, limit);
		*bytes += done;
		kcm_rx_view_pull(view, done);
		/* The fragment is used up: the next one, where they lie. */
		if (done == size)
			continue;
		if (n == KCM_RX_PACK_MAX || !view->len)
			break;
		ret = kcm_rx_view_parse_one(psock, view);
		if (!kcm_rx_view_whole(ret, view->len, limit))
			break;
		psock->rx_pack_lens[n++] = ret;
		*bytes += ret;
		kcm_rx_view_pull(view, ret);
	}
	kcm_parse_unlock(psock);
	return n;
}

/*
 * The part of @src's truesize its @bytes of data stand for, at least
 * @bytes: a pack referencing them is charged what TCP was, so a message
 * in a small segment of a large page costs its share of the page.
 *
 * Context: TCP socket lock held.
 */
static unsigned int kcm_rx_share(const struct sk_buff *src,
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
 * Context: TCP socket lock held.
 * Return: 0, or -ENOMEM with nothing framed.
 */
static int kcm_rx_view_seal(struct kcm_psock *psock, struct sk_buff *src,
			    unsigned int off, unsigned int bytes,
			    unsigned int n)
{
	struct sk_buff *skb;
	unsigned int i;

	skb = kcm_rx_pack_alloc(psock, n);
	if (!skb)
		return -ENOMEM;
	/* A view has at most MAX_SKB_FRAGS fragments: all of them fit. */
	WARN_ON_ONCE(kcm_rx_frags_ref(skb, src, off, bytes) != bytes);
	skb->truesize += kcm_rx_share(src, bytes) - bytes;
	psock->rx_last_large = false;
	kcm_stat_add(&psock->stats.rx_in_place, n);
	if (trace_kcm_rx_framed_enabled())
		for (i = 0; i < n; i++)
			trace_kcm_rx_framed(psock, psock->rx_pack_lens[i]);
	kcm_rx_framed_n(psock, n, bytes);
	kcm_rx_emit(psock, skb, n);
	return 0;
}

/*
 * Frame in place the small whole messages at the start of @len bytes of
 * @src from @off on (kcm_rx_may_ref()), a pack at a time.
 *
 * Context: TCP socket lock held; the framing buffer is empty and no
 * message waits to be packed.
 * Return: the bytes framed; *@err is -ENOMEM when a pack could not be had.
 */
static unsigned int kcm_rx_in_place(struct kcm_psock *psock,
				    struct sk_buff *src, unsigned int off,
				    unsigned int len, int *err)
{
	struct sk_buff *view = kcm_rx_view_get(psock);
	unsigned int done = 0, bytes, n;

	if (!view)
		return 0;
	len = kcm_rx_view_set(view, src, off, len);
	while (done < len && !READ_ONCE(psock->rx_paused)) {
		n = kcm_rx_view_parse(psock, view, &bytes);
		if (!n)
			break;
		*err = kcm_rx_view_seal(psock, src, off + done, bytes, n);
		if (*err)
			break;
		done += bytes;
		if (n < KCM_RX_PACK_MAX)
			break;
	}
	kcm_rx_view_clear(view);
	return done;
}

/*
 * How many bytes to copy into the framing buffer when what follows could
 * be framed in place: what the message started there still needs, or a
 * header's worth while its length is unknown.
 *
 * Context: TCP socket lock held.
 */
static unsigned int kcm_rx_buf_need(struct kcm_psock *psock)
{
	unsigned int have = psock->rx_skb->len;

	if (psock->rx_msg_len > have)
		return psock->rx_msg_len - have;
	return KCM_RX_STEP;
}

/*
 * tcp_read_sock() actor: take bytes into the large message being
 * assembled or into the framing buffer, and frame them.
 *
 * Context: TCP socket lock held.
 */
static int kcm_rx_actor(read_descriptor_t *desc, struct sk_buff *skb,
			unsigned int offset, size_t len)
{
	struct kcm_psock *psock = desc->arg.data;
	unsigned int done = 0, n;
	struct sk_buff *buf;
	int err = 0;

	while (done < len) {
		buf = psock->rx_skb;
		if (READ_ONCE(psock->rx_paused)) {
			err = -EAGAIN;
			break;
		}
		if (psock->rx_msg && !buf->len) {
			done += kcm_rx_fill(psock, skb, offset + done,
					    len - done, &err);
			kcm_rx_large_check(psock);
			if (err)
				break;
			continue;
		}
		if (!buf->len && !psock->rx_msg_len &&
		    kcm_rx_may_ref(skb, offset + done, len - done)) {
			err = kcm_rx_pack_seal(psock);
			if (err)
				break;
			done += kcm_rx_in_place(psock, skb, offset + done,
						len - done, &err);
			if (err || done == len)
				break;
			if (READ_ONCE(psock->rx_paused))
				continue;
		}
		err = kcm_rx_buf_room(psock);
		if (err)
			break;
		/* kcm_rx_buf_room() may have replaced it. */
		buf = psock->rx_skb;
		n = min_t(size_t, len - done, skb_tailroom(buf));
		/* After a large message, copy only what a header needs. */
		if (psock->rx_last_large && !psock->rx_msg_len)
			n = min_t(unsigned int, n, KCM_RX_STEP);
		/* Copy what the next message needs: the rest may not. */
		else if (kcm_rx_may_ref(skb, offset + done, len - done))
			n = min(n, kcm_rx_buf_need(psock));
		WARN_ON_ONCE(skb_copy_bits(skb, offset + done,
					   skb_put(buf, n), n));
		done += n;
		err = kcm_rx_frame(psock);
		if (err)
			break;
	}

	if (err) {
		desc->error = err;
		desc->count = 0;
	}
	return done;
}

/* Context: TCP socket lock held.  What to do after a read stopped. */
static void kcm_rx_read_done(struct kcm_psock *psock, int err)
{
	switch (err) {
	case 0:
	case -EAGAIN:
		/* Paused: the mux kicks rx_work when it has drained. */
		break;
	case -ENOMEM:
		queue_delayed_work(system_wq, &psock->rx_work,
				   psock->rx_gfp == GFP_ATOMIC ? 0 :
				   KCM_RX_RETRY);
		break;
	default:
		kcm_rx_fail(psock, err);
	}
}

/*
 * A read from TCP stopped with @err: the messages framed go out, packed
 * and delivered even when framing stopped, then the verdict.
 *
 * Context: TCP socket lock held.
 */
static void kcm_rx_read_end(struct kcm_psock *psock, int err)
{
	if (kcm_rx_pack_seal(psock) && (!err || err == -EAGAIN))
		err = -ENOMEM;
	kcm_rx_flush_batch(psock);
	kcm_rx_read_done(psock, err);
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
 * sends the ACK when it empties the queue, as does a read from rx_work
 * after TCP chose to wait.  The mark is the one TCP_QUICKACK sets; an
 * interactive (ping-pong) connection keeps its ACKs delayed, for its
 * replies to carry.
 *
 * Context: TCP socket lock held.
 */
static void kcm_rx_ack_drained(struct sock *csk)
{
	struct inet_connection_sock *icsk = inet_csk(csk);

	if (inet_csk_ack_scheduled(csk))
		icsk->icsk_ack.pending |= ICSK_ACK_PUSHED;
}

/*
 * Hand the actor what TCP, or kTLS (@io), has received.
 *
 * Context: TCP socket lock held; lock_sock() for kTLS.
 * Return: 0, or the error that stopped the read.
 */
static int kcm_rx_read_sock(struct kcm_psock *psock, int io)
{
	read_descriptor_t desc = { .arg.data = psock, .count = 1 };
	int ret;

	if (io == KCM_IO_TCP) {
		kcm_rx_ack_drained(psock->sk);
		tcp_read_sock(psock->sk, &desc, kcm_rx_actor);
		return desc.error;
	}
	ret = kcm_tls_read_sock(psock->sk, &desc, kcm_rx_actor);
	if (desc.error)
		return desc.error;
	/* No record ready, or the end of the stream: nothing to say. */
	return ret < 0 && ret != -EAGAIN ? ret : 0;
}

/* Context: TCP socket lock held (softirq with the socket not owned, or
 * process context with lock_sock()).
 */
static void kcm_rx_read(struct kcm_psock *psock, gfp_t gfp)
{
	int err, io;

	if (READ_ONCE(psock->rx_stopped))
		return;
	io = kcm_psock_io(psock, false);
	if (io < 0 || io == KCM_IO_WAIT)
		return;
	/* kTLS decrypts with the socket owned: in rx_work. */
	if (io == KCM_IO_TLS && gfp != GFP_KERNEL) {
		kcm_psock_rx_kick(psock);
		return;
	}

	psock->rx_gfp = gfp;
	if (kcm_rx_buf_get(psock)) {
		kcm_rx_read_done(psock, -ENOMEM);
		return;
	}
	/* Bytes left over from a pause or a failed allocation come first. */
	err = kcm_rx_frame(psock);
	if (!err)
		err = kcm_rx_read_sock(psock, io);
	kcm_rx_read_end(psock, err);
}

/**
 * kcm_psock_data_ready() - sk_data_ready of an attached TCP socket, or
 *	what kTLS calls when a record is ready (kcm_tls.c)
 * @csk: the TCP socket
 *
 * Context: softirq with the socket spinlock held, or process context when
 * a task owns the socket (then framing is left to rx_work, as it is for
 * a socket with a ULP).
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
			kcm_psock_rx_kick(psock);
		else
			kcm_rx_read(psock, GFP_ATOMIC);
	}
	read_unlock_bh(&csk->sk_callback_lock);
}

/* Context: process context (workqueue). */
static void kcm_rx_work(struct work_struct *work)
{
	struct kcm_psock *psock = container_of(to_delayed_work(work),
					       struct kcm_psock, rx_work);
	struct sock *csk = psock->sk;

	lock_sock(csk);
	kcm_rx_read(psock, GFP_KERNEL);
	release_sock(csk);
}

/* Context: process context (workqueue).  The assembly timeout. */
static void kcm_rx_timer_work(struct work_struct *work)
{
	struct kcm_psock *psock = container_of(to_delayed_work(work),
					       struct kcm_psock,
					       rx_timer_work);
	struct sock *csk = psock->sk;
	unsigned long deadline;
	long timeo;

	lock_sock(csk);
	timeo = READ_ONCE(csk->sk_rcvtimeo);
	if (READ_ONCE(psock->rx_stopped) || !psock->rx_timing ||
	    timeo == MAX_SCHEDULE_TIMEOUT)
		goto out;

	deadline = psock->rx_start + timeo;
	if (time_after_eq(jiffies, deadline)) {
		kcm_stat_add(&psock->stats.rx_timeouts, 1);
		trace_kcm_rx_timeout(psock);
		kcm_rx_fail(psock, -ETIMEDOUT);
	} else {
		mod_delayed_work(system_wq, &psock->rx_timer_work,
				 deadline - jiffies);
	}
out:
	release_sock(csk);
}

/*
 * Context: process context (workqueue).  See kcm_rx_spares_arm(); a
 * stopped psock frames nothing more and trims as a quiet one.
 */
static void kcm_rx_trim_work(struct work_struct *work)
{
	struct kcm_psock *psock = container_of(to_delayed_work(work),
					       struct kcm_psock,
					       rx_trim_work);
	struct sock *csk = psock->sk;
	unsigned int low;

	lock_sock(csk);
	/* UINT_MAX, no buffer replaced since the last look: no bound. */
	low = READ_ONCE(psock->rx_stopped) ? UINT_MAX : psock->rx_spares_low;
	psock->rx_spares_low = UINT_MAX;
	kcm_rx_spares_trim(psock, low ? low - 1 : 0);
	kcm_rx_spares_arm(psock);
	release_sock(csk);
}

/**
 * kcm_psock_rx_kick() - frame in process context soon
 * @psock: a psock that may have bytes to read
 *
 * Context: any.
 */
void kcm_psock_rx_kick(struct kcm_psock *psock)
{
	queue_delayed_work(system_wq, &psock->rx_work, 0);
}

/**
 * kcm_psock_rx_init() - set up the receive side of a new psock
 * @psock: a psock not attached yet
 *
 * Its framing buffer comes with its first bytes (kcm_rx_buf_get()).
 *
 * Context: any.
 */
void kcm_psock_rx_init(struct kcm_psock *psock)
{
	__skb_queue_head_init(&psock->rx_batch);
	__skb_queue_head_init(&psock->rx_spares);
	psock->rx_spares_low = UINT_MAX;
	INIT_DELAYED_WORK(&psock->rx_work, kcm_rx_work);
	INIT_DELAYED_WORK(&psock->rx_timer_work, kcm_rx_timer_work);
	INIT_DELAYED_WORK(&psock->rx_trim_work, kcm_rx_trim_work);
}

/**
 * kcm_psock_rx_flush() - drop the receive state of an unattached psock
 * @psock: a psock whose callbacks are restored and whose work is cancelled
 *
 * A half-assembled message is lost and counted as aborted.
 *
 * Context: lock_sock() of the TCP socket held.
 */
void kcm_psock_rx_flush(struct kcm_psock *psock)
{
	struct sk_buff *spare;

	sock_owned_by_me(psock->sk);
	/* Whole messages are the application's, even now. */
	psock->rx_gfp = GFP_KERNEL;
	if (psock->rx_skb && kcm_rx_pack_seal(psock))
		kcm_stat_add(&psock->stats.rx_aborts, 1);
	kcm_rx_flush_batch(psock);
	if (psock->rx_msg || (psock->rx_skb && psock->rx_skb->len))
		kcm_stat_add(&psock->stats.rx_aborts, 1);

	kfree_skb(psock->rx_msg);
	psock->rx_msg = NULL;
	psock->rx_chunk = NULL;
	kfree_skb(psock->rx_skb);
	psock->rx_skb = NULL;
	consume_skb(psock->rx_view);
	psock->rx_view = NULL;
	while ((spare = __skb_dequeue(&psock->rx_spares)))
		consume_skb(spare);
	psock->rx_timing = false;
	kcm_frag_cache_drain(&psock->rx_frag);
}

/* ---- reading --------------------------------------------------------- */

/*
 * A received skb holds one message or a pack of several; a reader moves
 * through a pack message by message (kcm_rx_msg's @next, @pos, @offset)
 * and the skb leaves the queue with its last message.
 */

/**
 * kcm_rx_queued() - messages waiting on a KCM socket's receive queue
 * @sk: a KCM socket
 *
 * Context: any; takes the queue lock (after mux->lock when that is held).
 * Return: the number of whole or partly read messages queued.
 */
unsigned int kcm_rx_queued(struct sock *sk)
{
	struct sk_buff_head *queue = &sk->sk_receive_queue;
	unsigned int n = 0;
	struct sk_buff *skb;
	unsigned long irqf;

	spin_lock_irqsave(&queue->lock, irqf);
	skb_queue_walk(queue, skb)
		n += kcm_rx_left(skb);
	spin_unlock_irqrestore(&queue->lock, irqf);
	return n;
}

/*
 * The skb at the head of the receive queue.  It is unlinked at once when
 * this read finishes its last message (DGRAM, or a SEQPACKET read with
 * room for the rest), so a message costs one trip through the queue lock.
 *
 * Context: lock_sock(sk) held; only its owner unlinks from the queue.
 */
static struct sk_buff *kcm_rx_take(struct sock *sk, size_t len, int flags,
				   bool *unlinked)
{
	struct sk_buff_head *queue = &sk->sk_receive_queue;
	struct sk_buff *skb;
	unsigned long irqf;

	if (skb_queue_empty_lockless(queue))
		return NULL;

	spin_lock_irqsave(&queue->lock, irqf);
	skb = skb_peek(queue);
	*unlinked = skb && !(flags & MSG_PEEK) && kcm_rx_left(skb) == 1 &&
		    (sk->sk_type == SOCK_DGRAM ||
		     len >= kcm_rx_cur_len(skb) - kcm_rx_msg(skb)->offset);
	if (*unlinked)
		__skb_unlink(skb, queue);
	spin_unlock_irqrestore(&queue->lock, irqf);
	return skb;
}

/*
 * Wait for a message and take it (see kcm_rx_take()).  An empty socket
 * rejoins the rotation first, which may hand it a held message at once.
 *
 * Context: lock_sock(sk) held; dropped while sleeping.
 */
static struct sk_buff *kcm_rx_wait(struct kcm_sock *kcm, long timeo,
				   size_t len, int flags, bool *unlinked,
				   int *err)
{
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	struct sock *sk = &kcm->sk;
	struct sk_buff *skb;

	for (;;) {
		skb = kcm_rx_take(sk, len, flags, unlinked);
		if (skb)
			return skb;
		if (READ_ONCE(sk->sk_err)) {
			*err = sock_error(sk);
			return NULL;
		}
		kcm_rx_sock_join(kcm);
		if (!skb_queue_empty_lockless(&sk->sk_receive_queue))
			continue;
		if (!timeo) {
			*err = -EAGAIN;
			return NULL;
		}
		if (signal_pending(current)) {
			*err = sock_intr_errno(timeo);
			return NULL;
		}
		add_wait_queue(sk_sleep(sk), &wait);
		sk_wait_event(sk, &timeo,
			      !skb_queue_empty_lockless(&sk->sk_receive_queue) ||
			      READ_ONCE(sk->sk_err), &wait);
		remove_wait_queue(sk_sleep(sk), &wait);
	}
}

/*
 * @n messages of @skb, @bytes in all, were read whole from the current
 * one on: count them, and free the skb if it was taken off the queue,
 * else move on past them.
 *
 * Context: lock_sock(kcm) held.
 */
static void kcm_rx_consume_msgs(struct kcm_sock *kcm, struct sk_buff *skb,
				unsigned int n, unsigned int bytes,
				bool unlinked)
{
	struct kcm_rx_msg *rxm = kcm_rx_msg(skb);

	kcm_stat_add(&kcm->stats.rx_msgs, n);
	kcm_stat_add(&kcm->stats.rx_bytes, bytes);
	if (unlinked) {
		consume_skb(skb);
		return;
	}
	rxm->offset = 0;
	rxm->pos += bytes;
	rxm->next += n;
}

/*
 * @copied bytes of the current message of @skb were read: the message is
 * done (DGRAM, or the rest of a SEQPACKET one), or a SEQPACKET reader
 * remembers how far it got.
 *
 * Context: lock_sock(kcm) held.
 */
static void kcm_rx_consume(struct kcm_sock *kcm, struct sk_buff *skb,
			   unsigned int copied, bool unlinked)
{
	struct kcm_rx_msg *rxm = kcm_rx_msg(skb);
	unsigned int len = kcm_rx_cur_len(skb);

	if (kcm->sk.sk_type == SOCK_SEQPACKET && rxm->offset + copied < len) {
		rxm->offset += copied;
		return;
	}
	kcm_rx_consume_msgs(kcm, skb, 1, len, unlinked);
}

/* ---- batched reads (KCM_RECV_BATCH) ---------------------------------- */

/**
 * struct kcm_recv_batch - what a batched read reports in control messages
 * @lens: length of each message, in order
 * @ids: connection id of each message (KCM_RECV_CONN_ID)
 * @n: messages read
 * @room: entries @lens and @ids have: the most messages the read may
 *	return, as many as the caller's control buffer can describe
 *	(kcm_recv_batch_room())
 * @kept: @lens is the socket's kept array (kcm_sock.rx_ents)
 * @stack: storage of @lens and @ids for small batches
 */
struct kcm_recv_batch {
	u32 *lens;
	u32 *ids;
	unsigned int n;
	unsigned int room;
	bool kept;
	u32 stack[2 * KCM_RECV_STACK];
};

/* Context: any.  Bytes of a control message header in @msg's layout. */
static size_t kcm_cmsg_hdr(const struct msghdr *msg)
{
	if (IS_ENABLED(CONFIG_COMPAT) && (msg->msg_flags & MSG_CMSG_COMPAT))
		return sizeof(struct compat_cmsghdr);
	return sizeof(struct cmsghdr);
}

/* Context: any.  How many __u32 one more control message of @msg holds. */
static unsigned int kcm_cmsg_u32_room(const struct msghdr *msg)
{
	size_t hdr = kcm_cmsg_hdr(msg);

	if (!msg->msg_control || msg->msg_controllen <= hdr)
		return 0;
	return min_t(size_t, (msg->msg_controllen - hdr) / sizeof(u32),
		     KCM_RECV_BATCH_MAX);
}

/*
 * Context: any.  Bytes of a control message of @n __u32 in @msg's
 * layout, with the padding that put_cmsg() skips after it.
 */
static size_t kcm_cmsg_u32_space(const struct msghdr *msg, unsigned int n)
{
	size_t len = kcm_cmsg_hdr(msg) + n * sizeof(u32);

	if (IS_ENABLED(CONFIG_COMPAT) && (msg->msg_flags & MSG_CMSG_COMPAT))
		return ALIGN(len, sizeof(s32));	/* compat cmsgs: 32-bit aligned */
	return CMSG_ALIGN(len);
}

/*
 * How many messages a batched read into @msg may return, up to @max: no
 * more than its control buffer can describe, a KCM_MSG_LENS entry each
 * and, with KCM_RECV_CONN_ID, a KCM_CONN_ID entry each, so that no
 * message of a batch comes without its length.  0: room for none.
 *
 * Context: any.
 */
static unsigned int kcm_recv_batch_room(struct kcm_sock *kcm,
					const struct msghdr *msg,
					unsigned int max)
{
	size_t hdr = kcm_cmsg_hdr(msg), ctl = msg->msg_controllen;
	unsigned int n = min(max, kcm_cmsg_u32_room(msg));

	if (!n || !READ_ONCE(kcm->rx_conn_id))
		return n;
	/* Two messages of n entries take at least 2 * hdr + 8 * n bytes. */
	if (ctl < 2 * hdr + 2 * sizeof(u32))
		return 0;
	n = min_t(size_t, n, (ctl - 2 * hdr) / (2 * sizeof(u32)));
	while (n && kcm_cmsg_u32_space(msg, n) + hdr + n * sizeof(u32) > ctl)
		n--;
	return n;
}

/*
 * Give @b room for the entries of up to @max messages, as far as @msg's
 * control buffer can take them: on the stack for a few, else in an
 * array the socket keeps for its next reads (up to KCM_RECV_KEEP
 * entries; a larger one lives for this read only).  Allocating and
 * zeroing (init_on_alloc) 32 KB for each read of up to 4096 messages
 * was 2% of the CPU of such reads.
 *
 * Context: lock_sock(kcm) held from before this to the end of the read
 * (the kept array is the socket's while it is), may sleep.
 * Return: 0 or -ENOMEM.
 */
static int kcm_recv_batch_init(struct kcm_sock *kcm,
			       struct kcm_recv_batch *b,
			       const struct msghdr *msg, unsigned int max)
{
	u32 *ents;

	b->n = 0;
	b->room = min(max, kcm_cmsg_u32_room(msg));
	b->kept = false;
	if (b->room <= KCM_RECV_STACK) {
		b->lens = b->stack;
		b->ids = b->stack + KCM_RECV_STACK;
		return 0;
	}
	if (b->room <= kcm->rx_ents_room) {
		ents = kcm->rx_ents;
		b->kept = true;
	} else {
		ents = kvmalloc_array(b->room, 2 * sizeof(u32), GFP_KERNEL);
		if (!ents)
			return -ENOMEM;
		if (b->room <= KCM_RECV_KEEP) {
			kvfree(kcm->rx_ents);
			kcm->rx_ents = ents;
			kcm->rx_ents_room = b->room;
			b->kept = true;
		}
	}
	b->lens = ents;
	b->ids = ents + b->room;
	return 0;
}

/*
 * Frees @b's entries unless they are on the stack or kept (or were never
 * set up: NULL).
 *
 * Context: any.
 */
static void kcm_recv_batch_free(struct kcm_recv_batch *b)
{
	if (b->lens != b->stack && !b->kept)
		kvfree(b->lens);
}

/**
 * kcm_rx_sock_free() - free what a socket kept for its batched reads
 * @kcm: a socket being released, which reads no more
 *
 * Context: process context.
 */
void kcm_rx_sock_free(struct kcm_sock *kcm)
{
	kvfree(kcm->rx_ents);
	kcm->rx_ents = NULL;
	kcm->rx_ents_room = 0;
}

/*
 * Entry @at of @b: a message of @len bytes from connection @id, kept
 * when @b has room for it (the count goes on regardless).
 *
 * Context: any.
 */
static void kcm_recv_batch_set(struct kcm_recv_batch *b, unsigned int at,
			       u32 len, u32 id)
{
	if (at < b->room) {
		b->lens[at] = len;
		b->ids[at] = id;
	}
}

/* Context: any.  One more message of @len bytes from connection @id. */
static void kcm_recv_batch_add(struct kcm_recv_batch *b, u32 len, u32 id)
{
	kcm_recv_batch_set(b, b->n++, len, id);
}

/*
 * A control message of @n __u32 values, or as many as fit: the caller
 * sees MSG_CTRUNC when any is left out.
 *
 * Context: process context.
 */
static void kcm_cmsg_put_u32s(struct msghdr *msg, int type, u32 *v,
			      unsigned int n)
{
	unsigned int fit = min(n, kcm_cmsg_u32_room(msg));

	if (fit < n)
		msg->msg_flags |= MSG_CTRUNC;
	if (fit)
		put_cmsg(msg, SOL_KCM, type, fit * sizeof(u32), v);
}

/* Context: process context.  KCM_MSG_LENS, then KCM_CONN_ID if asked. */
static void kcm_recv_batch_cmsg(struct kcm_sock *kcm, struct msghdr *msg,
				struct kcm_recv_batch *b)
{
	unsigned int known = min(b->n, b->room);

	if (known < b->n)
		msg->msg_flags |= MSG_CTRUNC;
	kcm_cmsg_put_u32s(msg, KCM_MSG_LENS, b->lens, known);
	if (READ_ONCE(kcm->rx_conn_id))
		kcm_cmsg_put_u32s(msg, KCM_CONN_ID, b->ids, known);
}

/*
 * The skb queued after @prev, or the head of the queue with no @prev.
 *
 * Context: lock_sock(sk) held; only its owner unlinks from the queue, so
 * @prev is still queued.
 */
static struct sk_buff *kcm_rx_peek_next(struct sock *sk,
					struct sk_buff *prev)
{
	struct sk_buff_head *queue = &sk->sk_receive_queue;
	struct sk_buff *skb;
	unsigned long irqf;

	spin_lock_irqsave(&queue->lock, irqf);
	skb = prev ? skb_peek_next(prev, queue) : skb_peek(queue);
	spin_unlock_irqrestore(&queue->lock, irqf);
	return skb;
}

/*
 * How many of the messages of @skb from message @idx (at @pos) on fit
 * in @room bytes, up to @max: their number, their bytes in *@bytes.
 * Their lengths and connection ids are written to @b's entries after
 * its last one, as far as it has room; the caller keeps those of the
 * messages it reads by counting them (b->n += n).
 *
 * Context: lock_sock() held.
 */
static unsigned int kcm_rx_fit(struct sk_buff *skb, unsigned int idx,
			       unsigned int pos, size_t room,
			       unsigned int max, unsigned int *bytes,
			       struct kcm_recv_batch *b)
{
	unsigned int end = kcm_rx_msg(skb)->next + kcm_rx_left(skb);
	u32 id = kcm_rx_msg(skb)->conn_id;
	unsigned int n = 0, len;

	*bytes = 0;
	while (n < max && idx + n < end) {
		len = kcm_rx_len_at(skb, idx + n, pos + *bytes);
		if (len > room - *bytes)
			break;
		kcm_recv_batch_set(b, b->n + n, len, id);
		*bytes += len;
		n++;
	}
	return n;
}

/*
 * The copy of @n messages of @skb from message @idx (at @pos) on faulted,
 * and a faulting copy winds @msg back to where it started: copy them
 * again one at a time, up to the first that faults.
 *
 * Context: lock_sock() held.
 * Return: how many were copied whole, their bytes in *@bytes.
 */
static unsigned int kcm_rx_copy_each(struct sk_buff *skb, unsigned int idx,
				     unsigned int pos, unsigned int n,
				     struct msghdr *msg, unsigned int *bytes)
{
	unsigned int i, len;

	*bytes = 0;
	for (i = 0; i < n; i++) {
		len = kcm_rx_len_at(skb, idx + i, pos + *bytes);
		if (skb_copy_datagram_msg(skb, pos + *bytes, msg, len))
			break;
		*bytes += len;
	}
	return i;
}

/* MSG_PEEK of kcm_recv_batch_more(): nothing leaves the queue. */
static size_t kcm_recv_batch_peek(struct kcm_sock *kcm, struct msghdr *msg,
				  size_t len, struct sk_buff *skb,
				  unsigned int max, struct kcm_recv_batch *b)
{
	struct kcm_rx_msg *rxm = kcm_rx_msg(skb);
	unsigned int idx = rxm->next, pos = rxm->pos, n, bytes;
	size_t added = 0;

	/* Past the message already copied. */
	pos += kcm_rx_len_at(skb, idx, pos);
	idx++;
	while (b->n < max) {
		if (idx >= rxm->next + kcm_rx_left(skb)) {
			skb = kcm_rx_peek_next(&kcm->sk, skb);
			if (!skb)
				break;
			rxm = kcm_rx_msg(skb);
			idx = rxm->next;
			pos = rxm->pos;
		}
		n = kcm_rx_fit(skb, idx, pos, len - added, max - b->n, &bytes,
			       b);
		if (!n)
			break;
		if (skb_copy_datagram_msg(skb, pos, msg, bytes)) {
			b->n += kcm_rx_copy_each(skb, idx, pos, n, msg, &bytes);
			added += bytes;
			break;
		}
		b->n += n;
		added += bytes;
		idx += n;
		pos += bytes;
	}
	return added;
}

/*
 * Read the first @n messages (@bytes) of @skb, the head of the queue,
 * unlinking it when they are all it has left.  A fault reads only the
 * messages copied whole before it.
 *
 * Context: lock_sock(kcm) held.
 * Return: the bytes of the messages read; *@fault is set on a fault.
 */
static unsigned int kcm_recv_batch_skb(struct kcm_sock *kcm,
				       struct msghdr *msg, struct sk_buff *skb,
				       unsigned int n, unsigned int bytes,
				       struct kcm_recv_batch *b, bool *fault)
{
	struct sk_buff_head *queue = &kcm->sk.sk_receive_queue;
	struct kcm_rx_msg *rxm = kcm_rx_msg(skb);
	bool whole = n == kcm_rx_left(skb);

	*fault = skb_copy_datagram_msg(skb, rxm->pos, msg, bytes);
	if (*fault) {
		n = kcm_rx_copy_each(skb, rxm->next, rxm->pos, n, msg, &bytes);
		whole = n == kcm_rx_left(skb);
	}
	if (whole)
		skb_unlink(skb, queue);
	/* kcm_rx_fit() wrote their entries. */
	b->n += n;
	if (n)
		kcm_rx_consume_msgs(kcm, skb, n, bytes, whole);
	return bytes;
}

/*
 * After a first whole message (@first when peeking), copy more whole
 * messages while they are already queued, fit in what is left of @len
 * and @b's count allows.  A fault stops the batch with the faulting
 * message, and those after it, left queued.
 *
 * Context: lock_sock(kcm) held.
 * Return: the bytes of the messages added.
 */
static size_t kcm_recv_batch_more(struct kcm_sock *kcm, struct msghdr *msg,
				  size_t len, int flags, struct sk_buff *first,
				  unsigned int max, struct kcm_recv_batch *b)
{
	struct sk_buff *skb;
	unsigned int n, bytes;
	size_t added = 0;
	bool fault = false;

	if (flags & MSG_PEEK)
		return kcm_recv_batch_peek(kcm, msg, len, first, max, b);

	while (b->n < max && !fault) {
		skb = kcm_rx_peek_next(&kcm->sk, NULL);
		if (!skb)
			break;
		n = kcm_rx_fit(skb, kcm_rx_msg(skb)->next, kcm_rx_msg(skb)->pos,
			       len - added, max - b->n, &bytes, b);
		if (!n)
			break;
		added += kcm_recv_batch_skb(kcm, msg, skb, n, bytes, b, &fault);
	}
	return added;
}

/**
 * kcm_recvmsg() - read one message, or the next piece of one
 * @sock: a KCM socket
 * @msg: where to put it
 * @len: room in @msg
 * @flags: MSG_DONTWAIT, MSG_PEEK
 *
 * A SOCK_DGRAM message that does not fit ends the record anyway: the rest
 * is discarded and MSG_TRUNC says so.  A SOCK_SEQPACKET reader gets the
 * rest with the next calls, MSG_EOR marking the last piece.  A message
 * that faults while being copied stays at the head of the queue.
 *
 * Context: process context, may sleep.
 * Return: bytes read, or a negative errno.
 */
int kcm_recvmsg(struct socket *sock, struct msghdr *msg, size_t len,
		int flags)
{
	struct sock *sk = sock->sk;
	struct kcm_sock *kcm = kcm_sk(sk);
	unsigned int max = READ_ONCE(kcm->rx_batch);
	unsigned int avail, copied, offset;
	bool batched = false;
	/* Set here and by kcm_recv_batch_init() (kcmsock.c, "Stack buffers"). */
	struct kcm_recv_batch batch __uninitialized;
	bool unlinked = false;
	struct sk_buff *skb;
	int err = 0;
	long timeo;

	if (flags & MSG_OOB)
		return -EOPNOTSUPP;

	batch.lens = NULL;
	batch.kept = false;
	if (max > 1) {
		max = kcm_recv_batch_room(kcm, msg, max);
		batched = max > 0;
	}
	timeo = sock_rcvtimeo(sk, flags & MSG_DONTWAIT);
	lock_sock(sk);
	skb = kcm_rx_wait(kcm, timeo, len, flags, &unlinked, &err);
	if (!skb)
		goto out;
	/*
	 * After the wait, which lets the socket go while it sleeps: another
	 * reader may replace the socket's kept array meanwhile.
	 */
	if (batched) {
		err = kcm_recv_batch_init(kcm, &batch, msg, max);
		if (err) {
			if (unlinked)
				skb_queue_head(&sk->sk_receive_queue, skb);
			goto out;
		}
	}

	offset = kcm_rx_msg(skb)->offset;
	avail = kcm_rx_cur_len(skb) - offset;
	copied = min_t(size_t, len, avail);
	err = skb_copy_datagram_msg(skb, kcm_rx_msg(skb)->pos + offset, msg,
				    copied);
	if (err) {
		if (unlinked)
			skb_queue_head(&sk->sk_receive_queue, skb);
		goto out;
	}

	err = copied;
	if (copied == avail)
		msg->msg_flags |= MSG_EOR;
	else if (sk->sk_type == SOCK_DGRAM)
		msg->msg_flags |= MSG_TRUNC | MSG_EOR;
	if (!batched)
		kcm_conn_rx_cmsg(kcm, msg, skb);
	else
		kcm_recv_batch_add(&batch, copied, kcm_rx_msg(skb)->conn_id);
	if (!(flags & MSG_PEEK))
		kcm_rx_consume(kcm, skb, copied, unlinked);
	/* Only a message read whole from its start begins a batch. */
	if (batched && !offset && copied == avail)
		err += kcm_recv_batch_more(kcm, msg, len - copied, flags,
					   flags & MSG_PEEK ? skb : NULL, max,
					   &batch);
	if (batched)
		kcm_recv_batch_cmsg(kcm, msg, &batch);
	kcm_rx_sock_join(kcm);
out:
	release_sock(sk);
	if (batched)
		kcm_recv_batch_free(&batch);
	return err;
}

#if IS_ENABLED(CONFIG_AF_KCM_KUNIT_TEST)
#include "kcm_test.c"
#endif
