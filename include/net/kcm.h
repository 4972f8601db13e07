/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Kernel Connection Multiplexor (AF_KCM): objects shared by the files of
 * net/kcm.  See the implementation notes at the top of kcmsock.c.
 */
#ifndef _NET_KCM_H
#define _NET_KCM_H

#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/spinlock.h>
#include <linux/skbuff.h>
#include <linux/types.h>
#include <linux/workqueue.h>
#include <net/netns/generic.h>
#include <net/sock.h>
#include <linux/kcm.h>

/**
 * struct kcm_msg_stats - message and byte counters of one object
 * @rx_msgs: messages received by the application
 * @rx_bytes: bytes of those messages
 * @tx_msgs: messages handed to TCP whole
 * @tx_bytes: bytes of those messages
 *
 * Written by the data path of the object they belong to, read locklessly
 * by /proc.
 */
struct kcm_msg_stats {
	u64 rx_msgs;
	u64 rx_bytes;
	u64 tx_msgs;
	u64 tx_bytes;
};

/**
 * struct kcm_psock_stats - receive counters of one attached TCP socket
 * @rx_msgs: messages framed
 * @rx_bytes: bytes of those messages
 * @rx_need_more: parser calls that asked for more bytes
 * @rx_bad_len: lengths the parser should have returned earlier (EPROTO)
 * @rx_too_big: lengths over the TCP socket's receive buffer (EMSGSIZE)
 * @rx_timeouts: messages not complete within SO_RCVTIMEO (ETIMEDOUT)
 * @rx_aborts: half-assembled messages dropped (error, unattach, close)
 * @rx_mem_fail: allocations that failed while framing (retried)
 * @rx_errors: parser errors (negative returns)
 *
 * Written under the TCP socket's lock, read locklessly by /proc.
 */
struct kcm_psock_stats {
	u64 rx_msgs;
	u64 rx_bytes;
	u64 rx_need_more;
	u64 rx_bad_len;
	u64 rx_too_big;
	u64 rx_timeouts;
	u64 rx_aborts;
	u64 rx_mem_fail;
	u64 rx_errors;
};

/**
 * struct kcm_net - per network namespace state
 * @lock: protects @muxes and @count
 * @muxes: every live multiplexor of the namespace
 * @count: number of entries on @muxes
 */
struct kcm_net {
	struct mutex lock;	/* protects muxes, count */
	struct list_head muxes;
	unsigned int count;
};

/**
 * struct kcm_mux - a multiplexor: KCM sockets on one side, TCP on the other
 * @knet: namespace state; the mux is on @knet->muxes while it lives
 * @net_node: entry on @knet->muxes, protected by @knet->lock
 * @lock: protects everything below but @psock_mutex and @rcu
 * @socks: the KCM sockets of the mux (struct kcm_sock.mux_node)
 * @nsocks: number of entries on @socks; the mux dies when it drops to 0
 * @next_index: index given to the next KCM socket that joins
 * @rx_ready: KCM sockets that can take a message now, in round-robin
 *	order (struct kcm_sock.rx_node)
 * @rx_hold: complete messages that no KCM socket could take yet
 * @psocks: attached TCP sockets (struct kcm_psock.mux_node)
 * @npsocks: number of entries on @psocks
 * @next_psock_index: index given to the next psock
 * @stats: totals of the KCM sockets that have left the mux
 * @psock_mutex: serialises attach and unattach (process context)
 * @rcu: deferred free
 */
struct kcm_mux {
	struct kcm_net *knet;
	struct list_head net_node;

	spinlock_t lock;	/* see the kernel-doc above */
	struct list_head socks;
	unsigned int nsocks;
	unsigned int next_index;
	struct list_head rx_ready;
	struct sk_buff_head rx_hold;
	struct list_head psocks;
	unsigned int npsocks;
	unsigned int next_psock_index;
	struct kcm_msg_stats stats;

	struct mutex psock_mutex;	/* serialises attach and unattach */
	struct rcu_head rcu;
};

/**
 * struct kcm_psock - a TCP socket attached to a mux
 * @mux: the mux
 * @sk: the TCP socket
 * @file: reference that keeps @sk open while attached
 * @prog: the BPF program that returns message lengths
 * @mux_node: entry on @mux->psocks, protected by @mux->lock
 * @index: number of the psock within its mux, shown in /proc
 * @saved_data_ready: the TCP socket's callback, restored on unattach
 * @rx_skb: bytes of the stream not framed yet, message start at data[0];
 *	under the TCP socket's lock, like every rx_ field but those marked
 * @rx_msg: a large message being assembled once its length is known
 * @rx_chunk: the last skb of @rx_msg (@rx_msg itself or on its frag_list)
 * @rx_msg_len: the length of the message starting at @rx_skb or @rx_msg,
 *	0 while unknown
 * @rx_msg_fill: bytes of @rx_msg written so far
 * @rx_chunk_fill: bytes of @rx_chunk written so far
 * @rx_seen: bytes the parser was shown when it last asked for more
 * @rx_start: jiffies when the current message began (assembly timeout)
 * @rx_timing: a message is incomplete and @rx_start is valid
 * @rx_stopped: no more receiving: error or unattach (READ_ONCE)
 * @rx_paused: too much of our data held on the mux; written under
 *	@mux->lock, read locklessly by the framing code
 * @rx_held: bytes of our messages on @mux->rx_hold; under @mux->lock
 * @rx_gfp: allocation flags of the current framing context
 * @rx_work: framing in process context
 * @rx_timer_work: assembly timeout
 * @stats: counters
 */
struct kcm_psock {
	struct kcm_mux *mux;
	struct sock *sk;
	struct file *file;
	struct bpf_prog *prog;
	struct list_head mux_node;
	unsigned int index;

	void (*saved_data_ready)(struct sock *sk);

	struct sk_buff *rx_skb;
	struct sk_buff *rx_msg;
	struct sk_buff *rx_chunk;
	unsigned int rx_msg_len;
	unsigned int rx_msg_fill;
	unsigned int rx_chunk_fill;
	unsigned int rx_seen;
	unsigned long rx_start;
	bool rx_timing;
	bool rx_stopped;
	bool rx_paused;
	unsigned int rx_held;
	gfp_t rx_gfp;
	struct delayed_work rx_work;
	struct delayed_work rx_timer_work;

	struct kcm_psock_stats stats;
};

/**
 * struct kcm_rx_msg - what KCM keeps in skb->cb of a received message
 * @psock: the psock it came from while it is on @mux->rx_hold, or NULL
 * @offset: bytes already read by a SEQPACKET reader
 */
struct kcm_rx_msg {
	struct kcm_psock *psock;
	unsigned int offset;
};

static inline struct kcm_rx_msg *kcm_rx_msg(struct sk_buff *skb)
{
	BUILD_BUG_ON(sizeof(struct kcm_rx_msg) > sizeof(skb->cb));
	return (struct kcm_rx_msg *)skb->cb;
}

/**
 * struct kcm_sock - one KCM socket
 * @sk: the socket; must stay first
 * @mux: the multiplexor the socket belongs to; fixed once the socket is
 *	visible to user space
 * @mux_node: entry on @mux->socks, protected by @mux->lock
 * @index: number of the socket within its mux, shown in /proc
 * @rx_disabled: KCM_RECV_DISABLE; written under lock_sock() and @mux->lock
 * @rx_node: entry on @mux->rx_ready while @rx_ready, under @mux->lock
 * @rx_ready: the socket is in the receive rotation; under @mux->lock
 * @stats: message counters of this socket
 */
struct kcm_sock {
	struct sock sk;
	struct kcm_mux *mux;
	struct list_head mux_node;
	unsigned int index;
	bool rx_disabled;
	struct list_head rx_node;
	bool rx_ready;
	struct kcm_msg_stats stats;
};

static inline struct kcm_sock *kcm_sk(const struct sock *sk)
{
	return container_of(sk, struct kcm_sock, sk);
}

extern unsigned int kcm_net_id;

static inline struct kcm_net *kcm_net(const struct net *net)
{
	return net_generic(net, kcm_net_id);
}

/* kcm_mux.c: multiplexor life cycle and namespace state */
struct kcm_mux *kcm_mux_alloc(struct net *net);
void kcm_mux_free(struct kcm_mux *mux);
void kcm_mux_publish(struct kcm_mux *mux);
void kcm_mux_add_sock(struct kcm_mux *mux, struct kcm_sock *kcm);
void kcm_mux_del_sock(struct kcm_sock *kcm);
int kcm_net_register(void);
void kcm_net_unregister(void);

/* kcm_psock.c: attaching TCP sockets */
int kcm_attach_ioctl(struct kcm_sock *kcm, const struct kcm_attach *info);
int kcm_unattach_ioctl(struct kcm_sock *kcm, const struct kcm_unattach *info);
void kcm_mux_unattach_all(struct kcm_mux *mux);

/* kcm_rx.c: framing, delivery and reading */
int kcm_psock_rx_init(struct kcm_psock *psock);
void kcm_psock_data_ready(struct sock *csk);
void kcm_psock_rx_kick(struct kcm_psock *psock);
void kcm_psock_rx_flush(struct kcm_psock *psock);
void __kcm_mux_psock_gone(struct kcm_mux *mux, struct kcm_psock *psock);
void __kcm_rx_join(struct kcm_sock *kcm);
void __kcm_rx_remove(struct kcm_sock *kcm);
void kcm_rx_sock_join(struct kcm_sock *kcm);
void kcm_rx_sock_leave(struct kcm_sock *kcm);
void kcm_rx_set_disabled(struct kcm_sock *kcm, bool disable);
int kcm_recvmsg(struct socket *sock, struct msghdr *msg, size_t len,
		int flags);
void kcm_mux_rx_purge(struct kcm_mux *mux);

/* Counters are written by one context at a time and read by /proc. */
static inline void kcm_stat_add(u64 *ctr, u64 n)
{
	WRITE_ONCE(*ctr, *ctr + n);
}

/* kcmproc.c: /proc/net/kcm */
#ifdef CONFIG_PROC_FS
int kcm_proc_init_net(struct net *net);
void kcm_proc_exit_net(struct net *net);
#else
static inline int kcm_proc_init_net(struct net *net)
{
	return 0;
}

static inline void kcm_proc_exit_net(struct net *net)
{
}
#endif

#endif /* _NET_KCM_H */
