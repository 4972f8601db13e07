// SPDX-License-Identifier: GPL-2.0-only
/*
 * Kernel Connection Multiplexor: per-connection addressing (not in
 * upstream Linux).
 *
 * The id of a connection is the index of its psock: given at attach from
 * a per-mux counter, never reused within the mux, and shown as
 * psock-<index> in /proc/net/kcm.  A KCM socket with KCM_RECV_CONN_ID set
 * gets a KCM_CONN_ID control message with every message it reads; a
 * message sent with a KCM_CONN_ID control message goes out whole on that
 * connection (kcm_tx.c reserves that psock for it).
 */

#include <linux/net.h>
#include <linux/socket.h>
#include <net/sock.h>
#include <net/kcm.h>

/**
 * __kcm_mux_psock_by_id() - find an attached psock by its id
 * @mux: the mux
 * @id: a psock index
 *
 * One lookup in mux->psock_ids, whatever the number of connections.
 *
 * Context: mux->lock held (the entry and its psock cannot go meanwhile).
 * Return: the psock, or NULL.
 */
struct kcm_psock *__kcm_mux_psock_by_id(struct kcm_mux *mux, u32 id)
{
	lockdep_assert_held(&mux->lock);
	return xa_load(&mux->psock_ids, id);
}

/**
 * kcm_conn_rx_cmsg() - add the connection id of a message being read
 * @kcm: the reading socket
 * @msg: the reader's msghdr
 * @skb: the message
 *
 * Only with KCM_RECV_CONN_ID set; without room for it the reader sees
 * MSG_CTRUNC (put_cmsg()).
 *
 * Context: process context, lock_sock(kcm) held.
 */
void kcm_conn_rx_cmsg(struct kcm_sock *kcm, struct msghdr *msg,
		      struct sk_buff *skb)
{
	u32 id = kcm_rx_msg(skb)->conn_id;

	if (READ_ONCE(kcm->rx_conn_id))
		put_cmsg(msg, SOL_KCM, KCM_CONN_ID, sizeof(id), &id);
}

/**
 * __kcm_conn_tx_errno() - why a connection can no longer carry messages
 * @psock: the connection, or NULL when no connection has the id
 *
 * An unattached connection is gone (ENOENT) from the moment its unattach
 * begins, whatever the order in which a sender looks at it; one that
 * gained an upper layer protocol KCM cannot write beneath is refused
 * (EOPNOTSUPP); one whose transmission failed is broken (EPIPE).
 *
 * Context: mux->lock held.
 * Return: 0 when it transmits, -ENOENT, -EOPNOTSUPP or -EPIPE.
 */
int __kcm_conn_tx_errno(const struct kcm_psock *psock)
{
	if (!psock || psock->tx_gone)
		return -ENOENT;
	if (READ_ONCE(psock->ulp_stopped))
		return -EOPNOTSUPP;
	return psock->tx_stopped ? -EPIPE : 0;
}

/* Context: mux->lock not held; takes it.  Can @id carry a message now? */
static int kcm_conn_check(struct kcm_sock *kcm, u32 id)
{
	struct kcm_mux *mux = kcm->mux;
	int err;

	spin_lock_bh(&mux->lock);
	err = __kcm_conn_tx_errno(__kcm_mux_psock_by_id(mux, id));
	spin_unlock_bh(&mux->lock);
	return err;
}

/**
 * kcm_conn_tx_cmsg() - read the address of a message being sent
 * @kcm: the sending socket
 * @msg: the sender's msghdr
 * @to: the address found, @to->directed false without one
 *
 * Control messages of other levels are ignored, as upstream ignores all.
 *
 * Context: process context, lock_sock(kcm) held.
 * Return: 0; -EINVAL for a malformed control message, an unknown SOL_KCM
 * one, or an address that differs from the one the message being built
 * already has; -ENOENT when no connection has the id or it is being
 * unattached; -EPIPE when its transmission failed.
 */
int kcm_conn_tx_cmsg(struct kcm_sock *kcm, struct msghdr *msg,
		     struct kcm_tx_msg *to)
{
	struct sk_buff *partial = kcm->tx_partial;
	struct cmsghdr *cmsg;

	sock_owned_by_me(&kcm->sk);
	memset(to, 0, sizeof(*to));
	for_each_cmsghdr(cmsg, msg) {
		if (!CMSG_OK(msg, cmsg))
			return -EINVAL;
		if (cmsg->cmsg_level != SOL_KCM)
			continue;
		if (cmsg->cmsg_type != KCM_CONN_ID ||
		    cmsg->cmsg_len != CMSG_LEN(sizeof(u32)))
			return -EINVAL;
		to->conn_id = *(u32 *)CMSG_DATA(cmsg);
		to->directed = true;
	}
	if (!to->directed)
		return 0;

	if (partial && kcm_tx_msg(partial)->directed &&
	    kcm_tx_msg(partial)->conn_id != to->conn_id)
		return -EINVAL;
	return kcm_conn_check(kcm, to->conn_id);
}

/**
 * kcm_conn_tx_set() - address the message being built
 * @kcm: the sending socket
 * @to: from kcm_conn_tx_cmsg()
 *
 * Context: process context, lock_sock(kcm) held.
 */
void kcm_conn_tx_set(struct kcm_sock *kcm, const struct kcm_tx_msg *to)
{
	sock_owned_by_me(&kcm->sk);
	if (to->directed && kcm->tx_partial)
		*kcm_tx_msg(kcm->tx_partial) = *to;
}
