// SPDX-License-Identifier: GPL-2.0-only
/*
 * Kernel Connection Multiplexor: the transmit path.
 *
 * Messages
 * --------
 * sendmsg() (and splice(), sendfile(): MSG_SPLICE_PAGES, or sendpage()
 * before 6.5, kcm_compat.h) build a message in kcm->tx_partial: a head skb
 * with further chunks on its frag_list, charged to the KCM socket's send
 * buffer.  When the message ends (DGRAM: a call without MSG_MORE;
 * SEQPACKET: MSG_EOR) it moves to the socket's write queue.  A copy fault
 * undoes everything the failing call added.  Pieces up to KCM_TX_LINEAR
 * bytes are carved from a per-socket page fragment cache and handed to
 * TCP by reference, so a small message is copied once and costs no
 * kmalloc().  Small whole messages of a batch share one such skb, a pack
 * (see "packs of small messages" below).  Spliced pages join the message
 * by reference.
 *
 * Writing
 * -------
 * A write to TCP hands it page references to the data of as many queued
 * messages as go out on that psock next (kcm_tx_gather(): up to
 * KCM_TX_SEGS segments or KCM_TX_WRITE_MAX bytes), so a sendmmsg() batch
 * of small messages costs one TCP call per batch, not one per message.
 * A lone small message, with nothing of its socket queued, is not queued
 * at all when its psock has room: TCP copies it from the sender's buffer
 * (kcm_tx_direct()).  What TCP does not take of it is queued as a message
 * already written up to kcm->tx_offset on that psock, so the rest follows
 * there.
 *
 * Reservation
 * -----------
 * A KCM socket with queued messages reserves one psock of its mux and
 * writes to it until its queue is empty; messages are written whole and
 * one after another, so they never interleave on a connection.  Idle
 * psocks sit on mux->tx_idle; a socket that finds none waits on
 * mux->tx_waiters and is handed the next psock that becomes free, first
 * come first served.  A socket that has written KCM_TX_QUANTUM bytes
 * gives its psock to the next waiter at a message boundary, so N senders
 * over M < N connections all make progress.
 *
 * A socket whose queue is drained keeps its psock, idle (tx_hold is
 * KCM_TX_IDLE), while nobody waits: its next send needs no mux lock.  A
 * socket that needs a psock when none is free and nobody waits before it
 * takes an idle one in its own call, under the mux lock; the holder and
 * the taker race on tx_hold with cmpxchg() and the first to move it from
 * KCM_TX_IDLE wins, so the holder never writes to a psock it lost (an
 * idle holder has no message half written).  Before, the taker waited
 * while the holder's tx work gave the psock up and its own wrote the
 * message: two work items per handover when two sockets take turns on
 * one connection.
 *
 * A message addressed to a connection (KCM_CONN_ID, kcm_conn.c; not in
 * upstream Linux) needs that psock.  At the head of the queue it is a
 * message boundary, so the socket first gives up any other psock it
 * holds, then takes the one it needs if it is idle, or else waits on that
 * psock's tx_direct list.  A socket therefore never holds one psock while
 * it waits for another, so no cycle of waiters can form (no deadlock),
 * and waiting never blocks: the psock's next release kicks the waiter's
 * tx_work.  Waiters for any psock and for one psock take tickets from
 * the same counter and a freed psock goes to the oldest ticket among its
 * own waiters and the general ones, so neither kind starves the other;
 * the holder lets go at the end of its queue or after a quantum, as for
 * general waiters.  When the psock stops transmitting or is unattached,
 * its waiters are kicked and their message is dropped with ENOENT or
 * EPIPE, reported once as the KCM socket's error; such a message is never
 * sent on another connection.
 *
 * Writing
 * -------
 * Writes to TCP happen in process context only, in the sender's sendmsg()
 * or in kcm->tx_work, with MSG_DONTWAIT: when TCP's send buffer is full
 * the write stops and the TCP socket's write_space callback kicks
 * tx_work.  A socket that becomes writable (TCP room, a psock granted)
 * while its owner is in sendmsg() holding it is not kicked: the owner
 * writes before it lets the socket go (tx_in_call, tx_owed).  A failed
 * write stops transmission on that psock, posts the error on its TCP
 * socket and sends the whole message again on another psock.  With no
 * psock left, messages wait on the KCM socket and its send buffer
 * applies backpressure.
 */

#include <linux/bvec.h>
#include <linux/net.h>
#include <linux/skbuff.h>
#include <linux/uio.h>
#include <linux/workqueue.h>
#include <net/sock.h>
#include <net/tcp.h>
#include <net/kcm.h>
#include <trace/events/kcm.h>

#include "kcm_compat.h"

/* Bytes per chunk of a message. */
#define KCM_TX_CHUNK		(16 * PAGE_SIZE)
/* Chunks up to this size are linear. */
#define KCM_TX_LINEAR		(2048)
/* Largest message, whatever the send buffer. */
#define KCM_TX_MAX_MSG		(64 << 20)
/* Room for data of a pack of small messages sent in a batch. */
#define KCM_TX_PACK_ROOM	4096
/* Messages up to this size join packs. */
#define KCM_TX_PACK_MSG		1024
/* Most messages in one pack: their lengths are in its headroom. */
#define KCM_TX_PACK_MAX		64
/* Retry delay when TCP could not allocate memory. */
#define KCM_TX_RETRY		(HZ / 10)
/* Bytes a socket writes before it lets a waiting socket have its psock. */
#define KCM_TX_QUANTUM		(256 * 1024)
/* Longest a batched message waits for the end of its batch. */
#define KCM_TX_BATCH_WAIT	1
/* Lone messages up to this size are written straight to TCP. */
#define KCM_TX_DIRECT_MAX	2048
/* Longest wait for memory before a send looks again. */
#define KCM_TX_MEM_RETRY	(HZ / 10)

/* ---- reservation (mux->lock) ------------------------------------------ */

/* Context: any. */
static void kcm_tx_kick(struct kcm_sock *kcm)
{
	mod_delayed_work(system_wq, &kcm->tx_work, 0);
}

/*
 * @kcm can write now (a psock was granted to it, or its TCP socket has
 * room).  If its owner is in sendmsg() with the socket locked, it writes
 * before it lets go (kcm_tx_call_leave()): no work item, and no work item
 * waiting for the socket lock the owner holds.  Otherwise tx_work writes.
 *
 * Context: mux->lock held.
 */
static void __kcm_tx_owe(struct kcm_sock *kcm)
{
	lockdep_assert_held(&kcm->mux->lock);
	WRITE_ONCE(kcm->tx_owed, true);
	/* Pairs with kcm_tx_call_leave(). */
	smp_mb();
	if (!READ_ONCE(kcm->tx_in_call))
		kcm_tx_kick(kcm);
}

/*
 * The owner of @kcm starts writing for itself (sendmsg() with the socket
 * locked): what becomes writable is left to it (__kcm_tx_owe()).
 *
 * Context: lock_sock(kcm) held.
 */
static void kcm_tx_call_enter(struct kcm_sock *kcm)
{
	WRITE_ONCE(kcm->tx_in_call, true);
}

/*
 * The owner of @kcm stops writing for itself: before it lets the socket
 * go (or sleeps), did it become writable without a kick?
 *
 * Context: lock_sock(kcm) held.
 * Return: true when the caller must push.
 */
static bool kcm_tx_call_leave(struct kcm_sock *kcm)
{
	WRITE_ONCE(kcm->tx_in_call, false);
	/* Pairs with __kcm_tx_owe(). */
	smp_mb();
	if (!READ_ONCE(kcm->tx_owed))
		return false;
	WRITE_ONCE(kcm->tx_owed, false);
	return true;
}

/*
 * @kcm starts waiting on @list: mux->tx_waiters, or the tx_direct list of
 * @want, the psock its next message is addressed to.  It takes a ticket.
 *
 * Context: mux->lock held.
 */
static void __kcm_tx_wait(struct kcm_sock *kcm, struct list_head *list,
			  struct kcm_psock *want)
{
	struct kcm_mux *mux = kcm->mux;

	lockdep_assert_held(&mux->lock);
	list_add_tail(&kcm->tx_wait_node, list);
	kcm->tx_waiting = true;
	kcm->tx_want = want;
	kcm->tx_wait_seq = mux->tx_wait_next++;
	mux->tx_nwaiting++;
}

/* Context: mux->lock held.  @kcm stops waiting, if it waited. */
static void __kcm_tx_unwait(struct kcm_sock *kcm)
{
	struct kcm_mux *mux = kcm->mux;

	lockdep_assert_held(&mux->lock);
	if (!kcm->tx_waiting)
		return;
	list_del_init(&kcm->tx_wait_node);
	kcm->tx_waiting = false;
	kcm->tx_want = NULL;
	mux->tx_nwaiting--;
}

/*
 * @psock stopped transmitting or is going away: the sockets waiting for
 * it find that out in their tx work.
 *
 * Context: mux->lock held.
 */
static void __kcm_tx_wake_direct(struct kcm_psock *psock)
{
	struct kcm_sock *kcm, *tmp;

	lockdep_assert_held(&psock->mux->lock);
	list_for_each_entry_safe(kcm, tmp, &psock->tx_direct, tx_wait_node) {
		__kcm_tx_unwait(kcm);
		kcm_tx_kick(kcm);
	}
}

/* Context: mux->lock held.  Who has waited longest for @psock? */
static struct kcm_sock *__kcm_tx_next_waiter(struct kcm_mux *mux,
					     struct kcm_psock *psock)
{
	struct kcm_sock *any, *direct;

	lockdep_assert_held(&mux->lock);
	any = list_first_entry_or_null(&mux->tx_waiters, struct kcm_sock,
				       tx_wait_node);
	direct = list_first_entry_or_null(&psock->tx_direct, struct kcm_sock,
					  tx_wait_node);
	if (!direct)
		return any;
	if (!any)
		return direct;
	return direct->tx_wait_seq < any->tx_wait_seq ? direct : any;
}

/* Context: any; a lockless peek unless mux->lock is held.  Wanted? */
static bool kcm_tx_psock_wanted(struct kcm_mux *mux, struct kcm_psock *psock)
{
	return !list_empty_careful(&mux->tx_waiters) ||
	       !list_empty_careful(&psock->tx_direct);
}

/*
 * @psock, free and off every list, becomes @kcm's.  The byte count of
 * the quantum restarted when @kcm last gave a psock up.
 *
 * Context: mux->lock held.
 */
static void __kcm_tx_grant(struct kcm_sock *kcm, struct kcm_psock *psock)
{
	lockdep_assert_held(&kcm->mux->lock);
	kcm_stat_add(&psock->stats.reserved, 1);
	psock->tx_kcm = kcm;
	WRITE_ONCE(kcm->tx_hold, KCM_TX_ACTIVE);
	WRITE_ONCE(kcm->tx_psock, psock);
}

/*
 * @psock is no longer @kcm's, which is left holding it as @hold says
 * (KCM_TX_ACTIVE: holds none; KCM_TX_TAKEN: another socket took it).
 * Where the psock goes next is the caller's business.
 *
 * Context: mux->lock held.
 */
static void __kcm_tx_ungrant(struct kcm_sock *kcm, struct kcm_psock *psock,
			     int hold)
{
	lockdep_assert_held(&kcm->mux->lock);
	kcm_stat_add(&psock->stats.unreserved, 1);
	psock->tx_kcm = NULL;
	WRITE_ONCE(kcm->tx_psock, NULL);
	WRITE_ONCE(kcm->tx_hold, hold);
}

/*
 * Take @psock for @kcm from a socket that keeps it with nothing to send
 * (KCM_TX_IDLE, kcm_tx_release()), so that the psock changes hands in
 * the sender's own call rather than through the holder's tx work.  Only
 * a psock nobody waits for is taken.  The holder finds out under its
 * own socket lock, the next time it needs the psock (kcm_tx_claim()):
 * whichever of the two moves tx_hold away from KCM_TX_IDLE first wins.
 *
 * Context: mux->lock held; @kcm holds no psock.
 * Return: true when @psock is @kcm's now.
 */
static bool __kcm_tx_take(struct kcm_sock *kcm, struct kcm_psock *psock)
{
	struct kcm_sock *holder = psock->tx_kcm;

	lockdep_assert_held(&kcm->mux->lock);
	if (!holder || psock->tx_stopped || !list_empty(&psock->tx_direct))
		return false;
	if (cmpxchg(&holder->tx_hold, KCM_TX_IDLE, KCM_TX_TAKEN) !=
	    KCM_TX_IDLE)
		return false;
	__kcm_tx_ungrant(holder, psock, KCM_TX_TAKEN);
	__kcm_tx_grant(kcm, psock);
	return true;
}

/*
 * The first psock whose holder keeps it idle, taken for @kcm, when no
 * other socket waits for a psock (they were first).
 *
 * Context: mux->lock held; @kcm holds no psock.
 */
static struct kcm_psock *__kcm_tx_take_idle(struct kcm_sock *kcm)
{
	struct kcm_mux *mux = kcm->mux;
	struct kcm_psock *psock;

	lockdep_assert_held(&mux->lock);
	if (mux->tx_nwaiting != (kcm->tx_waiting ? 1 : 0))
		return NULL;
	list_for_each_entry(psock, &mux->psocks, mux_node)
		if (__kcm_tx_take(kcm, psock))
			return psock;
	return NULL;
}

/**
 * __kcm_tx_psock_ready() - a psock is free: give it to a waiter or idle it
 * @mux: its mux
 * @psock: a psock reserved to nobody
 *
 * Context: mux->lock held.
 */
void __kcm_tx_psock_ready(struct kcm_mux *mux, struct kcm_psock *psock)
{
	struct kcm_sock *kcm;

	lockdep_assert_held(&mux->lock);
	if (psock->tx_stopped)
		__kcm_tx_wake_direct(psock);
	if (psock->tx_stopped || psock->tx_orphan)
		return;

	kcm = __kcm_tx_next_waiter(mux, psock);
	if (!kcm) {
		list_add_tail(&psock->tx_node, &mux->tx_idle);
		return;
	}
	__kcm_tx_unwait(kcm);
	__kcm_tx_grant(kcm, psock);
	__kcm_tx_owe(kcm);
}

/*
 * A socket just started waiting: sockets that keep a psock with nothing
 * to send must give it up (kcm_tx_release() does, in their tx work).
 *
 * Context: mux->lock held.
 */
static void __kcm_tx_kick_idle_holders(struct kcm_mux *mux)
{
	struct kcm_psock *psock;

	lockdep_assert_held(&mux->lock);
	/* The waiter is listed before we look; pairs with kcm_tx_release(). */
	smp_mb();
	list_for_each_entry(psock, &mux->psocks, mux_node)
		if (psock->tx_kcm &&
		    READ_ONCE(psock->tx_kcm->tx_hold) == KCM_TX_IDLE)
			kcm_tx_kick(psock->tx_kcm);
}

/* Context: mux->lock held. */
static struct kcm_psock *__kcm_tx_reserve(struct kcm_sock *kcm)
{
	struct kcm_mux *mux = kcm->mux;
	struct kcm_psock *psock;

	lockdep_assert_held(&mux->lock);
	if (kcm->tx_psock)
		return kcm->tx_psock;

	psock = list_first_entry_or_null(&mux->tx_idle, struct kcm_psock,
					 tx_node);
	if (psock) {
		list_del_init(&psock->tx_node);
		__kcm_tx_grant(kcm, psock);
		return psock;
	}
	if (kcm->tx_want)
		__kcm_tx_unwait(kcm);
	psock = __kcm_tx_take_idle(kcm);
	if (psock) {
		__kcm_tx_unwait(kcm);
		return psock;
	}
	if (!kcm->tx_waiting) {
		__kcm_tx_wait(kcm, &mux->tx_waiters, NULL);
		__kcm_tx_kick_idle_holders(mux);
	}
	return NULL;
}

/*
 * Gives the socket's psock back; its next one gets a fresh quantum.
 *
 * Context: mux->lock held, and lock_sock(kcm), which guards tx_sent.
 */
static void __kcm_tx_unreserve(struct kcm_sock *kcm)
{
	struct kcm_psock *psock = kcm->tx_psock;

	lockdep_assert_held(&kcm->mux->lock);
	sock_owned_by_me(&kcm->sk);
	if (!psock)
		return;

	kcm->tx_sent = 0;
	__kcm_tx_ungrant(kcm, psock, KCM_TX_ACTIVE);
	__kcm_tx_psock_ready(kcm->mux, psock);
}

/*
 * Reserve psock @id for a message addressed to it (see "Reservation").
 *
 * Context: mux->lock held, and lock_sock(kcm) with no byte of the
 * socket's first message written yet.
 * Return: the psock, NULL while the socket waits for it, or
 * ERR_PTR(-ENOENT) / ERR_PTR(-EPIPE) when it is gone or stopped.
 */
static struct kcm_psock *__kcm_tx_reserve_id(struct kcm_sock *kcm, u32 id)
{
	struct kcm_mux *mux = kcm->mux;
	struct kcm_psock *psock;
	int err;

	lockdep_assert_held(&mux->lock);
	psock = __kcm_mux_psock_by_id(mux, id);
	err = __kcm_conn_tx_errno(psock);
	if (err)
		return ERR_PTR(err);
	if (kcm->tx_psock == psock)
		return psock;
	if (kcm->tx_waiting) {
		if (kcm->tx_want == psock)
			return NULL;
		__kcm_tx_unwait(kcm);
	}
	WARN_ON_ONCE(kcm->tx_offset);
	__kcm_tx_unreserve(kcm);

	if (!list_empty(&psock->tx_node)) {
		list_del_init(&psock->tx_node);
		__kcm_tx_grant(kcm, psock);
		return psock;
	}
	if (!mux->tx_nwaiting && __kcm_tx_take(kcm, psock))
		return psock;
	__kcm_tx_wait(kcm, &psock->tx_direct, psock);
	/* A holder with nothing to send lets go; see kcm_tx_release(). */
	smp_mb();
	if (psock->tx_kcm && READ_ONCE(psock->tx_kcm->tx_hold) == KCM_TX_IDLE)
		kcm_tx_kick(psock->tx_kcm);
	return NULL;
}

/*
 * Make sure the psock we keep is still ours before we use it: while we
 * held it idle, another socket may have taken it (__kcm_tx_take()).
 *
 * Context: lock_sock(kcm) held, with kcm->tx_psock read before.
 * Return: true when that psock is ours, now in use.
 */
static bool kcm_tx_claim(struct kcm_sock *kcm)
{
	int hold = READ_ONCE(kcm->tx_hold);

	if (hold == KCM_TX_IDLE)
		hold = cmpxchg(&kcm->tx_hold, KCM_TX_IDLE, KCM_TX_ACTIVE);
	return hold != KCM_TX_TAKEN;
}

/*
 * The psock for the socket's first message, addressed as @to: the
 * reserved one when it will do, else one reserved now.
 *
 * Context: lock_sock(kcm) held; takes mux->lock.
 * Return: as __kcm_tx_reserve_id(); only addressed messages get errors.
 */
static struct kcm_psock *kcm_tx_reserve(struct kcm_sock *kcm,
					const struct kcm_tx_msg *to)
{
	struct kcm_psock *psock;

	sock_owned_by_me(&kcm->sk);
	psock = READ_ONCE(kcm->tx_psock);
	if (psock && kcm_tx_claim(kcm) &&
	    (!to->directed || psock->index == to->conn_id))
		return psock;

	/* Taken from us: the next psock gets a quantum of its own. */
	if (READ_ONCE(kcm->tx_hold) == KCM_TX_TAKEN)
		kcm->tx_sent = 0;
	spin_lock_bh(&kcm->mux->lock);
	if (to->directed)
		psock = __kcm_tx_reserve_id(kcm, to->conn_id);
	else
		psock = __kcm_tx_reserve(kcm);
	spin_unlock_bh(&kcm->mux->lock);
	return psock;
}

/*
 * The queue is drained.  While no socket waits for a psock, keep ours,
 * idle: the next send then needs no mux lock, and a socket that needs a
 * psock may take it in its own call (__kcm_tx_take()).  A socket that
 * starts waiting instead (it came after others) kicks our tx work, which
 * comes back here and gives the psock up.
 *
 * Once idle the psock may be taken, and then unattached and freed, at any
 * moment: we look at it under RCU (kcm_psock_free()).
 *
 * Context: lock_sock(kcm) held; may take mux->lock.
 */
static void kcm_tx_release(struct kcm_sock *kcm)
{
	struct kcm_mux *mux = kcm->mux;
	struct kcm_psock *psock;
	bool wanted = false;
	int hold;

	sock_owned_by_me(&kcm->sk);
	rcu_read_lock();
	psock = READ_ONCE(kcm->tx_psock);
	hold = READ_ONCE(kcm->tx_hold);
	if (psock && hold != KCM_TX_TAKEN) {
		/* Only we leave KCM_TX_ACTIVE; others only KCM_TX_IDLE. */
		if (hold == KCM_TX_ACTIVE)
			WRITE_ONCE(kcm->tx_hold, KCM_TX_IDLE);
		/* Pairs with __kcm_tx_kick_idle_holders() and friends. */
		smp_mb();
		wanted = kcm_tx_psock_wanted(mux, psock);
	}
	rcu_read_unlock();
	if (!wanted)
		return;

	spin_lock_bh(&mux->lock);
	__kcm_tx_unreserve(kcm);
	spin_unlock_bh(&mux->lock);
}

/*
 * At a message boundary, after a quantum of bytes, let the first waiting
 * socket have the psock and queue up behind it.
 *
 * Context: lock_sock(kcm) held; takes mux->lock.
 */
static void kcm_tx_maybe_yield(struct kcm_sock *kcm)
{
	struct kcm_psock *psock = kcm->tx_psock;
	struct kcm_mux *mux = kcm->mux;

	if (kcm->tx_sent < KCM_TX_QUANTUM || !psock || kcm->tx_offset)
		return;

	if (kcm_tx_psock_wanted(mux, psock)) {
		spin_lock_bh(&mux->lock);
		if (kcm->tx_psock == psock && kcm_tx_psock_wanted(mux, psock)) {
			__kcm_tx_unreserve(kcm);
			__kcm_tx_reserve(kcm);
		}
		spin_unlock_bh(&mux->lock);
	}
	/* Nobody else wants it (or we got a psock anew): a new quantum. */
	kcm->tx_sent = 0;
}

/* ---- packs of small messages -------------------------------------------- */

/*
 * Small whole messages sent in a batch (sendmmsg(), MSG_BATCH) share one
 * skb, a pack: their bytes back to back in its linear data, their lengths
 * in its headroom.  A pack costs one allocation and, written to TCP, one
 * or two page segments however many messages it holds.  It is a unit of
 * the queue like a message (written whole to one psock, never
 * interleaved), except where a write stops part way: the messages it had
 * written whole are sent, and only the rest is sent again elsewhere or
 * dropped.
 */

/* Context: lock_sock(kcm) held.  @n more (or fewer) messages queued. */
static void kcm_tx_queued_add(struct kcm_sock *kcm, int n)
{
	WRITE_ONCE(kcm->tx_queued, kcm->tx_queued + n);
}

/*
 * May a whole message of @len bytes, addressed as @to, join @skb, the
 * last skb of the write queue?
 *
 * Context: lock_sock(kcm) held.
 */
static bool kcm_tx_pack_fits(struct sk_buff *skb, size_t len,
			     const struct kcm_tx_msg *to)
{
	const struct kcm_tx_msg *txm;

	if (!skb)
		return false;
	txm = kcm_tx_msg(skb);
	return txm->pack && !txm->retried && txm->nmsgs < KCM_TX_PACK_MAX &&
	       skb_tailroom(skb) >= len && txm->directed == to->directed &&
	       (!to->directed || txm->conn_id == to->conn_id);
}

/* Context: lock_sock(kcm) held.  The fragment cache's page is let go. */
static void kcm_tx_frag_uncharge(struct kcm_sock *kcm)
{
	if (kcm->tx_frag_charged)
		kcm_mem_tx_uncharge(&kcm->sk, kcm->tx_frag_charged);
	kcm->tx_frag_page = NULL;
	kcm->tx_frag_charged = 0;
}

/*
 * An skb for a small message or chunk, its head carved from the socket's
 * fragment cache.  The cache's page is charged to the socket whole while
 * the cache holds it (skbs carved from it are charged their own truesize
 * besides): a socket that sent once keeps a page.
 *
 * Context: lock_sock(kcm) held, process context.
 * Return: the skb, ERR_PTR(-ENOMEM) or ERR_PTR(-ENOBUFS) (the new page's
 * charge was refused).
 */
static struct sk_buff *kcm_tx_frag_skb(struct kcm_sock *kcm,
				       unsigned int size)
{
	struct sk_buff *skb = kcm_frag_skb(&kcm->tx_frag, size, GFP_KERNEL);
	struct page *page;

	if (!skb)
		return ERR_PTR(-ENOMEM);
	page = virt_to_head_page(skb->head);
	if (likely(page == kcm->tx_frag_page))
		return skb;
	if (!kcm_mem_tx_charge(&kcm->sk, page_size(page))) {
		kfree_skb(skb);
		return ERR_PTR(-ENOBUFS);
	}
	kcm_tx_frag_uncharge(kcm);
	kcm->tx_frag_page = page;
	kcm->tx_frag_charged = page_size(page);
	return skb;
}

/*
 * An empty pack addressed as @to, charged to the socket.  Its head comes
 * from the socket's page fragment cache, so TCP takes it by reference.
 *
 * Context: lock_sock(kcm) held, process context.
 * Return: the pack, ERR_PTR(-ENOMEM) or ERR_PTR(-ENOBUFS) (its memory
 * cgroup or net.kcm.mem refused the charge).
 */
static struct sk_buff *kcm_tx_pack_new(struct kcm_sock *kcm,
				       const struct kcm_tx_msg *to)
{
	unsigned int lsize = KCM_TX_PACK_MAX * sizeof(u16);
	struct kcm_tx_msg *txm;
	struct sk_buff *skb;

	skb = kcm_tx_frag_skb(kcm, lsize + KCM_TX_PACK_ROOM);
	if (IS_ERR(skb))
		return skb;
	if (!kcm_mem_tx_charge(&kcm->sk, skb->truesize)) {
		kfree_skb(skb);
		return ERR_PTR(-ENOBUFS);
	}
	skb_reserve(skb, lsize);
	txm = kcm_tx_msg(skb);
	memset(skb->cb, 0, sizeof(skb->cb));
	txm->conn_id = to->conn_id;
	txm->directed = to->directed;
	txm->pack = true;
	kcm_mem_tx_own(&kcm->sk, skb);
	return skb;
}

/*
 * A whole small message joins the pack last in the write queue or, in a
 * batch (MSG_BATCH: more follow), starts a new one.
 *
 * Context: lock_sock(kcm) held, process context.
 * Return: 1 when the message is queued so, 0 when it does not go in a
 * pack, or -ENOMEM / -ENOBUFS / -EFAULT with nothing added.
 */
static int kcm_tx_pack_add(struct kcm_sock *kcm, struct msghdr *msg,
			   size_t len, const struct kcm_tx_msg *to)
{
	struct sk_buff_head *queue = &kcm->sk.sk_write_queue;
	struct sk_buff *skb = skb_peek_tail(queue);
	struct kcm_tx_msg *txm;
	bool fresh = false;

	if (len > KCM_TX_PACK_MSG || kcm->tx_partial)
		return 0;
	if (!kcm_tx_pack_fits(skb, len, to)) {
		if (!(msg->msg_flags & MSG_BATCH))
			return 0;
		skb = kcm_tx_pack_new(kcm, to);
		if (IS_ERR(skb))
			return PTR_ERR(skb);
		fresh = true;
	}
	if (!copy_from_iter_full(skb_tail_pointer(skb), len,
				 &msg->msg_iter)) {
		if (fresh)
			kfree_skb(skb);
		return -EFAULT;
	}
	skb_put(skb, len);
	txm = kcm_tx_msg(skb);
	kcm_pack_lens(skb)[txm->nmsgs++] = len;
	if (fresh)
		__skb_queue_tail(queue, skb);
	kcm_tx_queued_add(kcm, 1);
	return 1;
}

/* Context: lock_sock(kcm) held.  @n messages of @bytes went to @psock. */
static void kcm_tx_count(struct kcm_sock *kcm, struct kcm_psock *psock,
			 unsigned int n, unsigned int bytes)
{
	kcm_stat_add(&kcm->stats.tx_msgs, n);
	kcm_stat_add(&kcm->stats.tx_bytes, bytes);
	kcm_stat_add(&psock->stats.tx_msgs, n);
	kcm_stat_add(&psock->stats.tx_bytes, bytes);
}

/*
 * @skb, at the head of the queue, was written up to kcm->tx_offset on
 * @psock, which it now leaves.  For a pack, the messages written whole
 * are sent (counted, and taken out of it) and it goes on from the first
 * one that was not.
 *
 * Context: lock_sock(kcm) held.
 */
static void kcm_tx_pack_trim_sent(struct kcm_sock *kcm,
				  struct kcm_psock *psock, struct sk_buff *skb)
{
	struct kcm_tx_msg *txm = kcm_tx_msg(skb);
	u16 *lens = kcm_pack_lens(skb);
	unsigned int n = 0, bytes = 0;

	sock_owned_by_me(&kcm->sk);
	if (!txm->pack)
		return;
	while (n < txm->nmsgs && bytes + lens[n] <= kcm->tx_offset)
		bytes += lens[n++];
	if (!n)
		return;
	kcm_tx_count(kcm, psock, n, bytes);
	__skb_pull(skb, bytes);
	memmove(lens, lens + n, (txm->nmsgs - n) * sizeof(u16));
	txm->nmsgs -= n;
	kcm->tx_offset -= bytes;
	kcm_tx_queued_add(kcm, -(int)n);
}

/* ---- writing to TCP ---------------------------------------------------- */

/*
 * Every byte of a message to send is in a page: small chunks have a head
 * carved from a page fragment cache (kcm_tx_alloc_chunk()), other data is
 * in page fragments.  A write to TCP therefore hands it page references,
 * several messages at a time (kcm_tcp_send_pages_locked(), kcm_compat.h).
 */

/* Segments of one write to TCP, and bytes gathered before a write. */
#define KCM_TX_SEGS		16
#define KCM_TX_WRITE_MAX	(64 * 1024)

/* Page segments of the data of one write to TCP. */
struct kcm_tx_vec {
	struct bio_vec bv[KCM_TX_SEGS];
	unsigned int nr;
	size_t len;
};

/*
 * A write to a psock's TCP socket: straight to TCP, under its socket
 * lock, or through kTLS (kcm_tls.c), whose sendmsg() takes that lock
 * itself.  kcm_tx_io_begin() asks the psock how (kcm_psock_io()).
 */
struct kcm_tx_io {
	struct kcm_psock *psock;
	int how;
};

/*
 * Context: process context; takes lock_sock() of the TCP socket, which
 * a plain TCP write keeps until kcm_tx_io_end().
 * Return: 0; -EAGAIN while kTLS has no transmit keys yet (the caller
 * tries again later); -EOPNOTSUPP when the psock stopped for a ULP.
 */
static int kcm_tx_io_begin(struct kcm_tx_io *io, struct kcm_psock *psock)
{
	struct sock *csk = psock->sk;
	int how;

	lock_sock(csk);
	how = kcm_psock_io(psock, true);
	if (how != KCM_IO_TCP)
		release_sock(csk);
	if (how < 0)
		return how;
	io->psock = psock;
	io->how = how;
	return how == KCM_IO_WAIT ? -EAGAIN : 0;
}

/*
 * Context: between kcm_tx_io_begin() and kcm_tx_io_end().
 * Return: bytes written (maybe fewer than @len), or a negative errno.
 */
static int kcm_tx_io_send(const struct kcm_tx_io *io, struct bio_vec *bv,
			  unsigned int nr, size_t len, int flags)
{
	if (io->how == KCM_IO_TLS)
		return kcm_tls_send_pages(io->psock->sk, bv, nr, len, flags);
	return kcm_tcp_send_pages_locked(io->psock->sk, bv, nr, len, flags);
}

/* Context: after a kcm_tx_io_begin() that returned 0. */
static void kcm_tx_io_end(const struct kcm_tx_io *io)
{
	if (io->how == KCM_IO_TCP)
		release_sock(io->psock->sk);
}

/* Context: any.  Appends one segment; false when @v is full. */
static bool kcm_tx_vec_add(struct kcm_tx_vec *v, struct page *page,
			   unsigned int off, unsigned int len)
{
	if (v->nr == KCM_TX_SEGS)
		return false;
	bvec_set_page(&v->bv[v->nr++], page, len, off);
	v->len += len;
	return true;
}

/* Context: any.  Bytes of @skb itself, without its frag_list. */
static unsigned int kcm_tx_own_len(const struct sk_buff *skb)
{
	unsigned int len = skb_headlen(skb);
	int i;

	for (i = 0; i < skb_shinfo(skb)->nr_frags; i++)
		len += skb_frag_size(&skb_shinfo(skb)->frags[i]);
	return len;
}

/*
 * Add @skb's own data (linear part and page fragments, not its frag_list)
 * from @off on to @v, the linear part split at page boundaries.
 *
 * Context: any.
 * Return: bytes added, fewer when @v filled up; -EINVAL for a linear part
 * that is not in a page fragment.
 */
static int kcm_tx_vec_skb(struct kcm_tx_vec *v, const struct sk_buff *skb,
			  unsigned int off)
{
	unsigned int headlen = skb_headlen(skb), added = 0, n;
	const skb_frag_t *frag;
	void *data;
	int i;

	if (off < headlen && WARN_ON_ONCE(!skb->head_frag))
		return -EINVAL;
	for (; off < headlen; off += n, added += n) {
		data = skb->data + off;
		n = min_t(unsigned int, headlen - off,
			  PAGE_SIZE - offset_in_page(data));
		if (!kcm_tx_vec_add(v, virt_to_page(data),
				    offset_in_page(data), n))
			return added;
	}
	off -= headlen;
	for (i = 0; i < skb_shinfo(skb)->nr_frags; i++) {
		frag = &skb_shinfo(skb)->frags[i];
		n = skb_frag_size(frag);
		if (off >= n) {
			off -= n;
			continue;
		}
		if (!kcm_tx_vec_add(v, skb_frag_page(frag),
				    skb_frag_off(frag) + off, n - off))
			return added;
		added += n - off;
		off = 0;
	}
	return added;
}

/* Context: any.  The skb after @skb in the message @head. */
static struct sk_buff *kcm_tx_next_skb(struct sk_buff *head,
				       struct sk_buff *skb)
{
	return skb == head ? skb_shinfo(head)->frag_list : skb->next;
}

/*
 * Add the message @head from @off on to @v.
 *
 * Context: any.
 * Return: bytes added, fewer than the rest of the message when @v filled
 * up, or -EINVAL.
 */
static int kcm_tx_vec_msg(struct kcm_tx_vec *v, struct sk_buff *head,
			  unsigned int off)
{
	unsigned int pos = 0, added = 0, own;
	struct sk_buff *skb;
	int n;

	for (skb = head; skb; skb = kcm_tx_next_skb(head, skb)) {
		own = kcm_tx_own_len(skb);
		if (off < pos + own) {
			n = kcm_tx_vec_skb(v, skb, off - pos);
			if (n < 0)
				return n;
			added += n;
			off += n;
			if (off < pos + own)
				break;
		}
		pos += own;
	}
	return added;
}

/*
 * Write the message @head from *@off on through @io until it is all
 * written or TCP has no room.  With @more another message follows.
 *
 * Context: between kcm_tx_io_begin() and kcm_tx_io_end().
 * Return: 0 when the whole message is written, -EAGAIN, or an errno.
 */
static int kcm_tx_send_msg(const struct kcm_tx_io *io, struct sk_buff *head,
			   unsigned int *off, bool more)
{
	/* Filled before use (kcmsock.c, "Stack buffers"). */
	struct kcm_tx_vec v __uninitialized;
	int n, ret;

	while (*off < head->len) {
		v.nr = 0;
		v.len = 0;
		n = kcm_tx_vec_msg(&v, head, *off);
		if (n < 0)
			return n;
		ret = kcm_tx_io_send(io, v.bv, v.nr, v.len,
				     MSG_DONTWAIT | MSG_NOSIGNAL |
				     (more || *off + n < head->len ?
				      MSG_MORE : 0));
		if (ret <= 0)
			return ret ? ret : -EAGAIN;
		*off += ret;
	}
	return 0;
}

/* Context: any.  May the message @skb go out on @psock? */
static bool kcm_tx_for_psock(struct sk_buff *skb, struct kcm_psock *psock)
{
	const struct kcm_tx_msg *to = kcm_tx_msg(skb);

	return !to->directed || to->conn_id == psock->index;
}

/*
 * Gather the queued messages that go out on @psock next into @v: the rest
 * of the first (kcm->tx_offset) and those behind it, up to one addressed
 * to another connection, KCM_TX_SEGS segments or KCM_TX_WRITE_MAX bytes.
 * *@more tells whether data for @psock stays behind.
 *
 * Context: lock_sock(kcm) held.
 * Return: 0 or -EINVAL.
 */
static int kcm_tx_gather(struct kcm_sock *kcm, struct kcm_psock *psock,
			 struct kcm_tx_vec *v, bool *more)
{
	unsigned int off = kcm->tx_offset;
	struct sk_buff *skb;
	int n;

	v->nr = 0;
	v->len = 0;
	*more = false;
	skb_queue_walk(&kcm->sk.sk_write_queue, skb) {
		if (!kcm_tx_for_psock(skb, psock))
			break;
		if (v->len >= KCM_TX_WRITE_MAX) {
			*more = true;
			break;
		}
		n = kcm_tx_vec_msg(v, skb, off);
		if (n < 0)
			return n;
		if (off + n < skb->len) {
			*more = true;
			break;
		}
		off = 0;
	}
	return 0;
}

/* Context: lock_sock(kcm) held.  The first queued message is written. */
static void kcm_tx_done(struct kcm_sock *kcm, struct kcm_psock *psock,
			struct sk_buff *skb)
{
	struct kcm_mux *mux = kcm->mux;
	unsigned int n;

	trace_kcm_tx_sent(psock, kcm, skb->len, kcm_tx_nmsgs(skb),
			  kcm_tx_msg(skb)->retried);
	if (unlikely(kcm_tx_msg(skb)->retried)) {
		spin_lock_bh(&mux->lock);
		mux->mstats.tx_retries++;
		spin_unlock_bh(&mux->lock);
	}
	__skb_unlink(skb, &kcm->sk.sk_write_queue);
	kcm->tx_offset = 0;
	n = kcm_tx_nmsgs(skb);
	kcm_tx_queued_add(kcm, -(int)n);
	kcm_tx_count(kcm, psock, n, skb->len);
	consume_skb(skb);
}

/*
 * @n bytes of the queue were written from kcm->tx_offset on: the messages
 * they complete are done.
 *
 * Context: lock_sock(kcm) held.
 */
static void kcm_tx_advance(struct kcm_sock *kcm, struct kcm_psock *psock,
			   size_t n)
{
	struct sk_buff *skb;
	size_t left;

	kcm->tx_sent += n;
	while (n && (skb = skb_peek(&kcm->sk.sk_write_queue))) {
		left = skb->len - kcm->tx_offset;
		if (n < left) {
			kcm->tx_offset += n;
			return;
		}
		n -= left;
		kcm_tx_done(kcm, psock, skb);
	}
}

/*
 * Write queued messages to @psock, reserved to @kcm, several per TCP write
 * (kcm_tx_gather()), until the next one needs another psock, the queue is
 * empty or, at a message boundary, a quantum has been written.
 *
 * Context: lock_sock(kcm) held; takes lock_sock() of the TCP socket.
 * Return: 0, -EAGAIN when TCP is full (or kTLS has no keys yet), or the
 * errno of a failed write; the message that failed is then the first
 * one queued.
 */
static int kcm_tx_write(struct kcm_sock *kcm, struct kcm_psock *psock)
{
	struct sk_buff_head *queue = &kcm->sk.sk_write_queue;
	/* Filled by kcm_tx_gather() (kcmsock.c, "Stack buffers"). */
	struct kcm_tx_vec v __uninitialized;
	struct kcm_tx_io io;
	bool more;
	int ret;

	ret = kcm_tx_io_begin(&io, psock);
	if (ret)
		return ret;
	while (!skb_queue_empty(queue) &&
	       kcm_tx_for_psock(skb_peek(queue), psock) &&
	       (kcm->tx_offset || kcm->tx_sent < KCM_TX_QUANTUM)) {
		ret = kcm_tx_gather(kcm, psock, &v, &more);
		if (ret)
			break;
		ret = kcm_tx_io_send(&io, v.bv, v.nr, v.len,
				     MSG_DONTWAIT | MSG_NOSIGNAL |
				     (more ? MSG_MORE : 0));
		if (ret <= 0) {
			ret = ret ? ret : -EAGAIN;
			break;
		}
		kcm_tx_advance(kcm, psock, ret);
		ret = (size_t)ret < v.len ? -EAGAIN : 0;
		if (ret)
			break;
	}
	kcm_tx_io_end(&io);
	return ret;
}

/* Context: any.  Posts a transmit error on the TCP socket. */
static void kcm_tx_post_error(struct sock *csk, int err)
{
	if (!READ_ONCE(csk->sk_err)) {
		WRITE_ONCE(csk->sk_err, -err);
		sk_error_report(csk);
	}
}

/*
 * A write of @kcm's to @psock failed with @err: stop transmitting on it,
 * tell its TCP socket, and let the psock go.  A psock stopped by an upper
 * layer protocol (kcm_psock_io()) tells @kcm too: its messages go
 * elsewhere, but the application asked for something KCM cannot give.
 *
 * Context: lock_sock(kcm) held; takes mux->lock.
 */
static void kcm_tx_stop(struct kcm_sock *kcm, struct kcm_psock *psock,
			int err)
{
	struct kcm_mux *mux = kcm->mux;

	if (READ_ONCE(psock->ulp_stopped)) {
		WRITE_ONCE(kcm->sk.sk_err, EOPNOTSUPP);
		sk_error_report(&kcm->sk);
	}
	kcm_tx_post_error(psock->sk, err);
	kcm_stat_add(&psock->stats.tx_aborts, 1);
	spin_lock_bh(&mux->lock);
	WRITE_ONCE(psock->tx_stopped, true);
	__kcm_tx_wake_direct(psock);
	__kcm_tx_ungrant(kcm, psock, KCM_TX_ACTIVE);
	kcm->tx_sent = 0;
	spin_unlock_bh(&mux->lock);
}

/*
 * Writing @skb to @psock failed: stop transmitting on it, tell its TCP
 * socket, and send the message again from the start on another psock (an
 * addressed message is dropped instead, by kcm_tx_drop_conn()).  It is
 * counted as a retry once it has gone out elsewhere (kcm_tx_done()).
 *
 * Context: lock_sock(kcm) held; takes mux->lock.
 */
static void kcm_tx_fail(struct kcm_sock *kcm, struct kcm_psock *psock,
			struct sk_buff *skb, int err)
{
	trace_kcm_tx_abort(psock, kcm, skb->len, kcm->tx_offset, err,
			   !kcm_tx_msg(skb)->directed);
	kcm_tx_stop(kcm, psock, err);
	kcm_tx_pack_trim_sent(kcm, psock, skb);
	kcm->tx_offset = 0;
	if (!kcm_tx_msg(skb)->directed)
		kcm_tx_msg(skb)->retried = true;
}

/*
 * The message at the head of the queue is addressed to connection @id,
 * which is gone (-ENOENT) or stopped (-EPIPE) for good: drop it and every
 * other queued message addressed to @id, count them, and report the error
 * once, as the socket's error.
 *
 * Context: lock_sock(kcm) held; takes mux->lock.
 */
static void kcm_tx_drop_conn(struct kcm_sock *kcm, u32 id, int err)
{
	struct sk_buff_head *queue = &kcm->sk.sk_write_queue;
	struct kcm_mux *mux = kcm->mux;
	struct sock *sk = &kcm->sk;
	struct sk_buff *skb, *tmp;
	unsigned int dropped = 0;

	sock_owned_by_me(sk);
	kcm->tx_offset = 0;
	skb_queue_walk_safe(queue, skb, tmp) {
		if (!kcm_tx_msg(skb)->directed || kcm_tx_msg(skb)->conn_id != id)
			continue;
		__skb_unlink(skb, queue);
		dropped += kcm_tx_nmsgs(skb);
		kfree_skb(skb);
	}
	kcm_tx_queued_add(kcm, -(int)dropped);
	trace_kcm_tx_drop(kcm, id, err, dropped);
	spin_lock_bh(&mux->lock);
	mux->mstats.tx_dropped += dropped;
	spin_unlock_bh(&mux->lock);
	WRITE_ONCE(sk->sk_err, -err);
	sk_error_report(sk);
}

/*
 * Write queued messages until the queue is empty, TCP is full or no psock
 * is free.
 *
 * Context: lock_sock(kcm) held, process context.
 */
static void kcm_tx_push(struct kcm_sock *kcm)
{
	struct sk_buff_head *queue = &kcm->sk.sk_write_queue;
	struct kcm_psock *psock;
	struct sk_buff *skb;
	int err;

	sock_owned_by_me(&kcm->sk);
	WRITE_ONCE(kcm->tx_owed, false);
	while ((skb = skb_peek(queue))) {
		psock = kcm_tx_reserve(kcm, kcm_tx_msg(skb));
		if (IS_ERR(psock)) {
			kcm_tx_drop_conn(kcm, kcm_tx_msg(skb)->conn_id,
					 PTR_ERR(psock));
			continue;
		}
		if (!psock)
			return;

		err = kcm_tx_write(kcm, psock);
		if (err == -EAGAIN) {
			/*
			 * With nothing in flight no ACK will bring write_space:
			 * TCP was short of memory, so try again later.
			 */
			if (!READ_ONCE(psock->sk->sk_wmem_queued))
				queue_delayed_work(system_wq, &kcm->tx_work,
						   KCM_TX_RETRY);
			return;
		}
		if (err) {
			kcm_tx_fail(kcm, psock, skb_peek(queue), err);
			continue;
		}
		kcm_tx_maybe_yield(kcm);
	}
	kcm_tx_release(kcm);
}

/* Context: process context (workqueue). */
static void kcm_tx_work(struct work_struct *work)
{
	struct kcm_sock *kcm = container_of(to_delayed_work(work),
					    struct kcm_sock, tx_work);

	lock_sock(&kcm->sk);
	if (!kcm->tx_closing)
		kcm_tx_push(kcm);
	release_sock(&kcm->sk);
}

/* ---- TCP callbacks ----------------------------------------------------- */

/* Context: softirq or process; takes mux->lock.  Who waits on @psock? */
static void kcm_psock_tx_wake(struct kcm_psock *psock)
{
	struct kcm_mux *mux = psock->mux;

	spin_lock_bh(&mux->lock);
	if (psock->tx_orphan)
		queue_work(system_wq, &psock->tx_work);
	else if (psock->tx_kcm)
		__kcm_tx_owe(psock->tx_kcm);
	spin_unlock_bh(&mux->lock);
}

/**
 * kcm_psock_write_space() - sk_write_space of an attached TCP socket
 * @csk: the TCP socket
 *
 * Context: softirq or process context.
 */
void kcm_psock_write_space(struct sock *csk)
{
	struct kcm_psock *psock;

	read_lock_bh(&csk->sk_callback_lock);
	psock = kcm_psock_of(csk);
	if (likely(psock))
		kcm_psock_tx_wake(psock);
	read_unlock_bh(&csk->sk_callback_lock);
}

/**
 * kcm_psock_state_change() - sk_state_change of an attached TCP socket
 * @csk: the TCP socket
 *
 * A broken connection is found by the next write to it; wake the writer
 * so that a message waiting for room fails over at once.
 *
 * Context: softirq or process context.
 */
void kcm_psock_state_change(struct sock *csk)
{
	struct kcm_psock *psock;

	read_lock_bh(&csk->sk_callback_lock);
	psock = kcm_psock_of(csk);
	if (likely(psock)) {
		kcm_psock_tx_wake(psock);
		psock->saved_state_change(csk);
	}
	read_unlock_bh(&csk->sk_callback_lock);
}

/* Context: process context (workqueue).  Finishes an orphaned message. */
static void kcm_psock_tx_work(struct work_struct *work)
{
	struct kcm_psock *psock = container_of(work, struct kcm_psock,
					       tx_work);
	struct sk_buff *skb = psock->tx_orphan;
	struct kcm_mux *mux = psock->mux;
	struct kcm_tx_io io;
	int err;

	/* Set before the work was queued; only this work clears it. */
	if (!skb)
		return;
	err = kcm_tx_io_begin(&io, psock);
	if (!err) {
		err = kcm_tx_send_msg(&io, skb, &psock->tx_orphan_off, false);
		kcm_tx_io_end(&io);
	}
	if (err == -EAGAIN)
		return;
	if (!err) {
		trace_kcm_tx_sent(psock, NULL, skb->len, 1,
				  kcm_tx_msg(skb)->retried);
		kcm_stat_add(&psock->stats.tx_msgs, 1);
		kcm_stat_add(&psock->stats.tx_bytes, skb->len);
	} else {
		trace_kcm_tx_abort(psock, NULL, skb->len, psock->tx_orphan_off,
				   err, false);
		kcm_stat_add(&psock->stats.tx_aborts, 1);
		kcm_tx_post_error(psock->sk, err);
	}

	spin_lock_bh(&mux->lock);
	psock->tx_orphan = NULL;
	if (err)
		WRITE_ONCE(psock->tx_stopped, true);
	__kcm_tx_psock_ready(mux, psock);
	spin_unlock_bh(&mux->lock);
	kfree_skb(skb);
}

/**
 * kcm_psock_tx_init() - set up the transmit side of a new psock
 * @psock: a psock not attached yet
 *
 * Context: any.
 */
void kcm_psock_tx_init(struct kcm_psock *psock)
{
	INIT_LIST_HEAD(&psock->tx_node);
	INIT_LIST_HEAD(&psock->tx_direct);
	INIT_WORK(&psock->tx_work, kcm_psock_tx_work);
}

/*
 * The message at the head of @kcm's queue was partly written to @psock,
 * which is going away: it starts again from the beginning elsewhere (and
 * counts as a retry once it has gone out), or, addressed to @psock, it is
 * dropped by the next push.
 *
 * Context: lock_sock(kcm) and mux->lock held.
 */
static void __kcm_tx_abort_head(struct kcm_sock *kcm, struct kcm_psock *psock)
{
	struct sk_buff *skb = skb_peek(&kcm->sk.sk_write_queue);

	sock_owned_by_me(&kcm->sk);
	lockdep_assert_held(&kcm->mux->lock);
	trace_kcm_tx_abort(psock, kcm, skb ? skb->len : 0, kcm->tx_offset, 0,
			   skb && !kcm_tx_msg(skb)->directed);
	kcm_stat_add(&psock->stats.tx_aborts, 1);
	if (!skb)
		return;
	kcm_tx_pack_trim_sent(kcm, psock, skb);
	if (!kcm_tx_msg(skb)->directed)
		kcm_tx_msg(skb)->retried = true;
}

/**
 * kcm_psock_tx_detach() - stop transmitting on a psock being unattached
 * @psock: a psock whose TCP callbacks are restored
 *
 * A KCM socket that has the psock reserved loses it and sends its
 * current message again, whole, on another psock.
 *
 * Context: process context, mux->psock_mutex held; takes lock_sock() of
 * the reserving KCM socket and mux->lock.
 */
void kcm_psock_tx_detach(struct kcm_psock *psock)
{
	struct kcm_mux *mux = psock->mux;
	struct kcm_sock *kcm;

	lockdep_assert_held(&mux->psock_mutex);
	spin_lock_bh(&mux->lock);
	WRITE_ONCE(psock->tx_stopped, true);
	psock->tx_gone = true;
	list_del_init(&psock->tx_node);
	__kcm_tx_wake_direct(psock);
	kcm = psock->tx_kcm;
	if (kcm)
		sock_hold(&kcm->sk);
	spin_unlock_bh(&mux->lock);

	if (kcm) {
		lock_sock(&kcm->sk);
		spin_lock_bh(&mux->lock);
		if (psock->tx_kcm == kcm) {
			mux->mstats.unattach_rsvd++;
			if (kcm->tx_offset)
				__kcm_tx_abort_head(kcm, psock);
			__kcm_tx_ungrant(kcm, psock, KCM_TX_ACTIVE);
			kcm->tx_offset = 0;
			kcm_tx_kick(kcm);
		}
		spin_unlock_bh(&mux->lock);
		release_sock(&kcm->sk);
		sock_put(&kcm->sk);
	}

	cancel_work_sync(&psock->tx_work);
	if (psock->tx_orphan) {
		trace_kcm_tx_abort(psock, NULL, psock->tx_orphan->len,
				   psock->tx_orphan_off, 0, false);
		kcm_stat_add(&psock->stats.tx_aborts, 1);
		kfree_skb(psock->tx_orphan);
		psock->tx_orphan = NULL;
	}
}

/* ---- building messages -------------------------------------------------- */

/* Context: lock_sock(kcm) held.  Room for @len more bytes? */
static bool kcm_tx_has_room(struct kcm_sock *kcm, size_t len)
{
	struct sock *sk = &kcm->sk;

	/*
	 * A message no longer than the send buffer (kcm_tx_check_size())
	 * may still be charged more than it: it goes when nothing waits.
	 */
	if (skb_queue_empty_lockless(&sk->sk_write_queue))
		return true;

	return sk_wmem_alloc_get(sk) + len <= READ_ONCE(sk->sk_sndbuf);
}

/*
 * Wait until @len more bytes may be queued.  Queued messages are pushed
 * first, so that the wait can end.
 *
 * Context: lock_sock(kcm) held; dropped while sleeping.
 */
static int kcm_tx_wait_room(struct kcm_sock *kcm, size_t len, long *timeo)
{
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	struct sock *sk = &kcm->sk;

	while (!kcm_tx_has_room(kcm, len)) {
		kcm_tx_push(kcm);
		if (kcm_tx_has_room(kcm, len))
			break;
		if (sk->sk_err)
			return sock_error(sk);
		if (!*timeo)
			return -EAGAIN;
		if (signal_pending(current))
			return sock_intr_errno(*timeo);

		/* Asleep, we leave writing to tx_work. */
		if (kcm_tx_call_leave(kcm)) {
			/* Writable meanwhile: write, then look again. */
			kcm_tx_call_enter(kcm);
			kcm_tx_push(kcm);
			continue;
		}
		sk_set_bit(SOCKWQ_ASYNC_NOSPACE, sk);
		set_bit(SOCK_NOSPACE, &sk->sk_socket->flags);
		add_wait_queue(sk_sleep(sk), &wait);
		sk_wait_event(sk, timeo, kcm_tx_has_room(kcm, len) ||
			      READ_ONCE(sk->sk_err), &wait);
		remove_wait_queue(sk_sleep(sk), &wait);
		kcm_tx_call_enter(kcm);
	}
	return 0;
}

/*
 * An empty chunk of @size bytes.
 *
 * Context: lock_sock(kcm) held, process context.
 * Return: the chunk, ERR_PTR(-ENOMEM) or ERR_PTR(-ENOBUFS).
 */
static struct sk_buff *kcm_tx_alloc_chunk(struct kcm_sock *kcm,
					  unsigned int size)
{
	struct sk_buff *skb;
	int err;

	/* TCP takes such a head by reference: see kcm_tx_vec_skb(). */
	if (size <= KCM_TX_LINEAR) {
		skb = kcm_tx_frag_skb(kcm, size);
		if (!IS_ERR(skb))
			skb_put(skb, size);
		return skb;
	}
	skb = alloc_skb_with_frags(0, size, PAGE_ALLOC_COSTLY_ORDER, &err,
				   GFP_KERNEL);
	if (!skb)
		return ERR_PTR(-ENOMEM);
	skb->len = size;
	skb->data_len = size;
	return skb;
}

/*
 * Link @chunk behind the last skb of the message @head.
 *
 * Context: lock_sock(kcm) held; @head is charged to the socket.
 */
static void kcm_tx_link(struct sock *sk, struct sk_buff *head,
			struct sk_buff *chunk)
{
	struct sk_buff *last = skb_shinfo(head)->frag_list;

	if (!last) {
		skb_shinfo(head)->frag_list = chunk;
	} else {
		while (last->next)
			last = last->next;
		last->next = chunk;
	}
	head->len += chunk->len;
	head->data_len += chunk->len;
	head->truesize += chunk->truesize;
	refcount_add(chunk->truesize, &sk->sk_wmem_alloc);
}

/* Context: lock_sock(kcm) held.  A new message becomes kcm->tx_partial. */
static void kcm_tx_start(struct kcm_sock *kcm, struct sk_buff *head)
{
	memset(head->cb, 0, sizeof(head->cb));
	kcm_mem_tx_own(&kcm->sk, head);
	kcm->tx_partial = head;
}

/* Context: any.  The truesize of @chunks. */
static unsigned int kcm_tx_chunks_size(struct sk_buff_head *chunks)
{
	unsigned int size = 0;
	struct sk_buff *chunk;

	skb_queue_walk(chunks, chunk)
		size += chunk->truesize;
	return size;
}

/*
 * Charge the socket for @chunks before they join its message
 * (kcm_mem.c); else they go.
 *
 * Context: lock_sock(kcm) held.
 * Return: 0, or -ENOBUFS when its memory cgroup or net.kcm.mem refused.
 */
static int kcm_tx_charge_chunks(struct kcm_sock *kcm,
				struct sk_buff_head *chunks)
{
	if (kcm_mem_tx_charge(&kcm->sk, kcm_tx_chunks_size(chunks)))
		return 0;
	__skb_queue_purge(chunks);
	return -ENOBUFS;
}

/*
 * Context: lock_sock(kcm) held.  @chunks, charged to the socket, join the
 * message being built.
 */
static void kcm_tx_add_chunks(struct kcm_sock *kcm, struct sk_buff_head *chunks)
{
	struct sk_buff *chunk;

	while ((chunk = __skb_dequeue(chunks))) {
		if (!kcm->tx_partial)
			kcm_tx_start(kcm, chunk);
		else
			kcm_tx_link(&kcm->sk, kcm->tx_partial, chunk);
	}
}

/*
 * Copy @len bytes from @from into new chunks, charged to the socket, and
 * add them to the message being built.  On failure nothing is added and
 * @from is where it was.
 *
 * Context: lock_sock(kcm) held, process context.
 * Return: 0, -ENOMEM, -ENOBUFS (kcm_tx_charge_chunks()) or -EFAULT.
 */
static int kcm_tx_copy(struct kcm_sock *kcm, struct iov_iter *from,
		       size_t len)
{
	struct sk_buff_head chunks;
	struct sk_buff *chunk;
	size_t done = 0;
	unsigned int n;
	int err;

	__skb_queue_head_init(&chunks);
	while (done < len) {
		n = min_t(size_t, len - done, KCM_TX_CHUNK);
		chunk = kcm_tx_alloc_chunk(kcm, n);
		if (IS_ERR(chunk)) {
			__skb_queue_purge(&chunks);
			return PTR_ERR(chunk);
		}
		__skb_queue_tail(&chunks, chunk);
		done += n;
	}
	err = kcm_tx_charge_chunks(kcm, &chunks);
	if (err)
		return err;
	done = 0;
	skb_queue_walk(&chunks, chunk) {
		if (skb_copy_datagram_from_iter(chunk, 0, from, chunk->len)) {
			kcm_mem_tx_uncharge(&kcm->sk,
					    kcm_tx_chunks_size(&chunks));
			__skb_queue_purge(&chunks);
			iov_iter_revert(from, done);
			return -EFAULT;
		}
		done += chunk->len;
	}
	kcm_tx_add_chunks(kcm, &chunks);
	return 0;
}

/* Context: lock_sock(kcm) held.  The message being built is complete. */
static void kcm_tx_end(struct kcm_sock *kcm)
{
	if (!kcm->tx_partial)
		return;

	__skb_queue_tail(&kcm->sk.sk_write_queue, kcm->tx_partial);
	kcm->tx_partial = NULL;
	kcm_tx_queued_add(kcm, 1);
}

/*
 * A send call is over: @ended says it ended a message, @failed that it
 * returns an error.
 * A message ended outside a batch, and any error (a batch cut short by a
 * fault, a bad address, a signal or a full buffer under MSG_DONTWAIT),
 * push what is queued, so that every message a call reported as sent is
 * on its way.  A message ended inside a batch arms tx_work, which pushes
 * it after KCM_TX_BATCH_WAIT, for batches that end where this socket does
 * not see it: sendmmsg() stopping at a bad msghdr, or MSG_BATCH set by
 * hand on the last message.
 *
 * Context: lock_sock(kcm) held, process context.
 */
static void kcm_tx_call_end(struct kcm_sock *kcm, int flags, bool ended,
			    bool failed)
{
	if (skb_queue_empty(&kcm->sk.sk_write_queue))
		return;
	if (failed || (ended && !(flags & MSG_BATCH)))
		kcm_tx_push(kcm);
	else if (ended && !delayed_work_pending(&kcm->tx_work))
		/* Armed once per batch, not per message: if pending, it
		 * runs after we release the socket and sees this one too.
		 */
		queue_delayed_work(system_wq, &kcm->tx_work,
				   KCM_TX_BATCH_WAIT);
}

/*
 * May @len more bytes join the message being built (@eor: and end it)?
 * A message longer than the socket's send buffer could never be queued
 * whole: the call that would make it so fails and what was built of it is
 * dropped and counted.  So that no part of it goes out as a message of
 * its own, the socket then drops what follows of it (kcm->tx_too_big):
 *
 *  - a call that did not end the message: the calls that go on with it
 *    fail, up to and including the one that ends it;
 *  - a piece of a splice or a batch (@hidden) after pieces of its message
 *    were taken: sendfile(), splice() and sendmmsg() then return what
 *    they sent before it, not the error, and their caller sends the
 *    rest: the next call fails too.
 *
 * A splice or batch piece that fails while the socket drops is the first
 * of its call, whose caller sees the error: the drop ends there.
 *
 * Context: lock_sock(kcm) held; takes mux->lock on failure.
 * Return: 0 or -EMSGSIZE.
 */
static int kcm_tx_check_size(struct kcm_sock *kcm, size_t len, bool eor,
			     bool hidden)
{
	size_t have = kcm->tx_partial ? kcm->tx_partial->len : 0;
	size_t limit = min_t(size_t, READ_ONCE(kcm->sk.sk_sndbuf),
			     KCM_TX_MAX_MSG);
	struct kcm_mux *mux = kcm->mux;

	sock_owned_by_me(&kcm->sk);
	if (unlikely(kcm->tx_too_big)) {
		kcm->tx_too_big = !eor && !hidden;
		return -EMSGSIZE;
	}
	if (len <= limit && have + len <= limit)
		return 0;

	trace_kcm_tx_drop(kcm, -1, -EMSGSIZE, 1);
	kfree_skb(kcm->tx_partial);
	kcm->tx_partial = NULL;
	kcm->tx_too_big = !eor || (have && hidden);
	spin_lock_bh(&mux->lock);
	mux->mstats.tx_too_big++;
	spin_unlock_bh(&mux->lock);
	return -EMSGSIZE;
}

/* Context: any.  A chunk holding a reference to @len bytes of @page. */
static struct sk_buff *kcm_tx_page_chunk(struct page *page, unsigned int off,
					 unsigned int len)
{
	struct sk_buff *chunk = alloc_skb(0, GFP_KERNEL);

	if (!chunk)
		return NULL;
	get_page(page);
	skb_fill_page_desc(chunk, 0, page, off, len);
	skb_shinfo(chunk)->flags |= SKBFL_SHARED_FRAG;
	chunk->len = len;
	chunk->data_len = len;
	chunk->truesize += len;
	return chunk;
}

/*
 * Add references to the @len bytes of the page segments of @from to the
 * message being built, one chunk per page, without copying: what splice()
 * and sendfile() hand a socket, charged to it.  @from is not advanced on
 * failure (-ENOMEM, -ENOBUFS), and then nothing is added.
 *
 * Context: lock_sock(kcm) held, process context.
 */
static int kcm_tx_splice(struct kcm_sock *kcm, struct iov_iter *from,
			 size_t len)
{
	const struct bio_vec *bv = from->bvec;
	size_t skip = from->iov_offset, done = 0;
	struct sk_buff_head chunks;
	struct sk_buff *chunk;
	struct page *page;
	unsigned int off, n;

	__skb_queue_head_init(&chunks);
	while (done < len) {
		if (skip >= bv->bv_len) {
			skip -= bv->bv_len;
			bv++;
			continue;
		}
		off = bv->bv_offset + skip;
		page = bv->bv_page + (off >> PAGE_SHIFT);
		off = offset_in_page(off);
		n = min3(len - done, bv->bv_len - skip, PAGE_SIZE - off);
		chunk = kcm_tx_page_chunk(page, off, n);
		if (!chunk) {
			__skb_queue_purge(&chunks);
			return -ENOMEM;
		}
		__skb_queue_tail(&chunks, chunk);
		skip += n;
		done += n;
	}
	if (kcm_tx_charge_chunks(kcm, &chunks))
		return -ENOBUFS;
	iov_iter_advance(from, len);
	kcm_tx_add_chunks(kcm, &chunks);
	return 0;
}

/*
 * Wait a while for memory to charge the socket with: what it has queued
 * goes out meanwhile and frees some of it, and each message freed wakes
 * it; memory freed anywhere else wakes nobody, so the wait is short and
 * the caller tries again.
 *
 * Context: lock_sock(kcm) held; dropped while sleeping.
 * Return: 0 to try again, -EAGAIN once the send timeout is over, or the
 * socket's error, or -EINTR / -ERESTARTSYS for a signal.
 */
static int kcm_tx_wait_mem(struct kcm_sock *kcm, long *timeo)
{
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	struct sock *sk = &kcm->sk;
	long t, before;

	kcm_tx_push(kcm);
	if (sk->sk_err)
		return sock_error(sk);
	if (!*timeo)
		return -EAGAIN;
	if (signal_pending(current))
		return sock_intr_errno(*timeo);
	if (kcm_tx_call_leave(kcm)) {
		/* Writable meanwhile: write, then look again. */
		kcm_tx_call_enter(kcm);
		kcm_tx_push(kcm);
		return 0;
	}
	before = min_t(long, *timeo, KCM_TX_MEM_RETRY);
	t = before;
	add_wait_queue(sk_sleep(sk), &wait);
	sk_wait_event(sk, &t, READ_ONCE(sk->sk_err), &wait);
	remove_wait_queue(sk_sleep(sk), &wait);
	kcm_tx_call_enter(kcm);
	if (*timeo != MAX_SCHEDULE_TIMEOUT)
		*timeo = max(0L, *timeo - (before - t));
	return 0;
}

/* Context: lock_sock(kcm) held.  Adds @len bytes of @msg to the message. */
static int kcm_tx_add(struct kcm_sock *kcm, struct msghdr *msg, size_t len,
		      bool splice)
{
	if (splice && iov_iter_is_bvec(&msg->msg_iter))
		return kcm_tx_splice(kcm, &msg->msg_iter, len);
	return kcm_tx_copy(kcm, &msg->msg_iter, len);
}

/*
 * Add @len bytes of @msg, addressed as @to, to the socket's messages: a
 * whole small one (@eor) to a pack when it may join one, else to the
 * message being built.  While the socket cannot be charged for them (its
 * memory cgroup or net.kcm.mem is at its limit), wait for memory as for
 * room in the send buffer.
 *
 * Context: lock_sock(kcm) held, process context; dropped while waiting.
 * Return: 1 when packed, 0 when added, or a negative errno with nothing
 * added.
 */
static int kcm_tx_build(struct kcm_sock *kcm, struct msghdr *msg,
			size_t len, bool eor, bool splice,
			const struct kcm_tx_msg *to, long *timeo)
{
	int err;

	for (;;) {
		err = eor && !splice ? kcm_tx_pack_add(kcm, msg, len, to) : 0;
		if (!err)
			err = kcm_tx_add(kcm, msg, len, splice);
		if (err != -ENOBUFS)
			return err;
		err = kcm_tx_wait_mem(kcm, timeo);
		if (err)
			return err;
	}
}

/* ---- lone small messages, written straight to TCP ---------------------- */

/*
 * May @msg, a whole message of @len bytes, be written straight to TCP?
 * Only a small one with nothing queued before it, outside a batch (whose
 * messages share a write), from a buffer that can be read: a copy fault
 * after part of it went out would cut the stream inside a message.
 *
 * Context: lock_sock(kcm) held, process context.
 */
static bool kcm_tx_direct_ok(struct kcm_sock *kcm, struct msghdr *msg,
			     size_t len, int flags)
{
	return len && len <= KCM_TX_DIRECT_MAX && !(flags & MSG_BATCH) &&
	       !kcm->tx_partial &&
	       skb_queue_empty(&kcm->sk.sk_write_queue) &&
	       !fault_in_iov_iter_readable(&msg->msg_iter, len);
}

/*
 * Write the whole message in @msg, @len bytes addressed as @to, to the
 * socket's psock without building an skb of ours: TCP copies it from the
 * sender's buffer, as a write() to the TCP socket would.  Whatever is not
 * written is left in @msg, which is wound back to the message's start.
 * A write that fails with nothing written stops the psock, as
 * kcm_tx_fail() does, and sets *@failed: the message is then queued as a
 * retry, for another psock.
 *
 * Context: lock_sock(kcm) held, process context; takes lock_sock() of
 * the TCP socket.
 * Return: the bytes written: @len, 0 when nothing was (no psock, no room
 * in TCP, or the write failed), else a part, the rest of which must
 * follow on the same psock (kcm->tx_psock).
 */
static size_t kcm_tx_direct(struct kcm_sock *kcm, struct msghdr *msg,
			    size_t len, const struct kcm_tx_msg *to,
			    bool *failed)
{
	size_t before = iov_iter_count(&msg->msg_iter);
	size_t controllen = msg->msg_controllen;
	int flags = msg->msg_flags, namelen = msg->msg_namelen, ret;
	void *name = msg->msg_name;
	struct kcm_psock *psock;
	struct kcm_tx_io io;
	struct sock *csk;

	psock = kcm_tx_reserve(kcm, to);
	if (IS_ERR_OR_NULL(psock))
		return 0;
	csk = psock->sk;
	ret = kcm_tx_io_begin(&io, psock);
	if (ret)
		goto done;
	/* kTLS writes from a copy of ours: the message is queued. */
	if (io.how != KCM_IO_TCP || sk_stream_wspace(csk) < (int)len) {
		kcm_tx_io_end(&io);
		return 0;
	}
	/*
	 * Our flags, and no address or control message: those were for
	 * KCM (TCP would take an address for a Fast Open connect).
	 */
	msg->msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL;
	msg->msg_controllen = 0;
	msg->msg_name = NULL;
	msg->msg_namelen = 0;
	ret = tcp_sendmsg_locked(csk, msg, len);
	msg->msg_flags = flags;
	msg->msg_controllen = controllen;
	msg->msg_name = name;
	msg->msg_namelen = namelen;
	kcm_tx_io_end(&io);
done:
	if (ret == (int)len) {
		trace_kcm_tx_sent(psock, kcm, len, 1, false);
		kcm_tx_count(kcm, psock, 1, len);
		kcm->tx_sent += len;
		return len;
	}
	iov_iter_revert(&msg->msg_iter,
			before - iov_iter_count(&msg->msg_iter));
	if (ret > 0) {
		kcm->tx_sent += ret;
		return ret;
	}
	if (ret != -EAGAIN) {
		trace_kcm_tx_abort(psock, kcm, len, 0, ret, !to->directed);
		kcm_tx_stop(kcm, psock, ret);
		*failed = true;
	}
	return 0;
}

/*
 * The message a direct write did not finish, @sent bytes written (or
 * none, *@failed), is now queued alone: it goes on from there on the
 * same psock, or, the psock having failed, whole as a retry elsewhere.
 *
 * Context: lock_sock(kcm) held.
 */
static void kcm_tx_direct_queued(struct kcm_sock *kcm, size_t sent,
				 bool failed)
{
	struct sk_buff *skb = skb_peek(&kcm->sk.sk_write_queue);

	if (WARN_ON_ONCE(!skb || !skb_queue_is_last(&kcm->sk.sk_write_queue,
						    skb)))
		return;
	kcm->tx_offset = sent;
	if (failed && !kcm_tx_msg(skb)->directed)
		kcm_tx_msg(skb)->retried = true;
}

/*
 * A direct write left @sent bytes of a message of @len on the psock, and
 * the rest could not be queued (@err): the connection's stream is cut
 * inside a message, so transmission on it stops, as after a failed
 * write.
 *
 * Context: lock_sock(kcm) held; takes mux->lock.
 */
static void kcm_tx_direct_abort(struct kcm_sock *kcm, size_t len,
				size_t sent, int err)
{
	struct kcm_psock *psock = kcm->tx_psock;

	trace_kcm_tx_abort(psock, kcm, len, sent, err, false);
	kcm_tx_stop(kcm, psock, err);
}

/**
 * kcm_tx_sendmsg() - add to or end a message
 * @sock: a KCM socket
 * @msg: the data; MSG_MORE (DGRAM) or the absence of MSG_EOR (SEQPACKET)
 *	keeps the message open, MSG_BATCH defers transmission
 * @len: bytes in @msg
 * @splice: @msg holds page segments to take by reference (splice(),
 *	sendfile()); MSG_MORE alone then keeps the message open, for both
 *	socket types, as sendpage() did
 *
 * Context: process context, may sleep.
 * Return: @len, or a negative errno with nothing added to the message.
 */
int kcm_tx_sendmsg(struct socket *sock, struct msghdr *msg, size_t len,
		   bool splice)
{
	struct sock *sk = sock->sk;
	struct kcm_sock *kcm = kcm_sk(sk);
	int flags = msg->msg_flags;
	bool eor, packed = false, failed = false;
	struct kcm_tx_msg to;
	size_t sent = 0;
	long timeo;
	int err;

	if (flags & MSG_OOB)
		return -EOPNOTSUPP;

	if (splice || sock->type == SOCK_DGRAM)
		eor = !(flags & MSG_MORE);
	else
		eor = !!(flags & MSG_EOR);
	timeo = sock_sndtimeo(sk, flags & MSG_DONTWAIT);
	lock_sock(sk);
	kcm_tx_call_enter(kcm);
	err = sock_error(sk);
	if (!err)
		err = kcm_tx_check_size(kcm, len, eor,
					splice || (flags & MSG_BATCH));
	if (!err)
		err = kcm_conn_tx_cmsg(kcm, msg, &to);
	if (!err && len)
		err = kcm_tx_wait_room(kcm, len, &timeo);
	if (!err && eor && !splice && kcm_tx_direct_ok(kcm, msg, len, flags)) {
		sent = kcm_tx_direct(kcm, msg, len, &to, &failed);
		if (sent == len) {
			kcm_tx_maybe_yield(kcm);
			kcm_tx_release(kcm);
			err = len;
			goto out;
		}
	}
	if (!err && len) {
		err = kcm_tx_build(kcm, msg, len, eor, splice, &to, &timeo);
		packed = err > 0;
		err = min(err, 0);
	}
	if (err) {
		if (sent)
			kcm_tx_direct_abort(kcm, len, sent, err);
		else if (skb_queue_empty(&sk->sk_write_queue))
			/* A psock reserved for a direct write goes idle. */
			kcm_tx_release(kcm);
		goto out;
	}

	if (!packed) {
		kcm_conn_tx_set(kcm, &to);
		if (eor)
			kcm_tx_end(kcm);
	}
	if (sent || failed)
		kcm_tx_direct_queued(kcm, sent, failed);
	err = len;
out:
	kcm_tx_call_end(kcm, flags, eor && err >= 0, err < 0);
	if (kcm_tx_call_leave(kcm))
		kcm_tx_push(kcm);
	release_sock(sk);
	return err;
}

/**
 * kcm_sendmsg() - sendmsg() on a KCM socket
 * @sock: a KCM socket
 * @msg: the data and flags (kcm_tx_sendmsg())
 * @len: bytes in @msg
 *
 * Context: process context, may sleep.
 * Return: @len, or a negative errno with nothing added to the message.
 */
int kcm_sendmsg(struct socket *sock, struct msghdr *msg, size_t len)
{
	return kcm_tx_sendmsg(sock, msg, len, kcm_msg_splice(msg));
}

/**
 * kcm_sock_tx_init() - set up the transmit side of a new KCM socket
 * @kcm: the socket
 *
 * Context: any.
 */
void kcm_sock_tx_init(struct kcm_sock *kcm)
{
	INIT_LIST_HEAD(&kcm->tx_wait_node);
	INIT_DELAYED_WORK(&kcm->tx_work, kcm_tx_work);
}

/*
 * A closing socket's half-written message is finished by the psock, so
 * that the connection never carries a torn message.  Of a pack, that is
 * the message being written; those after it are dropped.
 *
 * Context: lock_sock(kcm) and mux->lock held.
 * Return: the messages dropped.
 */
static unsigned int __kcm_tx_orphan(struct kcm_sock *kcm,
				    struct kcm_psock *psock)
{
	struct sk_buff *skb = __skb_dequeue(&kcm->sk.sk_write_queue);
	struct kcm_tx_msg *txm = kcm_tx_msg(skb);
	unsigned int dropped = 0;

	kcm_tx_pack_trim_sent(kcm, psock, skb);
	if (txm->pack && txm->nmsgs > 1) {
		dropped = txm->nmsgs - 1;
		__skb_trim(skb, kcm_pack_lens(skb)[0]);
		txm->nmsgs = 1;
	}
	kcm_tx_queued_add(kcm, -(int)(kcm_tx_nmsgs(skb) + dropped));
	skb_orphan(skb);
	psock->tx_orphan = skb;
	psock->tx_orphan_off = kcm->tx_offset;
	kcm->tx_offset = 0;
	queue_work(system_wq, &psock->tx_work);
	return dropped;
}

/**
 * kcm_tx_sock_leave() - a closing socket gives up its psock and its queue
 * @kcm: a socket being released
 *
 * Messages not yet written are dropped and counted (tx_dropped); a message
 * already partly written is finished first.
 *
 * Context: lock_sock(kcm) held; takes mux->lock.
 */
void kcm_tx_sock_leave(struct kcm_sock *kcm)
{
	struct sock *sk = &kcm->sk;
	struct kcm_mux *mux = kcm->mux;
	struct kcm_psock *psock;
	unsigned int dropped = 0;

	sock_owned_by_me(sk);
	kcm->tx_closing = true;
	spin_lock_bh(&mux->lock);
	__kcm_tx_unwait(kcm);
	psock = kcm->tx_psock;
	if (psock && kcm->tx_offset) {
		dropped = __kcm_tx_orphan(kcm, psock);
		__kcm_tx_ungrant(kcm, psock, KCM_TX_ACTIVE);
	}
	__kcm_tx_unreserve(kcm);
	dropped += kcm->tx_queued + !!kcm->tx_partial;
	trace_kcm_tx_drop(kcm, -1, 0, dropped);
	mux->mstats.tx_dropped += dropped;
	spin_unlock_bh(&mux->lock);

	__skb_queue_purge(&sk->sk_write_queue);
	WRITE_ONCE(kcm->tx_queued, 0);
	kfree_skb(kcm->tx_partial);
	kcm->tx_partial = NULL;
	kcm_frag_cache_drain(&kcm->tx_frag);
	kcm_tx_frag_uncharge(kcm);
}

/**
 * kcm_tx_sock_flush_work() - wait for the transmit work of a closed socket
 * @kcm: a socket that went through kcm_tx_sock_leave()
 *
 * Context: process context, lock_sock(kcm) not held.
 */
void kcm_tx_sock_flush_work(struct kcm_sock *kcm)
{
	cancel_delayed_work_sync(&kcm->tx_work);
}
