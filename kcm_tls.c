// SPDX-License-Identifier: GPL-2.0-only
/*
 * Kernel Connection Multiplexor: attached TCP sockets and kernel TLS.
 *
 * kTLS sits on the TCP socket as its upper layer protocol (ULP), keeping
 * its state in the ULP data rather than in sk_user_data, and may be set
 * up before or after the attach.  A psock never reads or writes beneath
 * it: each direction goes through kTLS once kTLS has keys for it, waits
 * while kTLS is there without them, and a ULP KCM cannot go through
 * (another ULP, device offload, or any ULP before 6.6, whose kTLS has no
 * read_sock for plaintext) stops the psock for good
 * (kcm_psock_io()).
 *
 * Callbacks.  For a direction kTLS carries, kTLS owns the socket's
 * data_ready or write_space callback and calls a saved one when it has
 * done its part: a record is ready to read, or there is room to write.
 * The psock's callback goes there, inside kTLS: when kTLS is set up
 * before the attach, the attach puts it in kTLS's slot; when it is set
 * up after, kTLS saves the psock's from the socket itself.  Unattach
 * puts the callbacks it took back where the psock's are, so the socket
 * goes back with kTLS working and kTLS never calls into this module
 * again.  Both slots change only under the TCP socket's lock and its
 * callback lock, which kTLS takes to set itself up.
 */

#include <linux/bvec.h>
#include <linux/string.h>
#include <linux/uio.h>
#include <net/inet_connection_sock.h>
#include <net/sock.h>
#include <net/tcp.h>
#include <net/tls.h>
#include <net/kcm.h>

#include "kcm_compat.h"

typedef void (*kcm_sk_cb)(struct sock *sk);

/* Context: the TCP socket's lock held.  Is the socket's ULP kTLS? */
static bool kcm_tls_is_ulp(const struct sock *csk)
{
	const struct tcp_ulp_ops *ops = inet_csk(csk)->icsk_ulp_ops;

	return IS_ENABLED(CONFIG_TLS) && ops && !strcmp(ops->name, "tls");
}

/*
 * Where kTLS keeps the data_ready callback it calls when a record is
 * ready: in its receive context, which software and device receive both
 * begin with, once TLS_RX is set.
 */
static kcm_sk_cb *kcm_tls_data_ready_slot(struct sock *csk)
{
	struct tls_context *ctx = tls_get_ctx(csk);

	if (!ctx || ctx->rx_conf == TLS_BASE || !ctx->priv_ctx_rx)
		return NULL;
	return &tls_sw_ctx_rx(ctx)->saved_data_ready;
}

/* Where kTLS keeps the write_space callback it calls, once TLS_TX is set. */
static kcm_sk_cb *kcm_tls_write_space_slot(struct sock *csk)
{
	struct tls_context *ctx = tls_get_ctx(csk);

	if (!ctx || ctx->tx_conf == TLS_BASE)
		return NULL;
	return &ctx->sk_write_space;
}

/**
 * kcm_tls_io() - how KCM may read or write a TCP socket
 * @csk: an attached (or being attached) TCP socket
 * @tx: the direction: write, or read
 *
 * Context: the TCP socket's lock held: kTLS sets itself up under it.
 * Return: KCM_IO_TCP without a ULP, KCM_IO_TLS when kTLS has software
 * keys for @tx, KCM_IO_WAIT while kTLS has none for it yet, or
 * -EOPNOTSUPP for a ULP or a kTLS set-up that KCM cannot go through.
 */
int kcm_tls_io(const struct sock *csk, bool tx)
{
	const struct tls_context *ctx;
	int conf;

	if (likely(!inet_csk(csk)->icsk_ulp_ops))
		return KCM_IO_TCP;
	if (!kcm_tls_is_ulp(csk) || !kcm_tls_carried())
		return -EOPNOTSUPP;
	ctx = tls_get_ctx(csk);
	conf = tx ? ctx->tx_conf : ctx->rx_conf;
	switch (conf) {
	case TLS_BASE:
		return KCM_IO_WAIT;
	case TLS_SW:
		return KCM_IO_TLS;
	default:
		return -EOPNOTSUPP;
	}
}

/**
 * kcm_tls_attach_check() - may a TCP socket with a ULP be attached?
 * @csk: the TCP socket
 *
 * Context: lock_sock(csk) held.
 * Return: 0, or -EOPNOTSUPP when KCM cannot go through its ULP either way.
 */
int kcm_tls_attach_check(struct sock *csk)
{
	sock_owned_by_me(csk);
	if (kcm_tls_io(csk, false) < 0 || kcm_tls_io(csk, true) < 0)
		return -EOPNOTSUPP;
	return 0;
}

/**
 * kcm_tls_hook_callbacks() - make the psock the owner of a TCP socket
 * @psock: the psock being attached
 *
 * Saves the socket's callbacks and puts the psock's in their place: in
 * the socket, or inside kTLS for a direction kTLS already carries.
 *
 * Context: lock_sock() of the TCP socket and its callback lock (write)
 * held.
 */
void kcm_tls_hook_callbacks(struct kcm_psock *psock)
{
	struct sock *csk = psock->sk;
	kcm_sk_cb *data_ready = &csk->sk_data_ready;
	kcm_sk_cb *write_space = &csk->sk_write_space;
	kcm_sk_cb *slot;

	sock_owned_by_me(csk);
	lockdep_assert_held_write(&csk->sk_callback_lock);
	if (kcm_tls_is_ulp(csk)) {
		slot = kcm_tls_data_ready_slot(csk);
		if (slot)
			data_ready = slot;
		slot = kcm_tls_write_space_slot(csk);
		if (slot)
			write_space = slot;
	}
	psock->saved_data_ready = *data_ready;
	psock->saved_write_space = *write_space;
	psock->saved_state_change = csk->sk_state_change;
	WRITE_ONCE(*data_ready, kcm_psock_data_ready);
	WRITE_ONCE(*write_space, kcm_psock_write_space);
	csk->sk_state_change = kcm_psock_state_change;
}

/*
 * Put @orig where @ours is: in the socket's @sock_slot, or in @ulp_slot
 * when kTLS holds @ours there.
 */
static void kcm_tls_swap(kcm_sk_cb *sock_slot, kcm_sk_cb *ulp_slot,
			 kcm_sk_cb ours, kcm_sk_cb orig)
{
	if (*sock_slot == ours)
		WRITE_ONCE(*sock_slot, orig);
	else if (ulp_slot && *ulp_slot == ours)
		WRITE_ONCE(*ulp_slot, orig);
	else
		WARN_ONCE(1, "kcm: a callback of an attached TCP socket was taken by a layer KCM does not know\n");
}

/**
 * kcm_tls_restore_callbacks() - give a TCP socket back its callbacks
 * @psock: the psock being unattached
 *
 * The state_change callback is KCM's alone; data_ready and write_space
 * may be inside kTLS (see the top of this file).
 *
 * Context: lock_sock() of the TCP socket and its callback lock (write)
 * held.
 */
void kcm_tls_restore_callbacks(struct kcm_psock *psock)
{
	struct sock *csk = psock->sk;
	bool tls = kcm_tls_is_ulp(csk);

	sock_owned_by_me(csk);
	lockdep_assert_held_write(&csk->sk_callback_lock);
	kcm_tls_swap(&csk->sk_data_ready,
		     tls ? kcm_tls_data_ready_slot(csk) : NULL,
		     kcm_psock_data_ready, psock->saved_data_ready);
	kcm_tls_swap(&csk->sk_write_space,
		     tls ? kcm_tls_write_space_slot(csk) : NULL,
		     kcm_psock_write_space, psock->saved_write_space);
	csk->sk_state_change = psock->saved_state_change;
}

/**
 * kcm_tls_read_sock() - read a TCP socket's decrypted records
 * @csk: a TCP socket that kTLS has receive keys for (KCM_IO_TLS)
 * @desc: the read descriptor
 * @actor: what takes the bytes, as for tcp_read_sock()
 *
 * kTLS hands over one decrypted record at a time, requeueing what the
 * actor leaves of it.
 *
 * Context: process context, lock_sock(csk) held: kTLS may sleep to
 * allocate while decrypting and flushes the socket's backlog.
 * Return: bytes taken, 0, or a negative errno: -EAGAIN with no record
 * ready, -EBADMSG for a record that does not decrypt, -EINVAL for one
 * that is not application data (an alert, a handshake message).
 */
int kcm_tls_read_sock(struct sock *csk, read_descriptor_t *desc,
		      sk_read_actor_t actor)
{
	sock_owned_by_me(csk);
	might_sleep();
	return csk->sk_socket->ops->read_sock(csk, desc, actor);
}

/**
 * kcm_tls_send_pages() - write page segments through kTLS
 * @csk: a TCP socket that kTLS has transmit keys for (KCM_IO_TLS)
 * @bv: the segments; kTLS takes its own page references
 * @nr: number of segments
 * @len: their bytes
 * @flags: MSG_DONTWAIT, MSG_NOSIGNAL, MSG_MORE (keeps the record open)
 *
 * Context: process context, lock_sock(csk) not held: kTLS takes it.
 * Return: bytes taken (maybe fewer than @len), or a negative errno.
 */
int kcm_tls_send_pages(struct sock *csk, struct bio_vec *bv, unsigned int nr,
		       size_t len, int flags)
{
	struct msghdr msg = { .msg_flags = flags | KCM_MSG_SPLICE_PAGES };

	iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, bv, nr, len);
	return READ_ONCE(csk->sk_prot)->sendmsg(csk, &msg, len);
}
