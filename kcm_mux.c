// SPDX-License-Identifier: GPL-2.0-only
/*
 * Kernel Connection Multiplexor: multiplexor life cycle and the per network
 * namespace list of multiplexors.
 *
 * A mux is allocated with the socket that creates it, published on its
 * namespace's list, gains KCM sockets by cloning and is freed when its last
 * KCM socket leaves.
 */

#include <linux/slab.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <net/kcm.h>

unsigned int kcm_net_id __read_mostly;

/**
 * kcm_mux_alloc() - allocate an empty multiplexor
 * @net: the namespace it will belong to
 *
 * Context: process context, may sleep.
 * Return: the mux, not yet visible in /proc, or NULL.
 */
struct kcm_mux *kcm_mux_alloc(struct net *net)
{
	struct kcm_mux *mux;

	mux = kzalloc(sizeof(*mux), GFP_KERNEL_ACCOUNT);
	if (!mux)
		return NULL;

	mux->knet = kcm_net(net);
	INIT_LIST_HEAD(&mux->net_node);
	spin_lock_init(&mux->lock);
	INIT_LIST_HEAD(&mux->socks);
	INIT_LIST_HEAD(&mux->rx_ready);
	kcm_mux_rx_init(mux);
	INIT_LIST_HEAD(&mux->psocks);
	/* Taken under mux->lock, which softirqs take too. */
	xa_init_flags(&mux->psock_ids, XA_FLAGS_LOCK_BH);
	INIT_LIST_HEAD(&mux->tx_idle);
	INIT_LIST_HEAD(&mux->tx_waiters);
	mutex_init(&mux->psock_mutex);
	return mux;
}

/**
 * kcm_mux_free() - free a mux that was never published
 * @mux: the mux from kcm_mux_alloc()
 *
 * Context: any.
 */
void kcm_mux_free(struct kcm_mux *mux)
{
	WARN_ON_ONCE(mux->nsocks);
	xa_destroy(&mux->psock_ids);
	mutex_destroy(&mux->psock_mutex);
	kfree(mux);
}

/**
 * kcm_mux_publish() - make a new mux visible on its namespace's list
 * @mux: a mux that already holds its first KCM socket
 *
 * Context: process context, takes the namespace lock.
 */
void kcm_mux_publish(struct kcm_mux *mux)
{
	struct kcm_net *knet = mux->knet;

	mutex_lock(&knet->lock);
	mux->id = ++knet->next_mux_id;
	list_add_tail(&mux->net_node, &knet->muxes);
	knet->count++;
	mutex_unlock(&knet->lock);
}

/* Context: process context, the mux has no KCM socket left. */
static void kcm_mux_destroy(struct kcm_mux *mux)
{
	struct kcm_net *knet = mux->knet;

	kcm_mux_unattach_all(mux);
	kcm_mux_rx_purge(mux);
	kcm_steer_mux_free(mux);

	mutex_lock(&knet->lock);
	list_del(&mux->net_node);
	knet->count--;
	/* Nothing writes the counters any more. */
	kcm_stats_fold(&knet->msg_stats, &mux->stats);
	kcm_stats_fold(&knet->mux_stats, &mux->mstats);
	kcm_stats_fold(&knet->psock_stats, &mux->psock_stats);
	mutex_unlock(&knet->lock);

	WARN_ON_ONCE(!xa_empty(&mux->psock_ids));
	xa_destroy(&mux->psock_ids);
	kfree_rcu(mux, rcu);
}

/**
 * kcm_mux_add_sock() - make a KCM socket a member of a mux
 * @mux: the mux, kept alive by the caller (a member socket or creation)
 * @kcm: a socket that belongs to no mux yet
 *
 * Context: process context, takes @mux->lock.
 */
void kcm_mux_add_sock(struct kcm_mux *mux, struct kcm_sock *kcm)
{
	spin_lock_bh(&mux->lock);
	kcm->mux = mux;
	kcm->index = mux->next_index++;
	list_add_tail(&kcm->mux_node, &mux->socks);
	mux->nsocks++;
	__kcm_rx_enter(kcm);
	spin_unlock_bh(&mux->lock);
}

/* Context: the caller holds mux->lock. */
static void __kcm_mux_fold_stats(struct kcm_mux *mux, struct kcm_sock *kcm)
{
	lockdep_assert_held(&mux->lock);

	kcm_stats_fold(&mux->stats, &kcm->stats);
}

/**
 * kcm_mux_del_sock() - take a KCM socket out of its mux
 * @kcm: a member socket that is going away or moving to another mux
 *
 * The socket's counters are folded into the mux totals.  When it was the
 * last member, the mux is unlinked and freed.
 *
 * Context: process context, takes the mux lock and maybe the namespace lock.
 */
void kcm_mux_del_sock(struct kcm_sock *kcm)
{
	struct kcm_mux *mux = kcm->mux;
	bool last;

	spin_lock_bh(&mux->lock);
	__kcm_rx_remove(kcm);
	__kcm_steer_leave(kcm);
	/* A receiving socket gave them back when it left (kcm_rx.c). */
	WARN_ON_ONCE(!skb_queue_empty(&kcm->steer.hold));
	list_del(&kcm->mux_node);
	__kcm_mux_fold_stats(mux, kcm);
	last = --mux->nsocks == 0;
	spin_unlock_bh(&mux->lock);

	kcm->mux = NULL;
	if (last)
		kcm_mux_destroy(mux);
}

static int __net_init kcm_net_init(struct net *net)
{
	struct kcm_net *knet = kcm_net(net);

	mutex_init(&knet->lock);
	INIT_LIST_HEAD(&knet->muxes);
	return kcm_proc_init_net(net);
}

static void __net_exit kcm_net_exit(struct net *net)
{
	struct kcm_net *knet = kcm_net(net);

	/* Every KCM socket holds a reference on its namespace. */
	WARN_ON_ONCE(!list_empty(&knet->muxes));
	kcm_proc_exit_net(net);
}

static struct pernet_operations kcm_net_ops = {
	.init = kcm_net_init,
	.exit = kcm_net_exit,
	.id = &kcm_net_id,
	.size = sizeof(struct kcm_net),
};

/**
 * kcm_net_register() - set up KCM state in every network namespace
 *
 * Context: module init.
 * Return: 0 or a negative errno.
 */
int kcm_net_register(void)
{
	return register_pernet_subsys(&kcm_net_ops);
}

/**
 * kcm_net_unregister() - tear down the per-namespace state
 *
 * Context: module exit, no KCM socket exists.
 */
void kcm_net_unregister(void)
{
	unregister_pernet_subsys(&kcm_net_ops);
}
