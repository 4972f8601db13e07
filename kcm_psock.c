// SPDX-License-Identifier: GPL-2.0-only
/*
 * Kernel Connection Multiplexor: attaching TCP sockets to a mux.
 *
 * A psock takes over the receive callback of its TCP socket and keeps a
 * reference on the socket's file, so the application may close its own
 * descriptor while the socket stays attached.  Attach and unattach of a
 * mux are serialised by mux->psock_mutex.
 */

#include <linux/bpf.h>
#include <linux/file.h>
#include <linux/filter.h>
#include <linux/net.h>
#include <linux/slab.h>
#include <net/inet_connection_sock.h>
#include <net/sock.h>
#include <net/tcp.h>
#include <net/kcm.h>
#include <trace/events/kcm.h>

/* Context: any.  Only IPv4/IPv6 TCP sockets can be attached. */
static int kcm_psock_check_type(const struct sock *csk)
{
	if (csk->sk_family != AF_INET && csk->sk_family != AF_INET6)
		return -EOPNOTSUPP;

	if (csk->sk_type != SOCK_STREAM || csk->sk_protocol != IPPROTO_TCP)
		return -EOPNOTSUPP;

	return 0;
}

/*
 * Context: lock_sock(csk) held.  An upper layer protocol is carried only
 * where KCM can go through it (kcm_tls.c).
 */
static int kcm_psock_check_state(struct sock *csk)
{
	sock_owned_by_me(csk);
	if (csk->sk_state == TCP_LISTEN || csk->sk_state == TCP_CLOSE)
		return -EOPNOTSUPP;

	return kcm_tls_attach_check(csk);
}

/*
 * Install the psock as the owner of the TCP socket's receive side: its
 * callbacks in the socket, or inside kTLS for a direction kTLS already
 * carries (kcm_tls.c).
 *
 * Context: lock_sock(csk) held; takes the callback lock.
 * Return: 0, or -EALREADY when another user (a mux, sockmap) owns the
 * socket.
 */
static int kcm_psock_take_callbacks(struct kcm_psock *psock)
{
	struct sock *csk = psock->sk;
	int err = 0;

	sock_owned_by_me(csk);
	write_lock_bh(&csk->sk_callback_lock);
	if (rcu_access_pointer(__sk_user_data(csk))) {
		err = -EALREADY;
	} else {
		kcm_tls_hook_callbacks(psock);
		rcu_assign_sk_user_data(csk, psock);
	}
	write_unlock_bh(&csk->sk_callback_lock);
	return err;
}

/*
 * Give the TCP socket its callbacks back (kcm_tls.c: where kTLS took
 * them over).  Once this returns no framing starts on the psock again and
 * TCP wakes no KCM socket.
 *
 * Context: process context; takes lock_sock() of the TCP socket and its
 * callback lock.
 */
static void kcm_psock_restore_callbacks(struct kcm_psock *psock)
{
	struct sock *csk = psock->sk;

	lock_sock(csk);
	write_lock_bh(&csk->sk_callback_lock);
	kcm_tls_restore_callbacks(psock);
	rcu_assign_sk_user_data(csk, NULL);
	WRITE_ONCE(psock->rx_stopped, true);
	write_unlock_bh(&csk->sk_callback_lock);
	release_sock(csk);
}

/* Context: the TCP socket's lock held.  Stops @psock for good, once. */
static void kcm_psock_ulp_stop(struct kcm_psock *psock)
{
	struct sock *csk = psock->sk;

	if (psock->ulp_stopped)
		return;
	WRITE_ONCE(psock->ulp_stopped, true);
	WRITE_ONCE(psock->rx_stopped, true);
	kcm_stat_add(&psock->stats.ulp_stops, 1);
	trace_kcm_psock_ulp(psock);
	WRITE_ONCE(csk->sk_err, EOPNOTSUPP);
	sk_error_report(csk);
}

/**
 * kcm_psock_io() - how a psock may read or write its TCP socket now
 * @psock: an attached psock
 * @tx: the direction: write, or read
 *
 * An upper layer protocol can be set up on the socket after the attach
 * (kTLS only needs an established connection), so each read and each
 * write asks first: through kTLS, or waiting for its keys (kcm_tls.c).
 * The first to find a ULP KCM cannot go through stops the psock for
 * good, both ways, before a byte is read or written beneath it, and
 * posts EOPNOTSUPP on the TCP socket.  Setting up a ULP takes the
 * socket's lock, so nothing changes between the answer and the read or
 * write it guards.
 *
 * Context: the TCP socket's lock held (lock_sock(), or its spinlock in
 * softirq).
 * Return: an enum kcm_io, or -EOPNOTSUPP.
 */
int kcm_psock_io(struct kcm_psock *psock, bool tx)
{
	int io;

	lockdep_assert(lockdep_sock_is_held(psock->sk));
	io = kcm_tls_io(psock->sk, tx);
	if (unlikely(io < 0))
		kcm_psock_ulp_stop(psock);
	return io;
}

/* Context: process context, may sleep. */
static struct kcm_psock *kcm_psock_alloc(struct kcm_mux *mux,
					 struct socket *csock,
					 const struct kcm_parser *parser,
					 struct bpf_prog *prog)
{
	struct kcm_psock *psock;

	psock = kzalloc(sizeof(*psock), GFP_KERNEL_ACCOUNT);
	if (!psock)
		return NULL;

	kcm_strp_init(psock);
	psock->mux = mux;
	psock->sk = csock->sk;
	psock->file = csock->file;
	psock->prog = prog;
	psock->parser = *parser;
	INIT_LIST_HEAD(&psock->mux_node);
	kcm_psock_tx_init(psock);
	return psock;
}

/*
 * Frees the psock but not what it refers to.  Its memory goes after a
 * grace period: see kcm_tx_release().
 *
 * Context: process context.
 */
static void kcm_psock_free(struct kcm_psock *psock)
{
	kfree_skb(psock->strp.buf);
	kfree_rcu(psock, rcu);
}

/*
 * Give @psock the next index and reserve its entry in mux->psock_ids, so
 * that kcm_mux_add_psock() cannot fail (a reserved entry reads as none).
 *
 * Context: process context, mux->psock_mutex held.
 * Return: 0 or -ENOMEM.
 */
static int kcm_mux_reserve_id(struct kcm_mux *mux, struct kcm_psock *psock)
{
	lockdep_assert_held(&mux->psock_mutex);
	psock->index = mux->next_psock_index;
	return xa_reserve_bh(&mux->psock_ids, psock->index, GFP_KERNEL);
}

/* Context: process context, mux->psock_mutex held; takes mux->lock. */
static void kcm_mux_release_id(struct kcm_mux *mux, struct kcm_psock *psock)
{
	lockdep_assert_held(&mux->psock_mutex);
	/* mux->psock_ids' lock is only ever taken with softirqs off. */
	spin_lock_bh(&mux->lock);
	xa_release(&mux->psock_ids, psock->index);
	spin_unlock_bh(&mux->lock);
}

/* Context: process context, mux->psock_mutex held; takes mux->lock. */
static void kcm_mux_add_psock(struct kcm_mux *mux, struct kcm_psock *psock)
{
	lockdep_assert_held(&mux->psock_mutex);
	spin_lock_bh(&mux->lock);
	mux->next_psock_index++;
	/* The entry is reserved: storing into it allocates nothing. */
	WARN_ON_ONCE(xa_err(xa_store(&mux->psock_ids, psock->index, psock,
				     GFP_NOWAIT)));
	list_add_tail(&psock->mux_node, &mux->psocks);
	mux->npsocks++;
	mux->mstats.attach++;
	trace_kcm_psock_attach(psock);
	__kcm_tx_psock_ready(mux, psock);
	spin_unlock_bh(&mux->lock);
}

/*
 * Attach @csock to @mux with @parser and @prog as its parser.  On success
 * the psock owns the caller's references on @csock's file and on @prog.
 *
 * Context: process context, may sleep.
 */
static int kcm_psock_attach(struct kcm_mux *mux, struct socket *csock,
			    const struct kcm_parser *parser,
			    struct bpf_prog *prog)
{
	struct sock *csk = csock->sk;
	struct kcm_psock *psock;
	int err;

	err = kcm_psock_check_type(csk);
	if (err)
		return err;

	psock = kcm_psock_alloc(mux, csock, parser, prog);
	if (!psock)
		return -ENOMEM;

	mutex_lock(&mux->psock_mutex);
	lock_sock(csk);
	err = kcm_psock_check_state(csk);
	if (!err)
		err = kcm_mux_reserve_id(mux, psock);
	if (!err) {
		err = kcm_psock_take_callbacks(psock);
		if (err)
			kcm_mux_release_id(mux, psock);
	}
	if (!err) {
		kcm_mux_add_psock(mux, psock);
		/*
		 * Frame what arrived before the callback was ours (and any
		 * record kTLS holds).  What arrives from now on calls it
		 * (from the backlog too, when we release the socket), so an
		 * empty queue needs no work.
		 */
		if (!skb_queue_empty(&csk->sk_receive_queue) ||
		    inet_csk(csk)->icsk_ulp_ops)
			kcm_strp_kick(psock);
	}
	release_sock(csk);
	/* From here on an unattach may free the psock. */
	mutex_unlock(&mux->psock_mutex);

	if (err)
		kcm_psock_free(psock);
	return err;
}

/**
 * kcm_attach_ioctl() - SIOCKCMATTACH
 * @kcm: a KCM socket of the mux
 * @info: the TCP socket and the parser program
 *
 * Context: process context, may sleep.
 * Return: 0; -ENOENT for a bad socket descriptor, -EBADF or -EINVAL for
 * a bad program, -EOPNOTSUPP for a socket that is not a connected TCP
 * socket or has an upper layer protocol KCM cannot go through (see
 * kcm_tls.c), -EALREADY when it is attached already, or -ENOMEM.
 */
int kcm_attach_ioctl(struct kcm_sock *kcm, const struct kcm_attach *info)
{
	struct kcm_attach_ext ext = {
		.fd = info->fd,
		.bpf_type = KCM_BPF_TYPE_FD,
		.bpf_fd = info->bpf_fd,
	};

	return kcm_attach_ext_ioctl(kcm, &ext);
}

/**
 * kcm_attach_ext_ioctl() - SIOCKCMATTACHEXT (not in upstream Linux)
 * @kcm: a KCM socket of the mux
 * @info: the TCP socket and the parser: an eBPF program, a classic BPF
 *	program or the built-in length field parser
 *
 * Context: process context, may sleep.
 * Return: as kcm_attach_ioctl(), and the errors of kcm_parser_get().
 */
int kcm_attach_ext_ioctl(struct kcm_sock *kcm,
			 const struct kcm_attach_ext *info)
{
	struct kcm_parser parser;
	struct bpf_prog *prog;
	struct socket *csock;
	int err;

	csock = sockfd_lookup(info->fd, &err);
	if (!csock)
		return -ENOENT;

	err = kcm_parser_get(info, &parser, &prog);
	if (err)
		goto out_put;

	err = kcm_psock_attach(kcm->mux, csock, &parser, prog);
	if (err) {
		kcm_parser_put(&parser, prog);
		goto out_put;
	}
	return 0;

out_put:
	sockfd_put(csock);
	return err;
}

/*
 * Detach a psock: give the TCP socket back to plain use, keep the
 * messages it already framed, drop a half-assembled one, and send the
 * message it was transmitting again on another psock.
 *
 * Context: process context, mux->psock_mutex held; takes mux->lock,
 * lock_sock() of the TCP socket and of a KCM socket that reserved it.
 */
static void kcm_psock_unattach(struct kcm_psock *psock)
{
	struct kcm_mux *mux = psock->mux;
	struct sock *csk = psock->sk;

	lockdep_assert_held(&mux->psock_mutex);
	kcm_psock_restore_callbacks(psock);
	kcm_psock_tx_detach(psock);

	spin_lock_bh(&mux->lock);
	list_del(&psock->mux_node);
	xa_erase(&mux->psock_ids, psock->index);
	mux->npsocks--;
	mux->mstats.unattach++;
	__kcm_mux_psock_gone(mux, psock);
	spin_unlock_bh(&mux->lock);

	cancel_delayed_work_sync(&psock->strp.work);
	cancel_delayed_work_sync(&psock->strp.timer_work);
	cancel_delayed_work_sync(&psock->strp.trim_work);

	lock_sock(csk);
	kcm_strp_flush(psock);
	release_sock(csk);

	trace_kcm_psock_unattach(psock);
	/* Its counters live on in the mux totals. */
	spin_lock_bh(&mux->lock);
	kcm_stats_fold(&mux->psock_stats, &psock->stats);
	spin_unlock_bh(&mux->lock);

	/* Whatever is still queued on the socket is the application's. */
	csk->sk_data_ready(csk);

	kcm_parser_put(&psock->parser, psock->prog);
	fput(psock->file);
	kcm_psock_free(psock);
}

/* Context: mux->psock_mutex held. */
static struct kcm_psock *kcm_psock_find(struct kcm_mux *mux,
					const struct sock *csk)
{
	struct kcm_psock *psock;

	lockdep_assert_held(&mux->psock_mutex);
	list_for_each_entry(psock, &mux->psocks, mux_node) {
		if (psock->sk == csk)
			return psock;
	}
	return NULL;
}

/**
 * kcm_unattach_ioctl() - SIOCKCMUNATTACH
 * @kcm: a KCM socket of the mux
 * @info: the TCP socket to detach
 *
 * Context: process context, may sleep.
 * Return: 0, or -ENOENT when the socket is not attached to this mux.
 */
int kcm_unattach_ioctl(struct kcm_sock *kcm, const struct kcm_unattach *info)
{
	struct kcm_mux *mux = kcm->mux;
	struct kcm_psock *psock;
	struct socket *csock;
	int err;

	csock = sockfd_lookup(info->fd, &err);
	if (!csock)
		return -ENOENT;

	mutex_lock(&mux->psock_mutex);
	psock = kcm_psock_find(mux, csock->sk);
	if (psock)
		kcm_psock_unattach(psock);
	mutex_unlock(&mux->psock_mutex);

	sockfd_put(csock);
	return psock ? 0 : -ENOENT;
}

/**
 * kcm_mux_unattach_all() - release every TCP socket of a dying mux
 * @mux: a mux whose last KCM socket is gone
 *
 * Context: process context, may sleep.
 */
void kcm_mux_unattach_all(struct kcm_mux *mux)
{
	struct kcm_psock *psock;

	mutex_lock(&mux->psock_mutex);
	while ((psock = list_first_entry_or_null(&mux->psocks,
						 struct kcm_psock,
						 mux_node)))
		kcm_psock_unattach(psock);
	mutex_unlock(&mux->psock_mutex);
}
