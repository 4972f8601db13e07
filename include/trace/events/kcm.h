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
#include <net/kcm.h>
#include <trace/events/net_probe_common.h>

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

#endif /* _TRACE_KCM_H */

#include <trace/define_trace.h>
