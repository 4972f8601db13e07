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
#include <linux/types.h>
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
 * @lock: protects @socks, @nsocks and @next_index
 * @socks: the KCM sockets of the mux (struct kcm_sock.mux_node)
 * @nsocks: number of entries on @socks; the mux dies when it drops to 0
 * @next_index: index given to the next KCM socket that joins
 * @stats: totals of the KCM sockets that have left the mux
 * @rcu: deferred free
 */
struct kcm_mux {
	struct kcm_net *knet;
	struct list_head net_node;

	spinlock_t lock;	/* protects socks, nsocks, next_index */
	struct list_head socks;
	unsigned int nsocks;
	unsigned int next_index;
	struct kcm_msg_stats stats;

	struct rcu_head rcu;
};

/**
 * struct kcm_sock - one KCM socket
 * @sk: the socket; must stay first
 * @mux: the multiplexor the socket belongs to; fixed once the socket is
 *	visible to user space
 * @mux_node: entry on @mux->socks, protected by @mux->lock
 * @index: number of the socket within its mux, shown in /proc
 * @rx_disabled: KCM_RECV_DISABLE, written under lock_sock()
 * @stats: message counters of this socket
 */
struct kcm_sock {
	struct sock sk;
	struct kcm_mux *mux;
	struct list_head mux_node;
	unsigned int index;
	bool rx_disabled;
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
