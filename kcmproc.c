// SPDX-License-Identifier: GPL-2.0-only
/*
 * Kernel Connection Multiplexor: /proc/net/kcm and /proc/net/kcm_stats.
 *
 * One pair of files per network namespace, in the format upstream Linux
 * uses.  kcm: a title with the number of multiplexors, a header, then for
 * every mux a "mux" line followed by one "kcm-<index>" line per KCM socket
 * and one "psock-<index>" line per attached TCP socket.  kcm_stats: the
 * namespace's totals of mux and psock counters, destroyed muxes included.
 *
 * kcm_ext (ours, not upstream): the same objects with what the upstream
 * format lacks (mux ids, TCP addresses and state, socket inode numbers,
 * every counter of every object), one "key=value" line per object, for
 * tools such as kcmstat.  The format is described in
 * Documentation/networking/kcm.rst; keys are only ever added.
 */

#include <linux/net.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <net/inet_sock.h>
#include <net/ipv6.h>
#include <net/net_namespace.h>
#include <net/tcp_states.h>
#include <net/kcm.h>

/* Context: seq_file start, takes the namespace lock until kcm_seq_stop(). */
static void *kcm_seq_start(struct seq_file *seq, loff_t *pos)
{
	struct kcm_net *knet = kcm_net(seq_file_net(seq));

	mutex_lock(&knet->lock);
	if (!*pos)
		return SEQ_START_TOKEN;

	return seq_list_start(&knet->muxes, *pos - 1);
}

/* Context: seq_file next, the namespace lock is held. */
static void *kcm_seq_next(struct seq_file *seq, void *v, loff_t *pos)
{
	struct kcm_net *knet = kcm_net(seq_file_net(seq));

	lockdep_assert_held(&knet->lock);
	if (v == SEQ_START_TOKEN) {
		++*pos;
		return seq_list_start(&knet->muxes, 0);
	}

	return seq_list_next(v, &knet->muxes, pos);
}

/* Context: seq_file stop, drops the namespace lock. */
static void kcm_seq_stop(struct seq_file *seq, void *v)
{
	struct kcm_net *knet = kcm_net(seq_file_net(seq));

	mutex_unlock(&knet->lock);
}

static void kcm_seq_header(struct seq_file *seq, struct kcm_net *knet)
{
	seq_printf(seq, "*** KCM statistics (%u MUX) ****\n", knet->count);
	seq_printf(seq, "%-14s %-10s %-16s %-10s %-16s %-8s %-8s %-8s %-8s %s\n",
		   "Object", "RX-Msgs", "RX-Bytes", "TX-Msgs", "TX-Bytes",
		   "Recv-Q", "Rmem", "Send-Q", "Smem", "Status");
}

/* Context: the mux lock is held. */
static void __kcm_seq_sock(struct seq_file *seq, struct kcm_sock *kcm)
{
	struct sock *sk = &kcm->sk;

	lockdep_assert_held(&kcm->mux->lock);
	seq_printf(seq, "   kcm-%-7u %-10llu %-16llu %-10llu %-16llu %-8u %-8d %-8u %-8d %s\n",
		   kcm->index,
		   READ_ONCE(kcm->stats.rx_msgs),
		   READ_ONCE(kcm->stats.rx_bytes),
		   READ_ONCE(kcm->stats.tx_msgs),
		   READ_ONCE(kcm->stats.tx_bytes),
		   kcm_rx_queued(sk),
		   sk_rmem_alloc_get(sk),
		   READ_ONCE(kcm->tx_queued),
		   sk_wmem_alloc_get(sk),
		   READ_ONCE(kcm->rx_ready) ? "RxWait " : "");
}

/* Context: the mux lock is held. */
static void __kcm_seq_psock(struct seq_file *seq, struct kcm_psock *psock)
{
	struct sock *csk = psock->sk;

	lockdep_assert_held(&psock->mux->lock);
	seq_printf(seq, "   psock-%-5u %-10llu %-16llu %-10llu %-16llu %-8d %-8d %-8d %-8d ",
		   psock->index,
		   READ_ONCE(psock->stats.rx_msgs),
		   READ_ONCE(psock->stats.rx_bytes),
		   READ_ONCE(psock->stats.tx_msgs),
		   READ_ONCE(psock->stats.tx_bytes),
		   skb_queue_len_lockless(&csk->sk_receive_queue),
		   sk_rmem_alloc_get(csk),
		   skb_queue_len_lockless(&csk->sk_write_queue),
		   sk_wmem_alloc_get(csk));
	if (READ_ONCE(psock->rx_stopped))
		seq_puts(seq, "RxStop ");
	if (READ_ONCE(psock->rx_paused))
		seq_puts(seq, "RxPause ");
	if (READ_ONCE(psock->tx_stopped))
		seq_puts(seq, "TxStop ");
	if (psock->tx_kcm)
		seq_printf(seq, "Rsvd-%u ", psock->tx_kcm->index);
	seq_putc(seq, '\n');
}

/* Context: the namespace lock is held; takes the mux lock. */
static void kcm_seq_mux(struct seq_file *seq, struct kcm_mux *mux)
{
	struct kcm_psock *psock;
	struct kcm_msg_stats tot;
	struct kcm_sock *kcm;

	spin_lock_bh(&mux->lock);
	tot = mux->stats;
	list_for_each_entry(kcm, &mux->socks, mux_node) {
		tot.rx_msgs += READ_ONCE(kcm->stats.rx_msgs);
		tot.rx_bytes += READ_ONCE(kcm->stats.rx_bytes);
		tot.tx_msgs += READ_ONCE(kcm->stats.tx_msgs);
		tot.tx_bytes += READ_ONCE(kcm->stats.tx_bytes);
	}
	seq_printf(seq, "%-14s %-10llu %-16llu %-10llu %-16llu %-8s %-8s %-8s %-8s KCMs: %u, Psocks %u\n",
		   "mux", tot.rx_msgs, tot.rx_bytes, tot.tx_msgs, tot.tx_bytes,
		   "-", "-", "-", "-", mux->nsocks, mux->npsocks);
	list_for_each_entry(kcm, &mux->socks, mux_node)
		__kcm_seq_sock(seq, kcm);
	list_for_each_entry(psock, &mux->psocks, mux_node)
		__kcm_seq_psock(seq, psock);
	spin_unlock_bh(&mux->lock);
}

/* Context: seq_file show, the namespace lock is held. */
static int kcm_seq_show(struct seq_file *seq, void *v)
{
	struct kcm_net *knet = kcm_net(seq_file_net(seq));

	lockdep_assert_held(&knet->lock);
	if (v == SEQ_START_TOKEN)
		kcm_seq_header(seq, knet);
	else
		kcm_seq_mux(seq, list_entry(v, struct kcm_mux, net_node));

	return 0;
}

static const struct seq_operations kcm_seq_ops = {
	.start = kcm_seq_start,
	.next = kcm_seq_next,
	.stop = kcm_seq_stop,
	.show = kcm_seq_show,
};

/* The TCP states by number, as /proc/net/tcp's "st" column counts them. */
static const char *const kcm_tcp_state_names[] = {
	[TCP_ESTABLISHED] = "ESTABLISHED",
	[TCP_SYN_SENT] = "SYN_SENT",
	[TCP_SYN_RECV] = "SYN_RECV",
	[TCP_FIN_WAIT1] = "FIN_WAIT1",
	[TCP_FIN_WAIT2] = "FIN_WAIT2",
	[TCP_TIME_WAIT] = "TIME_WAIT",
	[TCP_CLOSE] = "CLOSE",
	[TCP_CLOSE_WAIT] = "CLOSE_WAIT",
	[TCP_LAST_ACK] = "LAST_ACK",
	[TCP_LISTEN] = "LISTEN",
	[TCP_CLOSING] = "CLOSING",
	[TCP_NEW_SYN_RECV] = "NEW_SYN_RECV",
};

static const char *kcm_tcp_state_name(int state)
{
	if (state < 0 || state >= ARRAY_SIZE(kcm_tcp_state_names) ||
	    !kcm_tcp_state_names[state])
		return "UNKNOWN";
	return kcm_tcp_state_names[state];
}

static void kcm_ext_header(struct seq_file *seq)
{
	seq_puts(seq, "# kcm_ext 1: mux, kcm and psock lines of key=value pairs\n");
	seq_printf(seq, "mem pages=%ld\n", kcm_mem_pages());
}

/* Context: the mux lock is held. */
static void __kcm_ext_mux(struct seq_file *seq, struct kcm_mux *mux)
{
	const struct kcm_mux_stats *m = &mux->mstats;
	struct kcm_msg_stats tot = mux->stats;
	struct kcm_sock *kcm;

	lockdep_assert_held(&mux->lock);
	list_for_each_entry(kcm, &mux->socks, mux_node)
		kcm_stats_fold(&tot, &kcm->stats);
	seq_printf(seq, "mux id=%u kcms=%u psocks=%u rx_hold=%u",
		   mux->id, mux->nsocks, mux->npsocks,
		   skb_queue_len(&mux->rx_hold));
	seq_printf(seq, " rx_msgs=%llu rx_bytes=%llu tx_msgs=%llu tx_bytes=%llu",
		   tot.rx_msgs, tot.rx_bytes, tot.tx_msgs, tot.tx_bytes);
	seq_printf(seq, " tx_retries=%llu attach=%llu unattach=%llu unattach_rsvd=%llu rx_ready_drops=%llu tx_dropped=%llu tx_too_big=%llu rx_mem_short=%llu",
		   m->tx_retries, m->attach, m->unattach, m->unattach_rsvd,
		   m->rx_ready_drops, m->tx_dropped, m->tx_too_big,
		   m->rx_mem_short);
	seq_printf(seq, " steer=%s steered=%llu steer_nokey=%llu steer_moved=%llu steer_remaps=%llu\n",
		   kcm_steer_kind(mux), m->steered, m->steer_nokey,
		   m->steer_moved, m->steer_remaps);
}

/* Context: the mux lock is held.  Messages held for @kcm (steering). */
static unsigned int __kcm_ext_steer_held(struct kcm_sock *kcm)
{
	unsigned int n = 0;
	struct sk_buff *skb;

	lockdep_assert_held(&kcm->mux->lock);
	skb_queue_walk(&kcm->steer.hold, skb)
		n += kcm_rx_left(skb);
	return n;
}

/*
 * The inode number of a KCM socket, as in /proc/PID/fd and ss, or 0 once
 * it is being released.  Context: the mux lock is held, which the release
 * needs after sock_orphan() to leave the mux, so a struct socket seen here
 * stays allocated until the lock is dropped.
 */
static u64 __kcm_ext_sock_ino(struct kcm_sock *kcm)
{
	struct socket *sock = READ_ONCE(kcm->sk.sk_socket);

	lockdep_assert_held(&kcm->mux->lock);
	return sock ? SOCK_INODE(sock)->i_ino : 0;
}

/* Context: the mux lock is held. */
static void __kcm_ext_sock(struct seq_file *seq, struct kcm_sock *kcm)
{
	struct sock *sk = &kcm->sk;

	lockdep_assert_held(&kcm->mux->lock);
	seq_printf(seq, "kcm mux=%u index=%u ino=%llu type=%s",
		   kcm->mux->id, kcm->index, __kcm_ext_sock_ino(kcm),
		   sk->sk_type == SOCK_SEQPACKET ? "seqpacket" : "dgram");
	seq_printf(seq, " rx_msgs=%llu rx_bytes=%llu tx_msgs=%llu tx_bytes=%llu",
		   READ_ONCE(kcm->stats.rx_msgs),
		   READ_ONCE(kcm->stats.rx_bytes),
		   READ_ONCE(kcm->stats.tx_msgs),
		   READ_ONCE(kcm->stats.tx_bytes));
	seq_printf(seq, " recv_q=%u rmem=%d send_q=%u smem=%d",
		   kcm_rx_queued(sk),
		   sk_rmem_alloc_get(sk),
		   READ_ONCE(kcm->tx_queued),
		   sk_wmem_alloc_get(sk));
	if (kcm->tx_psock)
		seq_printf(seq, " psock=%u", kcm->tx_psock->index);
	else
		seq_puts(seq, " psock=-");
	seq_printf(seq, " rx_ready=%d rx_disabled=%d tx_waiting=%d mem_short=%d",
		   kcm->rx_ready, READ_ONCE(kcm->rx_disabled),
		   kcm->tx_waiting, kcm->rx_mem_short);
	seq_printf(seq, " steer_slots=%u steer_held=%u\n", kcm->steer.slots,
		   __kcm_ext_steer_held(kcm));
}

/* "local=ADDR:PORT remote=ADDR:PORT", IPv6 addresses in brackets. */
static void kcm_ext_addrs(struct seq_file *seq, struct sock *csk)
{
	const struct inet_sock *inet = inet_sk(csk);
	u16 sport = ntohs(READ_ONCE(inet->inet_sport));
	u16 dport = ntohs(READ_ONCE(inet->inet_dport));

#if IS_ENABLED(CONFIG_IPV6)
	if (csk->sk_family == AF_INET6) {
		seq_printf(seq, " local=[%pI6c]:%u remote=[%pI6c]:%u",
			   &csk->sk_v6_rcv_saddr, sport, &csk->sk_v6_daddr,
			   dport);
		return;
	}
#endif
	seq_printf(seq, " local=%pI4:%u remote=%pI4:%u",
		   &inet->inet_rcv_saddr, sport, &inet->inet_daddr, dport);
}

/* Context: the mux lock is held. */
static void __kcm_ext_psock(struct seq_file *seq, struct kcm_psock *psock)
{
	const struct kcm_psock_stats *st = &psock->stats;
	struct sock *csk = psock->sk;

	lockdep_assert_held(&psock->mux->lock);
	seq_printf(seq, "psock mux=%u index=%u ino=%llu",
		   psock->mux->id, psock->index,
		   (u64)file_inode(psock->file)->i_ino);
	kcm_ext_addrs(seq, csk);
	seq_printf(seq, " tcp_state=%s recv_q=%u rmem=%d send_q=%u smem=%d rx_held=%u",
		   kcm_tcp_state_name(READ_ONCE(csk->sk_state)),
		   skb_queue_len_lockless(&csk->sk_receive_queue),
		   sk_rmem_alloc_get(csk),
		   skb_queue_len_lockless(&csk->sk_write_queue),
		   sk_wmem_alloc_get(csk), psock->rx_held);
	seq_printf(seq, " rx_msgs=%llu rx_bytes=%llu tx_msgs=%llu tx_bytes=%llu reserved=%llu unreserved=%llu",
		   READ_ONCE(st->rx_msgs), READ_ONCE(st->rx_bytes),
		   READ_ONCE(st->tx_msgs), READ_ONCE(st->tx_bytes),
		   READ_ONCE(st->reserved), READ_ONCE(st->unreserved));
	seq_printf(seq, " rx_aborts=%llu rx_intr=%llu rx_unrecov=%llu rx_mem_fail=%llu rx_need_more=%llu",
		   READ_ONCE(st->rx_aborts), READ_ONCE(st->rx_intr),
		   READ_ONCE(st->rx_unrecov), READ_ONCE(st->rx_mem_fail),
		   READ_ONCE(st->rx_need_more));
	seq_printf(seq, " rx_bad_len=%llu rx_too_big=%llu rx_timeouts=%llu tx_aborts=%llu",
		   READ_ONCE(st->rx_bad_len), READ_ONCE(st->rx_too_big),
		   READ_ONCE(st->rx_timeouts), READ_ONCE(st->tx_aborts));
	if (psock->tx_kcm)
		seq_printf(seq, " kcm=%u", psock->tx_kcm->index);
	else
		seq_puts(seq, " kcm=-");
	seq_printf(seq, " rx_stopped=%d rx_paused=%d tx_stopped=%d rx_in_place=%llu ulp_stops=%llu",
		   READ_ONCE(psock->rx_stopped), READ_ONCE(psock->rx_paused),
		   psock->tx_stopped, READ_ONCE(st->rx_in_place),
		   READ_ONCE(st->ulp_stops));
	seq_printf(seq, " mem_charged=%u mem_short=%d",
		   READ_ONCE(psock->strp.charged),
		   READ_ONCE(psock->strp.mem_short));
	if (!READ_ONCE(psock->rx_paused))
		seq_puts(seq, " rx_wait=-\n");
	else if (psock->rx_wait < 0)
		seq_puts(seq, " rx_wait=any\n");
	else
		seq_printf(seq, " rx_wait=%d\n", psock->rx_wait);
}

/* Context: seq_file show, the namespace lock is held; takes the mux lock. */
static int kcm_ext_show(struct seq_file *seq, void *v)
{
	struct kcm_net *knet = kcm_net(seq_file_net(seq));
	struct kcm_psock *psock;
	struct kcm_sock *kcm;
	struct kcm_mux *mux;

	lockdep_assert_held(&knet->lock);
	if (v == SEQ_START_TOKEN) {
		kcm_ext_header(seq);
		return 0;
	}

	mux = list_entry(v, struct kcm_mux, net_node);
	spin_lock_bh(&mux->lock);
	__kcm_ext_mux(seq, mux);
	list_for_each_entry(kcm, &mux->socks, mux_node)
		__kcm_ext_sock(seq, kcm);
	list_for_each_entry(psock, &mux->psocks, mux_node)
		__kcm_ext_psock(seq, psock);
	spin_unlock_bh(&mux->lock);
	return 0;
}

static const struct seq_operations kcm_ext_seq_ops = {
	.start = kcm_seq_start,
	.next = kcm_seq_next,
	.stop = kcm_seq_stop,
	.show = kcm_ext_show,
};

/* The namespace's totals: destroyed muxes, then every live one. */
struct kcm_stats_tot {
	struct kcm_msg_stats msg;
	struct kcm_mux_stats mux;
	struct kcm_psock_stats psock;
};

/* Context: the mux lock is held. */
static void __kcm_stats_add_mux(struct kcm_stats_tot *tot, struct kcm_mux *mux)
{
	struct kcm_psock *psock;
	struct kcm_sock *kcm;

	lockdep_assert_held(&mux->lock);
	kcm_stats_fold(&tot->msg, &mux->stats);
	kcm_stats_fold(&tot->mux, &mux->mstats);
	kcm_stats_fold(&tot->psock, &mux->psock_stats);
	list_for_each_entry(kcm, &mux->socks, mux_node)
		kcm_stats_fold(&tot->msg, &kcm->stats);
	list_for_each_entry(psock, &mux->psocks, mux_node)
		kcm_stats_fold(&tot->psock, &psock->stats);
}

static void kcm_stats_print(struct seq_file *seq,
			    const struct kcm_stats_tot *t)
{
	seq_printf(seq, "%-8s %-10s %-16s %-10s %-16s %-10s %-10s %-10s %-10s %-10s\n",
		   "MUX", "RX-Msgs", "RX-Bytes", "TX-Msgs", "TX-Bytes",
		   "TX-Retries", "Attach", "Unattach", "UnattchRsvd",
		   "RX-RdyDrops");
	seq_printf(seq, "%-8s %-10llu %-16llu %-10llu %-16llu %-10llu %-10llu %-10llu %-10llu %-10llu\n",
		   "", t->msg.rx_msgs, t->msg.rx_bytes, t->msg.tx_msgs,
		   t->msg.tx_bytes, t->mux.tx_retries, t->mux.attach,
		   t->mux.unattach, t->mux.unattach_rsvd,
		   t->mux.rx_ready_drops);
	seq_printf(seq, "%-8s %-10s %-16s %-10s %-16s %-10s %-10s %-10s %-10s %-10s %-10s %-10s %-10s %-10s %-10s %-10s\n",
		   "Psock", "RX-Msgs", "RX-Bytes", "TX-Msgs", "TX-Bytes",
		   "Reserved", "Unreserved", "RX-Aborts", "RX-Intr",
		   "RX-Unrecov", "RX-MemFail", "RX-NeedMor", "RX-BadLen",
		   "RX-TooBig", "RX-Timeout", "TX-Aborts");
	seq_printf(seq, "%-8s %-10llu %-16llu %-10llu %-16llu %-10llu %-10llu %-10llu %-10llu %-10llu %-10llu %-10llu %-10llu %-10llu %-10llu %-10llu\n",
		   "", t->psock.rx_msgs, t->psock.rx_bytes, t->psock.tx_msgs,
		   t->psock.tx_bytes, t->psock.reserved, t->psock.unreserved,
		   t->psock.rx_aborts, t->psock.rx_intr, t->psock.rx_unrecov,
		   t->psock.rx_mem_fail, t->psock.rx_need_more,
		   t->psock.rx_bad_len, t->psock.rx_too_big,
		   t->psock.rx_timeouts, t->psock.tx_aborts);
}

/* Context: process context; takes the namespace lock and mux locks. */
static int kcm_stats_show(struct seq_file *seq, void *v)
{
	struct kcm_net *knet = kcm_net(seq_file_single_net(seq));
	struct kcm_stats_tot tot = {};
	struct kcm_mux *mux;

	mutex_lock(&knet->lock);
	tot.msg = knet->msg_stats;
	tot.mux = knet->mux_stats;
	tot.psock = knet->psock_stats;
	list_for_each_entry(mux, &knet->muxes, net_node) {
		spin_lock_bh(&mux->lock);
		__kcm_stats_add_mux(&tot, mux);
		spin_unlock_bh(&mux->lock);
	}
	mutex_unlock(&knet->lock);

	kcm_stats_print(seq, &tot);
	return 0;
}

/**
 * kcm_proc_init_net() - create /proc/net/kcm, kcm_stats and kcm_ext
 * in a namespace
 * @net: the new namespace
 *
 * Context: process context (pernet init).
 * Return: 0 or -ENOMEM.
 */
int kcm_proc_init_net(struct net *net)
{
	if (!proc_create_net("kcm", 0444, net->proc_net, &kcm_seq_ops,
			     sizeof(struct seq_net_private)))
		return -ENOMEM;

	if (!proc_create_net_single("kcm_stats", 0444, net->proc_net,
				    kcm_stats_show, NULL))
		goto err_stats;

	if (!proc_create_net("kcm_ext", 0444, net->proc_net, &kcm_ext_seq_ops,
			     sizeof(struct seq_net_private)))
		goto err_ext;
	return 0;

err_ext:
	remove_proc_entry("kcm_stats", net->proc_net);
err_stats:
	remove_proc_entry("kcm", net->proc_net);
	return -ENOMEM;
}

/**
 * kcm_proc_exit_net() - remove the /proc files of a namespace
 * @net: the namespace going away
 *
 * Context: process context (pernet exit).
 */
void kcm_proc_exit_net(struct net *net)
{
	remove_proc_entry("kcm_ext", net->proc_net);
	remove_proc_entry("kcm_stats", net->proc_net);
	remove_proc_entry("kcm", net->proc_net);
}
