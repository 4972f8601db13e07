// SPDX-License-Identifier: GPL-2.0-only
/*
 * Kernel Connection Multiplexor: memory accounting.
 *
 * KCM is a memory-accounted protocol, as TCP and UDP are.  What a KCM
 * socket holds (messages queued for reading, messages being built or
 * queued for sending) is charged to it through the kernel's socket memory
 * accounting: the protocol's pool (kcm_memory_allocated, bounded by the
 * net.kcm.mem sysctl, in pages, as udp_mem bounds UDP) and the socket's
 * memory cgroup.  What a psock holds (its framing buffers, a large
 * message being assembled, its messages waiting on the mux) is charged to
 * its TCP socket, the psock's owner, through TCP's own accounting: data
 * KCM takes off a TCP socket stays charged to it until it is freed or
 * reaches a KCM socket.
 *
 * Locking.  A KCM socket's forward allocation (sk_forward_alloc) is
 * guarded by its receive queue's lock: messages are queued under it from
 * any context, taken off and freed by the socket's reader, and sends
 * charge under it too.  A psock's charge (strp.charged) changes only under
 * its TCP socket's lock, where TCP keeps its own.
 *
 * A charge that fails holds the sender back (sendmsg waits or fails with
 * EAGAIN), takes a socket out of the receive rotation until memory frees,
 * or makes a psock stop reading (TCP's window then closes on its peer);
 * nothing already taken is dropped.
 */

#include <linux/memcontrol.h>
#include <linux/percpu.h>
#include <linux/sched/mm.h>
#include <linux/skbuff.h>
#include <linux/sysctl.h>
#include <net/net_namespace.h>
#include <net/sock.h>
#include <net/kcm.h>

#include "kcm_compat.h"

static atomic_long_t kcm_memory_allocated;
static DEFINE_PER_CPU(int, kcm_memory_per_cpu_fw_alloc);
/* net.kcm.mem: pages, below which nothing is refused, over which the
 * protocol is under pressure, and the most it may hold.
 */
static long kcm_mem_limits[3];
/* The most of a memory cgroup's limit KCM leaves to the rest: pages. */
#define KCM_MEM_RESERVE_MAX	((2UL << 20) >> PAGE_SHIFT)
/*
 * What kcm_mem_reclaim() makes room for beyond a charge: a cgroup keeps
 * some freed pages charged per CPU (64 each), pages.  And the largest
 * block it allocates: 4 MB.
 */
#define KCM_MEM_PROBE_SLACK	128
#define KCM_MEM_PROBE_ORDER	get_order(4UL << 20)
#define KCM_MEM_PROBE_GAP	(HZ / 50)

/* What a socket always gets, even under pressure (sk_get_rmem0()). */
static int kcm_mem_min = PAGE_SIZE;

static struct ctl_table kcm_mem_table[] = {
	{
		.procname = "mem",
		.data = kcm_mem_limits,
		.maxlen = sizeof(kcm_mem_limits),
		.mode = 0644,
		.proc_handler = proc_doulongvec_minmax,
	},
	{ }
};

static struct ctl_table_header *kcm_mem_sysctl;

/**
 * kcm_mem_proto_init() - make a protocol of KCM sockets memory-accounted
 * @prot: kcm_proto, before it is registered
 *
 * Context: module init.
 */
void kcm_mem_proto_init(struct proto *prot)
{
	unsigned long limit = max(nr_free_buffer_pages() / 8, 128UL);

	kcm_mem_limits[0] = limit / 4 * 3;
	kcm_mem_limits[1] = limit;
	kcm_mem_limits[2] = kcm_mem_limits[0] * 2;
	prot->memory_allocated = &kcm_memory_allocated;
	prot->per_cpu_fw_alloc = &kcm_memory_per_cpu_fw_alloc;
	prot->sysctl_mem = kcm_mem_limits;
	prot->sysctl_rmem = &kcm_mem_min;
	prot->sysctl_wmem = &kcm_mem_min;
}

/**
 * kcm_mem_sysctl_register() - net.kcm.mem
 *
 * Context: module init.
 * Return: 0 or -ENOMEM.
 */
int kcm_mem_sysctl_register(void)
{
	kcm_mem_sysctl = kcm_register_net_sysctl(&init_net, "net/kcm",
						 kcm_mem_table,
						 ARRAY_SIZE(kcm_mem_table) - 1);
	return kcm_mem_sysctl ? 0 : -ENOMEM;
}

/* Context: module exit. */
void kcm_mem_sysctl_unregister(void)
{
	unregister_net_sysctl_table(kcm_mem_sysctl);
}

/**
 * kcm_mem_pages() - pages KCM sockets hold, all namespaces together
 *
 * Context: any.
 * Return: pages, the unit of net.kcm.mem.
 */
long kcm_mem_pages(void)
{
	long pages = atomic_long_read(&kcm_memory_allocated);
	int cpu;

	/* What each CPU keeps back from the pool is in use too. */
	for_each_possible_cpu(cpu)
		pages += per_cpu(kcm_memory_per_cpu_fw_alloc, cpu);
	return max(0L, pages);
}

/* ---- charges -------------------------------------------------------- */

/* A hard limit under this many pages is held exactly (kcm_mem_pool_over()). */
#define KCM_MEM_EXACT_MAX	((256UL << 20) >> PAGE_SHIFT)

/*
 * Is KCM's pool over net.kcm.mem's hard limit, @sk being a KCM socket?
 * The kernel compares the limit with what the CPUs gave back to the pool
 * only, each keeping up to a megabyte or more of it: a limit of a few
 * megabytes would not hold.  Under KCM_MEM_EXACT_MAX the whole is counted.
 *
 * Context: any.
 */
static bool kcm_mem_pool_over(const struct sock *sk)
{
	long max = READ_ONCE(kcm_mem_limits[2]);

	if (sk->sk_prot->memory_allocated != &kcm_memory_allocated ||
	    max >= KCM_MEM_EXACT_MAX)
		return false;
	return kcm_mem_pages() > max;
}

/*
 * KCM's ceiling in a memory cgroup: its limit less a reserve, the last
 * eighth of it but at most 2 MB, that KCM leaves to the rest: TCP's own
 * queues and the tasks' allocations, which reclaim and, failing that,
 * meet the cgroup's OOM killer.  KCM's own charges stop at the ceiling:
 * what KCM holds is then never what pushes the cgroup into its limit.
 *
 * Return: pages @sk's memory cgroups (the socket's and those above it)
 * would be over their ceilings by with @pages more charged (negative:
 * fewer); 0 when none would be.
 */
static long kcm_memcg_over(const struct sock *sk, long pages)
{
	long over = 0;
#ifdef CONFIG_MEMCG
	struct mem_cgroup *memcg = sk->sk_memcg;
	unsigned long max, ceiling;
	long usage;

	if (!mem_cgroup_sockets_enabled || !memcg ||
	    !cgroup_subsys_on_dfl(memory_cgrp_subsys))
		return 0;
	for (; memcg; memcg = parent_mem_cgroup(memcg)) {
		max = READ_ONCE(memcg->memory.max);
		if (max >= PAGE_COUNTER_MAX)
			continue;
		ceiling = max - min(max / 8, KCM_MEM_RESERVE_MAX);
		usage = page_counter_read(&memcg->memory);
		over = max(over, usage + pages - (long)ceiling);
	}
#endif
	return over;
}

/*
 * Charge @size bytes of @kind (SK_MEM_RECV, SK_MEM_SEND) to @sk's
 * forward allocation: the protocol's pool or the TCP socket's, and the
 * socket's memory cgroup.  Nothing is kept when a cgroup ends up over
 * KCM's ceiling (kcm_memcg_over()), or KCM's pool over a small limit
 * (kcm_mem_pool_over()).
 *
 * Context: bottom halves disabled (the charge neither reclaims nor
 * OOM-kills: one over the limit is forced through, and looked at
 * afterwards), and what guards @sk's forward allocation held.
 */
static bool __kcm_mem_charge(struct sock *sk, int size, int kind)
{
	int before = sk->sk_forward_alloc;

	lockdep_assert_in_softirq();
	if (size > before) {
		if (!__sk_mem_schedule(sk, size, kind))
			return false;
		if (kcm_memcg_over(sk, 0) > 0 || kcm_mem_pool_over(sk)) {
			__sk_mem_reclaim(sk, sk->sk_forward_alloc - before);
			return false;
		}
	}
	sk_mem_charge(sk, size);
	return true;
}

/*
 * At most one reclaim every KCM_MEM_PROBE_GAP, all cgroups together:
 * when there is nothing to reclaim, each only costs.
 */
static bool kcm_mem_probe_wait(void)
{
	static unsigned long next;
	unsigned long now = jiffies;

	if (time_before(now, READ_ONCE(next)))
		return true;
	WRITE_ONCE(next, now + KCM_MEM_PROBE_GAP);
	return false;
}

/**
 * kcm_mem_reclaim() - make room under KCM's ceiling in a memory cgroup
 * @sk: a socket a charge of @size bytes was refused to
 * @size: the bytes it needs
 *
 * KCM's charges never reclaim.  When a cgroup is over KCM's ceiling
 * with memory that can be reclaimed (page cache, say), this makes it
 * reclaim enough for @size: it allocates one accounted page block as
 * large as the reserve and @size together, which the cgroup charges only
 * once it has reclaimed room for all of it, and gives it back.  The
 * charge never calls the OOM killer (__GFP_NORETRY), and fails, leaving
 * the cgroup as it was, when there is nothing to reclaim: KCM then
 * waits.
 *
 * Context: process context, no spinlock held.
 * Return: true when there is room now.
 */
bool kcm_mem_reclaim(struct sock *sk, unsigned int size)
{
	long pages = sk_mem_pages(size) + KCM_MEM_PROBE_SLACK;
	struct mem_cgroup *old;
	struct page *page;
	unsigned int order;

	might_sleep();
	if (kcm_memcg_over(sk, pages) <= 0)
		return true;
	if (!kcm_memcg_kmem_on() || kcm_mem_probe_wait())
		return false;
	order = min_t(unsigned int, get_order((KCM_MEM_RESERVE_MAX + pages) <<
					      PAGE_SHIFT), KCM_MEM_PROBE_ORDER);
	old = set_active_memcg(sk->sk_memcg);
	page = alloc_pages(GFP_KERNEL_ACCOUNT | __GFP_NORETRY | __GFP_NOWARN,
			   order);
	set_active_memcg(old);
	if (page)
		__free_pages(page, order);
	return kcm_memcg_over(sk, pages) <= 0;
}

/* ---- KCM sockets ---------------------------------------------------- */

/* Context: the receive queue's lock held.  Gives @size bytes back. */
static void __kcm_mem_uncharge(struct sock *sk, int size)
{
	lockdep_assert_held(&sk->sk_receive_queue.lock);
	sk_mem_uncharge(sk, size);
	sk_mem_reclaim(sk);
}

/* The destructor of a received message: see kcm_mem_rx_charge(). */
static void kcm_mem_rfree(struct sk_buff *skb)
{
	struct sock *sk = skb->sk;
	unsigned long flags;

	spin_lock_irqsave(&sk->sk_receive_queue.lock, flags);
	atomic_sub(skb->truesize, &sk->sk_rmem_alloc);
	__kcm_mem_uncharge(sk, skb->truesize);
	spin_unlock_irqrestore(&sk->sk_receive_queue.lock, flags);
}

/**
 * kcm_mem_rx_charge() - charge a message to the KCM socket it goes to
 * @sk: the KCM socket
 * @skb: a message or pack nobody owns
 *
 * @sk becomes its owner, as with skb_set_owner_r(): its receive memory
 * counts it, and the charge goes back when @skb is freed.
 *
 * Context: bottom halves disabled (the mux lock); takes the receive
 * queue's lock.
 * Return: true, or false when @sk could not be charged for it (its
 * memory cgroup, or net.kcm.mem, refused): nothing was done.
 */
bool kcm_mem_rx_charge(struct sock *sk, struct sk_buff *skb)
{
	struct sk_buff_head *queue = &sk->sk_receive_queue;
	unsigned long flags;
	bool ok;

	spin_lock_irqsave(&queue->lock, flags);
	ok = __kcm_mem_charge(sk, skb->truesize, SK_MEM_RECV);
	if (ok) {
		skb_orphan(skb);
		skb->sk = sk;
		skb->destructor = kcm_mem_rfree;
		atomic_add(skb->truesize, &sk->sk_rmem_alloc);
	}
	spin_unlock_irqrestore(&queue->lock, flags);
	return ok;
}

/* The destructor of a message to send: see kcm_mem_tx_own(). */
static void kcm_mem_wfree(struct sk_buff *skb)
{
	struct sock *sk = skb->sk;
	unsigned long flags;

	spin_lock_irqsave(&sk->sk_receive_queue.lock, flags);
	__kcm_mem_uncharge(sk, skb->truesize);
	spin_unlock_irqrestore(&sk->sk_receive_queue.lock, flags);
	sock_wfree(skb);
}

/* Context: lock_sock(sk) held.  One try at charging @size bytes to send. */
static bool kcm_mem_tx_try(struct sock *sk, unsigned int size)
{
	bool ok;

	spin_lock_bh(&sk->sk_receive_queue.lock);
	ok = __kcm_mem_charge(sk, size, SK_MEM_SEND);
	spin_unlock_bh(&sk->sk_receive_queue.lock);
	return ok;
}

/**
 * kcm_mem_tx_charge() - charge bytes of messages to send to a KCM socket
 * @sk: the KCM socket
 * @size: truesize of what joins its messages
 *
 * A full memory cgroup is made to reclaim once (kcm_mem_reclaim()).
 *
 * Context: process context, lock_sock(sk) held; takes the receive
 * queue's lock.
 * Return: true, or false when its memory cgroup or net.kcm.mem refused.
 */
bool kcm_mem_tx_charge(struct sock *sk, unsigned int size)
{
	sock_owned_by_me(sk);
	if (kcm_mem_tx_try(sk, size))
		return true;
	return kcm_mem_reclaim(sk, size) && kcm_mem_tx_try(sk, size);
}

/**
 * kcm_mem_tx_uncharge() - give back what kcm_mem_tx_charge() took
 * @sk: the KCM socket
 * @size: the bytes charged
 *
 * Context: process context; takes the receive queue's lock.
 */
void kcm_mem_tx_uncharge(struct sock *sk, unsigned int size)
{
	spin_lock_bh(&sk->sk_receive_queue.lock);
	__kcm_mem_uncharge(sk, size);
	spin_unlock_bh(&sk->sk_receive_queue.lock);
}

/**
 * kcm_mem_tx_own() - make a KCM socket the owner of a message to send
 * @sk: the KCM socket, already charged for @skb's truesize
 *	(kcm_mem_tx_charge())
 * @skb: the head of a message or a pack
 *
 * As skb_set_owner_w(), and the charge goes back when @skb is freed, for
 * its truesize then (chunks joined since were charged as they joined).
 *
 * Context: lock_sock(sk) held.
 */
void kcm_mem_tx_own(struct sock *sk, struct sk_buff *skb)
{
	skb_set_owner_w(skb, sk);
	skb->destructor = kcm_mem_wfree;
}

/**
 * kcm_mem_sock_release() - give back what a closing KCM socket still has
 * @sk: a socket whose queues are purged
 *
 * Context: process context.
 */
void kcm_mem_sock_release(struct sock *sk)
{
	spin_lock_bh(&sk->sk_receive_queue.lock);
	sk_mem_reclaim_final(sk);
	spin_unlock_bh(&sk->sk_receive_queue.lock);
}

/**
 * kcm_mem_sock_destruct() - sk_destruct of KCM sockets
 * @sk: a socket whose last reference went, with every message it owned
 *
 * What it was charged for has all been given back: the rest of its
 * forward allocation returns to the pool and its memory cgroup.
 *
 * Context: any (the last sock_put()).
 */
void kcm_mem_sock_destruct(struct sock *sk)
{
	sk_mem_reclaim_final(sk);
	WARN_ON_ONCE(sk->sk_forward_alloc);
	WARN_ON_ONCE(atomic_read(&sk->sk_rmem_alloc));
}

/* ---- psocks ---------------------------------------------------------- */

/**
 * kcm_mem_psock_sync() - charge a psock's TCP socket what the psock holds
 * @psock: the psock
 * @held: the bytes it holds now
 *
 * Context: the TCP socket's lock held.
 * Return: true while the charge covers @held; false when TCP's memory
 * (the socket's memory cgroup, tcp_mem) refused more: the psock holds
 * more than it is charged for, and must not read more until it can be.
 */
bool kcm_mem_psock_sync(struct kcm_psock *psock, unsigned int held)
{
	struct sock *csk = psock->sk;
	int delta = held - psock->strp.charged;
	bool ok = true;

	lockdep_assert(lockdep_sock_is_held(csk));
	if (!delta)
		return true;
	local_bh_disable();
	if (delta > 0) {
		ok = __kcm_mem_charge(csk, delta, SK_MEM_RECV);
	} else {
		sk_mem_uncharge(csk, -delta);
		sk_mem_reclaim(csk);
	}
	local_bh_enable();
	if (ok)
		WRITE_ONCE(psock->strp.charged, held);
	return ok;
}
