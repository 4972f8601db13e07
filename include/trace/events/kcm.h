/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Trace events of the Kernel Connection Multiplexor (AF_KCM); described
 * one by one in Documentation/networking/kcm.rst ("Trace events").
 *
 * Every event names its mux by id (as /proc/net/kcm_ext and kcmstat do;
 * unique within a network namespace), an attached TCP socket by its psock
 * index (the connection id of KCM_CONN_ID) and a KCM socket by its index
 * within the mux.  Lengths are in bytes, errors are negative errnos.  The
 * events take the objects themselves and read what they record in
 * TP_fast_assign, so a disabled event costs its static branch only.
 *
 * kcmsock.c defines CREATE_TRACE_POINTS.  There is no TRACE_INCLUDE_PATH:
 * in the kernel tree this header is in include/trace/events/, and out of
 * tree Kbuild puts this tree's include/ ahead of the kernel's, so
 * <trace/events/kcm.h> finds it both ways.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM kcm

#if !defined(_TRACE_KCM_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TRACE_KCM_H

#include <linux/ipv6.h>
#include <linux/skbuff.h>
#include <linux/tracepoint.h>
#include <net/inet_sock.h>
#include <net/sock.h>
#include <net/tcp.h>
#include <net/kcm.h>
#include <trace/events/net_probe_common.h>

#ifndef _TRACE_KCM_DEF
#define _TRACE_KCM_DEF

/* Bytes of the messages of a received skb not read yet. */
static inline unsigned int kcm_trace_rx_bytes(struct sk_buff *skb)
{
	const struct kcm_rx_msg *rxm = kcm_rx_msg(skb);
	unsigned int i, bytes = 0;

	if (!rxm->pack)
		return skb->len - rxm->pos;
	for (i = rxm->next; i < rxm->nmsgs; i++)
		bytes += kcm_pack_lens(skb)[i];
	return bytes;
}

#endif /* _TRACE_KCM_DEF */

/* A TCP socket was attached: its psock index and its endpoints. */
TRACE_EVENT(kcm_psock_attach,
	    TP_PROTO(const struct kcm_psock *psock),
	    TP_ARGS(psock),
	    TP_STRUCT__entry(__field(unsigned int, mux)
			     __field(unsigned int, psock)
			     __array(__u8, saddr, sizeof(struct sockaddr_in6))
			     __array(__u8, daddr, sizeof(struct sockaddr_in6))
	    ),
	    TP_fast_assign(const struct sock *sk = psock->sk;

			   __entry->mux = psock->mux->id;
			   __entry->psock = psock->index;
			   memset(__entry->saddr, 0, sizeof(__entry->saddr));
			   memset(__entry->daddr, 0, sizeof(__entry->daddr));
			   TP_STORE_ADDR_PORTS(__entry, inet_sk(sk), sk);
	    ),
	    TP_printk("mux=%u psock=%u local=%pISpc remote=%pISpc",
		      __entry->mux, __entry->psock, __entry->saddr,
		      __entry->daddr)
);

/* A TCP socket was given back: what its psock carried. */
TRACE_EVENT(kcm_psock_unattach,
	    TP_PROTO(const struct kcm_psock *psock),
	    TP_ARGS(psock),
	    TP_STRUCT__entry(__field(unsigned int, mux)
			     __field(unsigned int, psock)
			     __field(u64, rx_msgs)
			     __field(u64, tx_msgs)
	    ),
	    TP_fast_assign(__entry->mux = psock->mux->id;
			   __entry->psock = psock->index;
			   __entry->rx_msgs = READ_ONCE(psock->stats.rx_msgs);
			   __entry->tx_msgs = READ_ONCE(psock->stats.tx_msgs);
	    ),
	    TP_printk("mux=%u psock=%u rx_msgs=%llu tx_msgs=%llu",
		      __entry->mux, __entry->psock, __entry->rx_msgs,
		      __entry->tx_msgs)
);

/*
 * The psock's TCP socket gained an upper layer protocol (kTLS): the psock
 * stops for good, -EOPNOTSUPP posted on the TCP socket.
 */
TRACE_EVENT(kcm_psock_ulp,
	    TP_PROTO(const struct kcm_psock *psock),
	    TP_ARGS(psock),
	    TP_STRUCT__entry(__field(unsigned int, mux)
			     __field(unsigned int, psock)
			     __array(char, ulp, 16)
	    ),
	    TP_fast_assign(const struct tcp_ulp_ops *ops =
				inet_csk(psock->sk)->icsk_ulp_ops;

			   __entry->mux = psock->mux->id;
			   __entry->psock = psock->index;
			   strscpy(__entry->ulp, ops ? ops->name : "",
				   sizeof(__entry->ulp));
	    ),
	    TP_printk("mux=%u psock=%u ulp=%s",
		      __entry->mux, __entry->psock, __entry->ulp)
);

/* A psock stops or starts reading because of what it has held. */
DECLARE_EVENT_CLASS(kcm_psock_flow_class,
		    TP_PROTO(const struct kcm_psock *psock),
		    TP_ARGS(psock),
		    TP_STRUCT__entry(__field(unsigned int, mux)
				     __field(unsigned int, psock)
				     __field(unsigned int, held)
				     __field(int, rcvbuf)
		    ),
		    TP_fast_assign(__entry->mux = psock->mux->id;
				   __entry->psock = psock->index;
				   __entry->held = psock->rx_held;
				   __entry->rcvbuf =
					READ_ONCE(psock->sk->sk_rcvbuf);
		    ),
		    TP_printk("mux=%u psock=%u held=%u rcvbuf=%d",
			      __entry->mux, __entry->psock, __entry->held,
			      __entry->rcvbuf)
);

DEFINE_EVENT(kcm_psock_flow_class, kcm_psock_pause,
	     TP_PROTO(const struct kcm_psock *psock),
	     TP_ARGS(psock)
);

DEFINE_EVENT(kcm_psock_flow_class, kcm_psock_resume,
	     TP_PROTO(const struct kcm_psock *psock),
	     TP_ARGS(psock)
);

/* A psock framed one message of @len bytes. */
TRACE_EVENT(kcm_rx_framed,
	    TP_PROTO(const struct kcm_psock *psock, unsigned int len),
	    TP_ARGS(psock, len),
	    TP_STRUCT__entry(__field(unsigned int, mux)
			     __field(unsigned int, psock)
			     __field(unsigned int, len)
	    ),
	    TP_fast_assign(__entry->mux = psock->mux->id;
			   __entry->psock = psock->index;
			   __entry->len = len;
	    ),
	    TP_printk("mux=%u psock=%u len=%u",
		      __entry->mux, __entry->psock, __entry->len)
);

/* A message or a pack of them goes to a KCM socket's receive queue. */
TRACE_EVENT(kcm_rx_deliver,
	    TP_PROTO(const struct kcm_sock *kcm, struct sk_buff *skb),
	    TP_ARGS(kcm, skb),
	    TP_STRUCT__entry(__field(unsigned int, mux)
			     __field(unsigned int, kcm)
			     __field(unsigned int, psock)
			     __field(unsigned int, msgs)
			     __field(unsigned int, bytes)
	    ),
	    TP_fast_assign(__entry->mux = kcm->mux->id;
			   __entry->kcm = kcm->index;
			   __entry->psock = kcm_rx_msg(skb)->conn_id;
			   __entry->msgs = kcm_rx_left(skb);
			   __entry->bytes = kcm_trace_rx_bytes(skb);
	    ),
	    TP_printk("mux=%u kcm=%u psock=%u msgs=%u bytes=%u",
		      __entry->mux, __entry->kcm, __entry->psock, __entry->msgs,
		      __entry->bytes)
);

/* No KCM socket could take a message or pack: it waits on the mux. */
TRACE_EVENT(kcm_rx_hold,
	    TP_PROTO(const struct kcm_psock *psock, struct sk_buff *skb),
	    TP_ARGS(psock, skb),
	    TP_STRUCT__entry(__field(unsigned int, mux)
			     __field(unsigned int, psock)
			     __field(unsigned int, msgs)
			     __field(unsigned int, bytes)
			     __field(unsigned int, held)
			     __field(unsigned int, queued)
	    ),
	    TP_fast_assign(__entry->mux = psock->mux->id;
			   __entry->psock = psock->index;
			   __entry->msgs = kcm_rx_left(skb);
			   __entry->bytes = kcm_trace_rx_bytes(skb);
			   __entry->held = psock->rx_held;
			   __entry->queued =
				skb_queue_len(&psock->mux->rx_hold);
	    ),
	    TP_printk("mux=%u psock=%u msgs=%u bytes=%u held=%u queued=%u",
		      __entry->mux, __entry->psock, __entry->msgs,
		      __entry->bytes, __entry->held, __entry->queued)
);

/*
 * Messages with a key (steering) went to @kcm, which owns their key:
 * onto its receive queue, or with @held onto its hold, to wait for it.
 */
TRACE_EVENT(kcm_rx_steer,
	    TP_PROTO(const struct kcm_sock *kcm, struct sk_buff *skb,
		     bool held),
	    TP_ARGS(kcm, skb, held),
	    TP_STRUCT__entry(__field(unsigned int, mux)
			     __field(unsigned int, kcm)
			     __field(unsigned int, psock)
			     __field(unsigned int, msgs)
			     __field(unsigned int, bytes)
			     __field(u32, key)
			     __field(bool, held)
	    ),
	    TP_fast_assign(__entry->mux = kcm->mux->id;
			   __entry->kcm = kcm->index;
			   __entry->psock = kcm_rx_msg(skb)->conn_id;
			   __entry->msgs = kcm_rx_left(skb);
			   __entry->bytes = kcm_trace_rx_bytes(skb);
			   __entry->key = kcm_rx_key_at(skb,
							kcm_rx_msg(skb)->next);
			   __entry->held = held;
	    ),
	    TP_printk("mux=%u kcm=%u psock=%u msgs=%u bytes=%u key=%u held=%d",
		      __entry->mux, __entry->kcm, __entry->psock, __entry->msgs,
		      __entry->bytes, __entry->key, __entry->held)
);

/*
 * A KCM socket joined (@join) or left the sockets that own keys; @moved
 * key slots changed owner, and it owns @slots now.
 */
TRACE_EVENT(kcm_steer_member,
	    TP_PROTO(const struct kcm_sock *kcm, bool join, unsigned int moved),
	    TP_ARGS(kcm, join, moved),
	    TP_STRUCT__entry(__field(unsigned int, mux)
			     __field(unsigned int, kcm)
			     __field(bool, join)
			     __field(unsigned int, moved)
			     __field(unsigned int, slots)
	    ),
	    TP_fast_assign(__entry->mux = kcm->mux->id;
			   __entry->kcm = kcm->index;
			   __entry->join = join;
			   __entry->moved = moved;
			   __entry->slots = kcm->steer.slots;
	    ),
	    TP_printk("mux=%u kcm=%u join=%d moved=%u slots=%u",
		      __entry->mux, __entry->kcm, __entry->join,
		      __entry->moved, __entry->slots)
);

/* The mux's key function (KCM_RECV_KEY) is now of @kind (0: none). */
TRACE_EVENT(kcm_steer_set,
	    TP_PROTO(const struct kcm_mux *mux, int kind),
	    TP_ARGS(mux, kind),
	    TP_STRUCT__entry(__field(unsigned int, mux)
			     __field(int, kind)
	    ),
	    TP_fast_assign(__entry->mux = mux->id;
			   __entry->kind = kind;
	    ),
	    TP_printk("mux=%u key=%s", __entry->mux,
		      __print_symbolic(__entry->kind,
				       { KCM_KEY_OFF, "off" },
				       { KCM_BPF_TYPE_FD, "bpf" },
				       { KCM_BPF_TYPE_PROG, "cbpf" },
				       { KCM_KEY_FIELD, "field" },
				       { KCM_KEY_CONN, "conn" }))
);

/* A psock stopped receiving: -@err is posted on its TCP socket. */
TRACE_EVENT(kcm_rx_error,
	    TP_PROTO(const struct kcm_psock *psock, int err),
	    TP_ARGS(psock, err),
	    TP_STRUCT__entry(__field(unsigned int, mux)
			     __field(unsigned int, psock)
			     __field(int, err)
	    ),
	    TP_fast_assign(__entry->mux = psock->mux->id;
			   __entry->psock = psock->index;
			   __entry->err = err;
	    ),
	    TP_printk("mux=%u psock=%u err=%d",
		      __entry->mux, __entry->psock, __entry->err)
);

/* The parser's length @len does not cover the bytes it had seen. */
TRACE_EVENT(kcm_rx_bad_len,
	    TP_PROTO(const struct kcm_psock *psock, unsigned int len),
	    TP_ARGS(psock, len),
	    TP_STRUCT__entry(__field(unsigned int, mux)
			     __field(unsigned int, psock)
			     __field(unsigned int, len)
			     __field(unsigned int, seen)
	    ),
	    TP_fast_assign(__entry->mux = psock->mux->id;
			   __entry->psock = psock->index;
			   __entry->len = len;
			   __entry->seen = psock->strp.seen;
	    ),
	    TP_printk("mux=%u psock=%u len=%u seen=%u",
		      __entry->mux, __entry->psock, __entry->len,
		      __entry->seen)
);

/*
 * A message longer than the TCP socket's receive buffer: @len is the
 * parser's length, or the bytes buffered while it still asked for more.
 */
TRACE_EVENT(kcm_rx_too_big,
	    TP_PROTO(const struct kcm_psock *psock, unsigned int len),
	    TP_ARGS(psock, len),
	    TP_STRUCT__entry(__field(unsigned int, mux)
			     __field(unsigned int, psock)
			     __field(unsigned int, len)
			     __field(int, rcvbuf)
	    ),
	    TP_fast_assign(__entry->mux = psock->mux->id;
			   __entry->psock = psock->index;
			   __entry->len = len;
			   __entry->rcvbuf = READ_ONCE(psock->sk->sk_rcvbuf);
	    ),
	    TP_printk("mux=%u psock=%u len=%u rcvbuf=%d",
		      __entry->mux, __entry->psock, __entry->len,
		      __entry->rcvbuf)
);

/* A message was not complete within the TCP socket's SO_RCVTIMEO. */
TRACE_EVENT(kcm_rx_timeout,
	    TP_PROTO(const struct kcm_psock *psock),
	    TP_ARGS(psock),
	    TP_STRUCT__entry(__field(unsigned int, mux)
			     __field(unsigned int, psock)
			     __field(unsigned int, len)
			     __field(unsigned int, msecs)
	    ),
	    TP_fast_assign(__entry->mux = psock->mux->id;
			   __entry->psock = psock->index;
			   __entry->len = psock->strp.msg_len;
			   __entry->msecs =
				jiffies_to_msecs(jiffies - psock->strp.start);
	    ),
	    TP_printk("mux=%u psock=%u len=%u msecs=%u",
		      __entry->mux, __entry->psock, __entry->len,
		      __entry->msecs)
);

/*
 * A message, or a pack of @msgs small ones, was written whole to a
 * psock's TCP socket; @kcm is NULL for the rest of one whose KCM socket
 * closed (kcm=-1).
 */
TRACE_EVENT(kcm_tx_sent,
	    TP_PROTO(const struct kcm_psock *psock, const struct kcm_sock *kcm,
		     unsigned int len, unsigned int msgs, bool retried),
	    TP_ARGS(psock, kcm, len, msgs, retried),
	    TP_STRUCT__entry(__field(unsigned int, mux)
			     __field(int, kcm)
			     __field(unsigned int, psock)
			     __field(unsigned int, len)
			     __field(unsigned int, msgs)
			     __field(bool, retried)
	    ),
	    TP_fast_assign(__entry->mux = psock->mux->id;
			   __entry->kcm = kcm ? kcm->index : -1;
			   __entry->psock = psock->index;
			   __entry->len = len;
			   __entry->msgs = msgs;
			   __entry->retried = retried;
	    ),
	    TP_printk("mux=%u kcm=%d psock=%u len=%u msgs=%u retried=%d",
		      __entry->mux, __entry->kcm, __entry->psock, __entry->len,
		      __entry->msgs, __entry->retried)
);

/*
 * Writing a message of @len bytes to a psock stopped after @sent bytes:
 * -@err from TCP, or 0 when the psock was unattached.  With @retry it
 * goes out again, whole, on another psock.
 */
TRACE_EVENT(kcm_tx_abort,
	    TP_PROTO(const struct kcm_psock *psock, const struct kcm_sock *kcm,
		     unsigned int len, unsigned int sent, int err, bool retry),
	    TP_ARGS(psock, kcm, len, sent, err, retry),
	    TP_STRUCT__entry(__field(unsigned int, mux)
			     __field(int, kcm)
			     __field(unsigned int, psock)
			     __field(unsigned int, len)
			     __field(unsigned int, sent)
			     __field(int, err)
			     __field(bool, retry)
	    ),
	    TP_fast_assign(__entry->mux = psock->mux->id;
			   __entry->kcm = kcm ? kcm->index : -1;
			   __entry->psock = psock->index;
			   __entry->len = len;
			   __entry->sent = sent;
			   __entry->err = err;
			   __entry->retry = retry;
	    ),
	    TP_printk("mux=%u kcm=%d psock=%u len=%u sent=%u err=%d retry=%d",
		      __entry->mux, __entry->kcm, __entry->psock, __entry->len,
		      __entry->sent, __entry->err, __entry->retry)
);

/*
 * @n messages of a KCM socket were dropped unsent: those addressed to
 * connection @conn, gone or stopped (-@err); with @conn -1 and @err 0
 * every message queued when the socket closed, with @conn -1 and @err
 * -EMSGSIZE the message that outgrew the socket's send buffer.
 */
TRACE_EVENT_CONDITION(kcm_tx_drop,
		      TP_PROTO(const struct kcm_sock *kcm, int conn, int err,
			       unsigned int n),
		      TP_ARGS(kcm, conn, err, n),
		      TP_CONDITION(n),
		      TP_STRUCT__entry(__field(unsigned int, mux)
				       __field(unsigned int, kcm)
				       __field(int, conn)
				       __field(int, err)
				       __field(unsigned int, msgs)
		      ),
		      TP_fast_assign(__entry->mux = kcm->mux->id;
				     __entry->kcm = kcm->index;
				     __entry->conn = conn;
				     __entry->err = err;
				     __entry->msgs = n;
		      ),
		      TP_printk("mux=%u kcm=%u conn=%d err=%d msgs=%u",
				__entry->mux, __entry->kcm, __entry->conn,
				__entry->err, __entry->msgs)
);

#endif /* _TRACE_KCM_H */

#include <trace/define_trace.h>
