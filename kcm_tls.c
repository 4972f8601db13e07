// SPDX-License-Identifier: GPL-2.0-only
/*
 * Kernel Connection Multiplexor: attached TCP sockets and kernel TLS.
 *
 * kTLS keeps its state in the socket's ULP data, not in sk_user_data, and
 * may be turned on after the attach: it then saves the psock's
 * data_ready and write_space callbacks as the ones it calls on, and puts
 * its own in the socket.  Unattach must not put the socket's original
 * callbacks over kTLS's own (TLS would stop hearing of new data) nor
 * leave kTLS calling into this module: it swaps the originals in where
 * kTLS keeps the psock's.
 */

#include <linux/string.h>
#include <net/inet_connection_sock.h>
#include <net/sock.h>
#include <net/tcp.h>
#include <net/tls.h>
#include <net/kcm.h>

/* Context: the TCP socket's lock held.  Is the socket's ULP kTLS? */
static bool kcm_tls_is_ulp(const struct sock *csk)
{
	const struct tcp_ulp_ops *ops = inet_csk(csk)->icsk_ulp_ops;

	return IS_ENABLED(CONFIG_TLS) && ops && !strcmp(ops->name, "tls");
}

/*
 * Where kTLS keeps the data_ready callback it calls when a record is
 * ready: in its receive context, which software and device receive both
 * begin with (kTLS's own layout rule), once TLS_RX is set.
 */
static void (**kcm_tls_data_ready_slot(struct sock *csk))(struct sock *)
{
	struct tls_context *ctx = tls_get_ctx(csk);

	if (!ctx || ctx->rx_conf == TLS_BASE || !ctx->priv_ctx_rx)
		return NULL;
	return &tls_sw_ctx_rx(ctx)->saved_data_ready;
}

/* Where kTLS keeps the write_space callback it calls on, once TLS_TX is set. */
static void (**kcm_tls_write_space_slot(struct sock *csk))(struct sock *)
{
	struct tls_context *ctx = tls_get_ctx(csk);

	if (!ctx || ctx->tx_conf == TLS_BASE)
		return NULL;
	return &ctx->sk_write_space;
}

/*
 * Put @orig where @ours is: in the socket's @sock_slot, or in @ulp_slot
 * when a ULP took the socket's and keeps @ours to call on.
 */
static void kcm_tls_swap(void (**sock_slot)(struct sock *),
			 void (**ulp_slot)(struct sock *),
			 void (*ours)(struct sock *), void (*orig)(struct sock *))
{
	if (*sock_slot == ours)
		*sock_slot = orig;
	else if (ulp_slot && *ulp_slot == ours)
		WRITE_ONCE(*ulp_slot, orig);
	else
		WARN_ONCE(1, "kcm: a TCP callback of an attached socket was replaced by a layer KCM does not know\n");
}

/**
 * kcm_tls_restore_callbacks() - give a TCP socket back its callbacks
 * @psock: the psock being unattached
 *
 * The state_change callback is KCM's alone; data_ready and write_space
 * may have been taken over by kTLS since the attach (see above).
 *
 * Context: lock_sock() of the TCP socket and its callback lock (write)
 * held: kTLS installs itself and calls these callbacks under them.
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
