// SPDX-License-Identifier: GPL-2.0-only
/*
 * Kernel Connection Multiplexor: delivering framed messages to the KCM
 * sockets of a mux, and reading them (recvmsg(), KCM_RECV_BATCH).  The
 * messages come from the framing of each psock (kcm_strp.c).
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
 *
 * Steering by key
 * ---------------
 * While the mux has a key function (kcm_steer.c), a message with a key
 * goes to the socket that owns the key, not to the rotation: queued on
 * it when it is in the rotation and can take it, else parked on its
 * steering hold (struct kcm_steer_sock.hold), where it counts as held by
 * its psock just as on rx_hold.  A socket that rejoins the rotation takes
 * its hold first.  Invariants, under the mux lock:
 *  - A socket's hold holds only messages of keys it owns, in the order
 *    their connections carried them, and only while it is out of the
 *    rotation or could not be charged for the first of them.
 *  - Everything on rx_hold is newer than any message of the same key on
 *    a socket's hold or receive queue; so a socket that leaves gives its
 *    queued and held messages back at the head of rx_hold, and when keys
 *    change owner (a socket joined, or steering stopped) every hold goes
 *    back there, to be handed out again in order.
 *  - Keyed messages on rx_hold are cut by owner as they leave it
 *    (__kcm_steer_sort()), so only a lack of memory, or an unkeyed
 *    message no socket can take, stops rx_hold at its head.
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

/* Receiving sockets remembered per batch, to wake each once. */
#define KCM_RX_WAKE_MAX		8
/* How soon sockets short of memory try to take messages again. */
#define KCM_RX_MEM_RETRY	(HZ / 10)
/* Sockets short of memory whose cgroups one run of rx_mem_work reclaims. */
#define KCM_RX_MEM_RECLAIM	8
/* How far a psock's charge may lag behind its messages leaving the mux;
 * also what a socket short of memory makes its cgroup reclaim.
 */
#define KCM_RX_MEM_SLACK	(256 * 1024)
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
 * Charge @kcm for @skb, which it then owns (kcm_mem_rx_charge()).  When
 * its memory cgroup (or net.kcm.mem) refuses, the socket leaves the
 * rotation until memory frees (kcm_rx_mem_work()).
 *
 * Context: mux->lock held.
 * Return: whether it was charged.
 */
static bool kcm_rx_charge(struct kcm_mux *mux, struct kcm_sock *kcm,
			  struct sk_buff *skb)
{
	lockdep_assert_held(&mux->lock);
	if (kcm_mem_rx_charge(&kcm->sk, skb)) {
		if (unlikely(kcm->rx_mem_retried))
			kcm->rx_mem_retried = false;
		return true;
	}
	__kcm_rx_remove(kcm);
	kcm->rx_mem_short = true;
	kcm_stat_add(&mux->mstats.rx_mem_short, 1);
	queue_delayed_work(system_wq, &mux->rx_mem_work,
			   kcm->rx_mem_retried ? KCM_RX_MEM_RETRY : 0);
	return false;
}

/*
 * The next socket of the rotation with room that could be charged for
 * @skb, which it now owns (kcm_mem_rx_charge()).  One whose memory cgroup
 * (or net.kcm.mem) refused leaves the rotation until memory frees: the
 * mux makes its cgroup reclaim and tries it again at once, then a while
 * later each time (kcm_rx_mem_work()).
 *
 * Context: mux->lock held.
 * Return: the socket, or NULL when none could take @skb.
 */
static struct kcm_sock *__kcm_rx_pick_for(struct kcm_mux *mux,
					  struct sk_buff *skb)
{
	struct kcm_sock *kcm;

	lockdep_assert_held(&mux->lock);
	while ((kcm = __kcm_rx_pick(mux))) {
		if (kcm_rx_charge(mux, kcm, skb))
			return kcm;
	}
	return NULL;
}

/*
 * Can @kcm, which owns the keys of @skb, take it now?  Only from the
 * rotation and with room; then it is charged for @skb and owns it.  A
 * socket that cannot leaves the rotation, as in __kcm_rx_pick_for().
 *
 * Context: mux->lock held.
 */
static bool __kcm_rx_take(struct kcm_mux *mux, struct kcm_sock *kcm,
			  struct sk_buff *skb)
{
	lockdep_assert_held(&mux->lock);
	if (!kcm->rx_ready)
		return false;
	if (!kcm_rx_has_room(kcm)) {
		__kcm_rx_remove(kcm);
		return false;
	}
	return kcm_rx_charge(mux, kcm, skb);
}

/*
 * @skb, charged to @kcm (__kcm_rx_pick_for()), joins its receive queue.
 * The reader is woken now, or with the rest of the batch when @wake is
 * given.
 *
 * Context: mux->lock held, which keeps @kcm alive.
 */
static void __kcm_rx_queue(struct kcm_sock *kcm, struct sk_buff *skb,
			   struct kcm_rx_wake *wake)
{
	struct sock *sk = &kcm->sk;

	lockdep_assert_held(&kcm->mux->lock);
	trace_kcm_rx_deliver(kcm, skb);
	skb_queue_tail(&sk->sk_receive_queue, skb);
	if (!kcm_rx_wake_later(wake, kcm))
		sk->sk_data_ready(sk);
}

/*
 * @psock holds less on the mux than it did: it reads again once half of
 * what it may hold has gone, and framing runs when its TCP socket is
 * charged too much.
 *
 * Context: mux->lock held.
 */
static void __kcm_rx_psock_check(struct kcm_mux *mux, struct kcm_psock *psock)
{
	lockdep_assert_held(&mux->lock);
	if (psock->rx_paused &&
	    psock->rx_held <= READ_ONCE(psock->sk->sk_rcvbuf) / 2) {
		WRITE_ONCE(psock->rx_paused, false);
		trace_kcm_psock_resume(psock);
		kcm_strp_kick(psock);
	} else if (READ_ONCE(psock->strp.charged) >
		   psock->rx_held + KCM_RX_MEM_SLACK) {
		/* Its TCP socket is charged too much: framing fixes that. */
		kcm_strp_kick(psock);
	}
}

/**
 * __kcm_rx_unhold() - a held message leaves the mux's hold queue, or a
 *	socket's steering hold
 * @mux: the mux
 * @skb: a message just taken off it
 *
 * Its psock may read again once half of what it may hold has gone.
 *
 * Context: mux->lock held.
 */
void __kcm_rx_unhold(struct kcm_mux *mux, struct sk_buff *skb)
{
	struct kcm_psock *psock = kcm_rx_msg(skb)->psock;

	lockdep_assert_held(&mux->lock);
	if (!psock)
		return;

	kcm_rx_msg(skb)->psock = NULL;
	WRITE_ONCE(psock->rx_held, psock->rx_held - skb->truesize);
	__kcm_rx_psock_check(mux, psock);
}

/*
 * Park @skb at the tail of the mux's rx_hold (@owner NULL) or of the
 * steering hold of @owner, or at the head of rx_hold (@head).  It counts
 * as held by @psock (NULL: by none), which stops reading once that is
 * more than its TCP socket's receive buffer, and remembers whom it waits
 * for.
 *
 * Context: mux->lock held.
 */
static void __kcm_rx_park(struct kcm_mux *mux, struct kcm_psock *psock,
			  struct sk_buff *skb, struct kcm_sock *owner,
			  bool head)
{
	lockdep_assert_held(&mux->lock);
	/* An unattaching psock has already had its held messages orphaned. */
	if (psock && !READ_ONCE(psock->rx_stopped)) {
		kcm_rx_msg(skb)->psock = psock;
		WRITE_ONCE(psock->rx_held, psock->rx_held + skb->truesize);
		if (!psock->rx_paused &&
		    psock->rx_held > READ_ONCE(psock->sk->sk_rcvbuf)) {
			WRITE_ONCE(psock->rx_paused, true);
			trace_kcm_psock_pause(psock);
			kcm_stat_add(&psock->stats.rx_intr, 1);
		}
		/* Whom it waits for: the owner of its newest held message. */
		if (psock->rx_paused)
			WRITE_ONCE(psock->rx_wait,
				   owner ? (int)owner->index : -1);
	}
	if (owner)
		__skb_queue_tail(&owner->steer.hold, skb);
	else if (head)
		__skb_queue_head(&mux->rx_hold, skb);
	else
		__skb_queue_tail(&mux->rx_hold, skb);
}

/* Context: mux->lock held.  Parks a message no socket can take now. */
static void __kcm_rx_hold(struct kcm_mux *mux, struct kcm_psock *psock,
			  struct sk_buff *skb)
{
	__kcm_rx_park(mux, psock, skb, NULL, false);
	trace_kcm_rx_hold(psock, skb);
}

/*
 * Messages steered to @kcm, which owns their keys: queued on it when it
 * can take them and holds nothing older, else parked on its hold.
 *
 * Context: mux->lock held, which keeps @kcm alive.
 */
static void __kcm_rx_give(struct kcm_mux *mux, struct kcm_sock *kcm,
			  struct kcm_psock *psock, struct sk_buff *skb,
			  struct kcm_rx_wake *wake)
{
	bool now = skb_queue_empty(&kcm->steer.hold) &&
		   __kcm_rx_take(mux, kcm, skb);

	trace_kcm_rx_steer(kcm, skb, !now);
	if (now)
		__kcm_rx_queue(kcm, skb, wake);
	else
		__kcm_rx_park(mux, psock, skb, kcm, false);
}

/*
 * Hand the messages of @skb, held by @psock (or by none), to the sockets
 * that own their keys; those that have no owner (no key, or no socket
 * receives) go back to the head of rx_hold, as messages without a key.
 *
 * Context: mux->lock held; @skb is on no queue and nothing on rx_hold is
 * older than it.
 * Return: false when @skb could not be cut for want of memory: nothing
 * was done.
 */
static bool __kcm_rx_steer(struct kcm_mux *mux, struct kcm_psock *psock,
			   struct sk_buff *skb, struct kcm_rx_wake *wake)
{
	struct kcm_steer_part rest;
	struct kcm_sock *kcm, *tmp;
	struct sk_buff *part;
	LIST_HEAD(owners);

	lockdep_assert_held(&mux->lock);
	kcm_steer_part_init(&rest);
	if (__kcm_steer_sort(mux, skb, &owners, &rest))
		return false;
	list_for_each_entry_safe(kcm, tmp, &owners, steer.part.node) {
		list_del_init(&kcm->steer.part.node);
		while ((part = __skb_dequeue(&kcm->steer.part.skbs)))
			__kcm_rx_give(mux, kcm, psock, part, wake);
	}
	while ((part = __skb_dequeue_tail(&rest.skbs)))
		__kcm_rx_park(mux, psock, part, NULL, true);
	return true;
}

/*
 * The keyed skb at the head of rx_hold goes to the owners of its keys
 * (__kcm_rx_steer()).
 *
 * Context: mux->lock held.
 * Return: false when it could not be cut for want of memory: it stays,
 * and rx_mem_work tries again a while later.
 */
static bool __kcm_rx_dispatch_keyed(struct kcm_mux *mux, struct sk_buff *skb)
{
	struct kcm_psock *psock = kcm_rx_msg(skb)->psock;
	unsigned int size = skb->truesize;

	lockdep_assert_held(&mux->lock);
	__skb_unlink(skb, &mux->rx_hold);
	/* Its parts count as held instead, before the psock is judged. */
	kcm_rx_msg(skb)->psock = NULL;
	if (psock)
		WRITE_ONCE(psock->rx_held, psock->rx_held - size);
	if (!__kcm_rx_steer(mux, psock, skb, NULL)) {
		__kcm_rx_park(mux, psock, skb, NULL, true);
		queue_delayed_work(system_wq, &mux->rx_mem_work,
				   KCM_RX_MEM_RETRY);
		return false;
	}
	if (psock)
		__kcm_rx_psock_check(mux, psock);
	return true;
}

/* Context: mux->lock held.  Hands held messages to sockets with room. */
static void __kcm_rx_dispatch(struct kcm_mux *mux)
{
	struct kcm_sock *kcm;
	struct sk_buff *skb;

	lockdep_assert_held(&mux->lock);
	while ((skb = skb_peek(&mux->rx_hold))) {
		if (mux->steer.map && kcm_rx_keyed(skb)) {
			if (!__kcm_rx_dispatch_keyed(mux, skb))
				break;
			continue;
		}
		kcm = __kcm_rx_pick_for(mux, skb);
		if (!kcm)
			break;
		__skb_unlink(skb, &mux->rx_hold);
		__kcm_rx_unhold(mux, skb);
		__kcm_rx_queue(kcm, skb, NULL);
	}
}

/*
 * @kcm is back in the rotation: it takes the messages held for it, in
 * order, as long as it can.
 *
 * Context: mux->lock held.
 */
static void __kcm_rx_drain(struct kcm_sock *kcm)
{
	struct kcm_mux *mux = kcm->mux;
	struct sk_buff *skb;
	bool woken = false;

	lockdep_assert_held(&mux->lock);
	while ((skb = skb_peek(&kcm->steer.hold))) {
		if (!__kcm_rx_take(mux, kcm, skb))
			break;
		__skb_unlink(skb, &kcm->steer.hold);
		__kcm_rx_unhold(mux, skb);
		trace_kcm_rx_deliver(kcm, skb);
		skb_queue_tail(&kcm->sk.sk_receive_queue, skb);
		woken = true;
	}
	if (woken)
		kcm->sk.sk_data_ready(&kcm->sk);
}

/**
 * __kcm_rx_steer_changed() - keys changed owners: hand out held ones again
 * @mux: a mux whose key map changed (a socket joined) or went (steering
 *	stopped)
 *
 * Every socket's hold goes back to the head of rx_hold, each in its
 * order, and is handed out again: to the new owners, or in turn.
 *
 * Context: mux->lock held.
 */
void __kcm_rx_steer_changed(struct kcm_mux *mux)
{
	struct sk_buff_head all;
	struct kcm_sock *kcm;

	lockdep_assert_held(&mux->lock);
	__skb_queue_head_init(&all);
	list_for_each_entry(kcm, &mux->socks, mux_node)
		skb_queue_splice_tail_init(&kcm->steer.hold, &all);
	skb_queue_splice(&all, &mux->rx_hold);
	__kcm_rx_dispatch(mux);
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
 * is left in @skb for the caller to deliver.  A run no socket could be
 * charged for waits on the mux, and so does, behind it, the rest.
 *
 * Context: mux->lock held, nothing held on the mux.
 */
static void __kcm_rx_spread(struct kcm_psock *psock, struct sk_buff *skb,
			    struct kcm_rx_wake *wake)
{
	struct kcm_mux *mux = psock->mux;
	unsigned int parts = __kcm_rx_nready(mux, kcm_rx_left(skb));
	struct sk_buff *front;
	struct kcm_sock *kcm;

	lockdep_assert_held(&mux->lock);
	for (; parts > 1; parts--) {
		front = kcm_rx_split_front(skb, kcm_rx_left(skb) / parts);
		if (!front)
			return;
		kcm = __kcm_rx_pick_for(mux, front);
		if (!kcm) {
			__kcm_rx_hold(mux, psock, front);
			return;
		}
		__kcm_rx_queue(kcm, front, wake);
	}
}

/*
 * Count the messages of a newly framed @skb with and without a key
 * while the mux steers by key.
 *
 * Context: mux->lock held.
 */
static void __kcm_rx_count_keys(struct kcm_mux *mux, struct sk_buff *skb)
{
	struct kcm_rx_msg *rxm = kcm_rx_msg(skb);
	unsigned int i, end = rxm->next + kcm_rx_left(skb), keyed = 0;

	lockdep_assert_held(&mux->lock);
	for (i = rxm->next; i < end; i++)
		if (kcm_rx_key_at(skb, i) != KCM_NO_KEY)
			keyed++;
	kcm_stat_add(&mux->mstats.steered, keyed);
	kcm_stat_add(&mux->mstats.steer_nokey, end - rxm->next - keyed);
}

/*
 * A framed message or pack with keys goes to their owners, behind
 * whatever the mux holds.
 *
 * Context: mux->lock held.
 */
static void __kcm_rx_deliver_keyed(struct kcm_psock *psock,
				   struct sk_buff *skb,
				   struct kcm_rx_wake *wake)
{
	struct kcm_mux *mux = psock->mux;

	lockdep_assert_held(&mux->lock);
	if (!skb_queue_empty(&mux->rx_hold) ||
	    !__kcm_rx_steer(mux, psock, skb, wake))
		__kcm_rx_hold(mux, psock, skb);
	__kcm_rx_dispatch(mux);
}

/* Context: mux->lock held.  One framed message or pack goes out or waits. */
static void __kcm_rx_deliver(struct kcm_psock *psock, struct sk_buff *skb,
			     struct kcm_rx_wake *wake)
{
	struct kcm_mux *mux = psock->mux;
	struct kcm_sock *kcm;

	lockdep_assert_held(&mux->lock);
	if (unlikely(mux->steer.map)) {
		__kcm_rx_count_keys(mux, skb);
		if (kcm_rx_keyed(skb)) {
			__kcm_rx_deliver_keyed(psock, skb, wake);
			return;
		}
	}
	if (likely(skb_queue_empty(&mux->rx_hold))) {
		if (kcm_rx_left(skb) > 1)
			__kcm_rx_spread(psock, skb, wake);
		kcm = skb_queue_empty(&mux->rx_hold) ?
		      __kcm_rx_pick_for(mux, skb) : NULL;
		if (likely(kcm))
			__kcm_rx_queue(kcm, skb, wake);
		else
			__kcm_rx_hold(mux, psock, skb);
	} else {
		__kcm_rx_hold(mux, psock, skb);
		__kcm_rx_dispatch(mux);
	}
}

/**
 * kcm_rx_deliver() - hand framed messages to the mux
 * @psock: the psock they were framed by
 * @msgs: messages and packs, in order; emptied
 *
 * One mux lock and one wake-up per receiving socket for all of them.
 *
 * Context: the TCP socket's lock held (framing); takes mux->lock.
 */
void kcm_rx_deliver(struct kcm_psock *psock, struct sk_buff_head *msgs)
{
	/* Only its count needs a value (kcmsock.c, "Stack buffers"). */
	struct kcm_rx_wake wake __uninitialized;
	struct kcm_mux *mux = psock->mux;
	struct sk_buff *skb;

	if (skb_queue_empty(msgs))
		return;

	wake.n = 0;
	spin_lock_bh(&mux->lock);
	while ((skb = __skb_dequeue(msgs)))
		__kcm_rx_deliver(psock, skb, &wake);
	__kcm_rx_wake_all(&wake);
	spin_unlock_bh(&mux->lock);
}

/* Context: mux->lock held.  @psock is no longer named in @queue. */
static void __kcm_rx_forget(struct sk_buff_head *queue,
			    struct kcm_psock *psock)
{
	struct sk_buff *skb;

	skb_queue_walk(queue, skb) {
		if (kcm_rx_msg(skb)->psock == psock)
			kcm_rx_msg(skb)->psock = NULL;
	}
}

/**
 * __kcm_mux_psock_gone() - forget a psock in the messages it has held
 * @mux: its mux
 * @psock: a psock being unattached; it no longer reads
 *
 * Its held messages stay on the mux and on the sockets' steering holds,
 * and are delivered as usual.
 *
 * Context: mux->lock held.
 */
void __kcm_mux_psock_gone(struct kcm_mux *mux, struct kcm_psock *psock)
{
	struct kcm_sock *kcm;

	lockdep_assert_held(&mux->lock);
	__kcm_rx_forget(&mux->rx_hold, psock);
	list_for_each_entry(kcm, &mux->socks, mux_node)
		__kcm_rx_forget(&kcm->steer.hold, psock);
	WRITE_ONCE(psock->rx_held, 0);
}

/*
 * Sockets that left the rotation because their memory could not be
 * charged (kcm_rx_charge()) make their memory cgroups reclaim, then
 * try again, and with them the messages held on the mux; those still
 * short queue this work again, as does a held pack that could not be cut
 * by owner (__kcm_rx_dispatch_keyed()).
 *
 * Context: process context (workqueue); takes mux->lock.
 */
static void kcm_rx_mem_work(struct work_struct *work)
{
	struct kcm_mux *mux = container_of(to_delayed_work(work),
					   struct kcm_mux, rx_mem_work);
	struct kcm_sock *kcm, *reclaim[KCM_RX_MEM_RECLAIM];
	unsigned int i, n = 0;

	spin_lock_bh(&mux->lock);
	list_for_each_entry(kcm, &mux->socks, mux_node) {
		if (!kcm->rx_mem_short || n == ARRAY_SIZE(reclaim))
			continue;
		sock_hold(&kcm->sk);
		reclaim[n++] = kcm;
	}
	spin_unlock_bh(&mux->lock);

	for (i = 0; i < n; i++) {
		kcm_mem_reclaim(&reclaim[i]->sk, KCM_RX_MEM_SLACK);
		sock_put(&reclaim[i]->sk);
	}

	spin_lock_bh(&mux->lock);
	list_for_each_entry(kcm, &mux->socks, mux_node) {
		if (!kcm->rx_mem_short)
			continue;
		kcm->rx_mem_short = false;
		kcm->rx_mem_retried = true;
		__kcm_rx_join(kcm);
	}
	__kcm_rx_dispatch(mux);
	spin_unlock_bh(&mux->lock);
}

/**
 * kcm_mux_rx_init() - set up the receive side of a new mux
 * @mux: the mux
 *
 * Context: any.
 */
void kcm_mux_rx_init(struct kcm_mux *mux)
{
	skb_queue_head_init(&mux->rx_hold);
	INIT_DELAYED_WORK(&mux->rx_mem_work, kcm_rx_mem_work);
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

	cancel_delayed_work_sync(&mux->rx_mem_work);
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
 * Held messages are handed out at once: first those held for it.
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
	__kcm_rx_drain(kcm);
	__kcm_rx_dispatch(mux);
}

/**
 * __kcm_rx_enter() - a socket starts receiving
 * @kcm: a member socket with receiving enabled: new, or KCM_RECV_DISABLE
 *	cleared
 *
 * It takes its share of the keys (which may move messages held for the
 * others to it) and joins the rotation.
 *
 * Context: mux->lock held.
 */
void __kcm_rx_enter(struct kcm_sock *kcm)
{
	lockdep_assert_held(&kcm->mux->lock);
	if (__kcm_steer_join(kcm))
		__kcm_rx_steer_changed(kcm->mux);
	__kcm_rx_join(kcm);
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

/* Context: mux->lock held.  Keyed messages a leaving socket gives back. */
static void __kcm_rx_count_moved(struct kcm_mux *mux,
				 struct sk_buff_head *moved)
{
	struct sk_buff *skb;
	unsigned int n = 0;

	lockdep_assert_held(&mux->lock);
	if (!mux->steer.map)
		return;
	skb_queue_walk(moved, skb)
		if (kcm_rx_keyed(skb))
			n += kcm_rx_left(skb);
	kcm_stat_add(&mux->mstats.steer_moved, n);
}

/*
 * Move the unread messages of @kcm back to the mux, ahead of the messages
 * waiting there, and hand them to other sockets; then those held for it,
 * which are newer.  A message a SEQPACKET reader has started stays with
 * it when @keep_partial; the messages packed after it move on.  The
 * socket has left the steering set: its keys have new owners.
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
	skb_queue_splice_tail_init(&kcm->steer.hold, &moved);
	__kcm_rx_count_moved(mux, &moved);
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
	__kcm_steer_leave(kcm);
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
	if (disable) {
		__kcm_steer_leave(kcm);
		__kcm_rx_requeue(kcm, true);
	} else {
		__kcm_rx_enter(kcm);
	}
	spin_unlock_bh(&mux->lock);
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
#include "kcm_rx_test.c"
#endif
