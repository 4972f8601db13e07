// SPDX-License-Identifier: GPL-2.0-only
/*
 * Kernel Connection Multiplexor (AF_KCM): the address family, its socket
 * operations and the module.
 *
 * Implementation notes
 * ====================
 *
 * This file: the family, socket ops and module.  The mux life cycle and
 * namespaces (kcm_mux.c), attach/unattach (kcm_psock.c), the message
 * parsers (kcm_parser.c), framing (kcm_strp.c), delivery and reading
 * (kcm_rx.c), steering by key (kcm_steer.c), the transmit path
 * (kcm_tx.c), per-connection addressing (kcm_conn.c), kernel TLS beneath
 * psocks (kcm_tls.c) and /proc (kcmproc.c) have files of their own.
 *
 * Objects
 * -------
 * struct kcm_net (one per network namespace, net_generic()) lists the
 * namespace's multiplexors.
 *
 * struct kcm_mux ties a set of KCM sockets to a set of attached TCP
 * sockets.  It is created together with the KCM socket that socket(2)
 * returns, gains members through SIOCKCMCLONE and is freed when its last
 * KCM socket is released.  It keeps the receive rotation (rx_ready) and
 * the messages no socket could take yet (rx_hold).
 *
 * struct kcm_sock is the socket an application reads and writes whole
 * messages on.  It belongs to exactly one mux for its whole visible life.
 *
 * struct kcm_psock is an attached TCP socket: its data_ready, write_space
 * and state_change callbacks and its sk_user_data are the psock's while it
 * is attached.
 *
 * struct kcm_steer (in the mux; kcm_steer.c) steers messages to KCM
 * sockets by a key: the key function, which framing reads under RCU, and
 * the map of which socket owns which keys, under the mux lock; each KCM
 * socket holds, in its struct kcm_steer_sock, the messages of its keys it
 * could not take yet.
 *
 * References
 * ----------
 * A mux holds no reference count of its own: its KCM sockets keep it alive
 * and the one that leaves last frees it (kcm_mux_del_sock()), after
 * unattaching every psock.  Code that reaches a mux through a KCM socket it
 * holds (an open file during a syscall) can use it without further
 * references.  /proc reaches muxes through the namespace list under
 * kcm_net.lock, which the freeing path also takes before it unlinks the
 * mux.  Every KCM socket holds a reference on its namespace (sk_alloc()),
 * so a namespace never goes away with a mux on its list.
 *
 * A psock holds a reference on its TCP socket's file and on its BPF
 * program (an eBPF one shared with its fd, or a classic one that it alone
 * owns; the built-in length field parser has none).  It is freed only by
 * unattach, which first restores the TCP callback under sk_callback_lock
 * (no framing can start after that), then under the mux lock unlinks it
 * and clears the pointers to it in held messages, then cancels its work
 * items.  Held messages do not keep a psock alive.
 *
 * A clone is made with __sock_create() so that the LSM socket creation
 * hooks see the calling task, exactly as for socket(2).  That creates a
 * socket with a mux of its own; before the new socket gets a file it is
 * moved to the mux of the socket that was cloned and the spare mux is
 * freed.  accept(2) is the other way to clone (not in upstream Linux):
 * the socket layer makes the socket and its file, with the LSM accept
 * check, and kcm_accept() gives it a KCM socket that joins the mux at
 * once and inherits the label of the accepting socket.
 *
 * Lock order
 * ----------
 *   kcm_net.lock (mutex)  ->  kcm_mux.lock
 *   kcm_mux.psock_mutex   ->  lock_sock(KCM socket)  ->  lock_sock(TCP socket)
 *   lock_sock(TCP socket) ->  sk_callback_lock  ->  kcm_mux.lock
 *                         ->  KCM sk_receive_queue.lock
 *
 * kcm_mux.lock is a spinlock taken with bottom halves disabled.  No two KCM
 * socket locks are ever held together, and lock_sock() of a KCM socket is
 * never taken under the TCP socket's lock or the mux lock; the release of
 * a KCM socket drops its socket lock before it may take psock_mutex.
 *
 * Transmit reservations (kcm_sock.tx_psock, kcm_psock.tx_kcm) change under
 * the mux lock.  A KCM socket writes to its reserved psock under its own
 * socket lock, and the psock can only be taken from it by the socket
 * itself or by unattach, which first takes that socket's lock; so a
 * reserved psock stays valid while its socket's lock is held.  The one
 * exception is a psock kept idle with nothing to send, which another
 * socket may take; the holder claims it back with cmpxchg() on tx_hold
 * before each use (kcm_tx.c, "Reservation").  A socket
 * whose next message is addressed to one connection (kcm_conn.c) gives
 * its psock up before it waits on that psock's tx_direct list under the
 * mux lock; the waiting rules are at the top of kcm_tx.c.
 *
 * Contexts
 * --------
 * Socket creation, ioctl, setsockopt, release, /proc and every write to a
 * TCP socket run in process context (sendmsg or a KCM socket's tx_work).
 * Framing runs in the TCP socket's data_ready softirq when no task owns
 * the TCP socket, else in the psock's work item; both hold the TCP
 * socket's lock, which serialises the psock's struct kcm_strp.  The BPF parser
 * runs under rcu_read_lock() with migration disabled.  Delivery to KCM
 * sockets happens under the mux lock from either context.  The TCP
 * write_space and state_change callbacks only queue work.
 *
 * Stack buffers
 * -------------
 * Kernels built with CONFIG_INIT_STACK_ALL_ZERO (Debian's among them)
 * clear every local on entry.  The few buffers of a per-message or
 * per-read path that are large (a batched read's lengths, the segments
 * of a write, the sockets a delivery wakes) are declared __uninitialized
 * and set before they are read.
 */

#include <linux/compat.h>
#include <linux/file.h>
#include <linux/module.h>
#include <linux/net.h>
#include <linux/poll.h>
#include <linux/security.h>
#include <linux/socket.h>
#include <linux/uaccess.h>
#include <net/sock.h>
#include <net/kcm.h>

#include "kcm_compat.h"

#define CREATE_TRACE_POINTS
#include <trace/events/kcm.h>

static struct proto kcm_proto = {
	.name = "KCM",
	.owner = THIS_MODULE,
	.obj_size = sizeof(struct kcm_sock),
};

static const struct proto_ops kcm_ops;

/*
 * Give @sock a new KCM socket (sk) of its own; it belongs to no mux yet.
 *
 * Context: process context; @sock is not visible to user space yet.
 */
static struct kcm_sock *kcm_sk_alloc(struct net *net, struct socket *sock,
				     int kern)
{
	struct sock *sk;

	sk = sk_alloc(net, PF_KCM, GFP_KERNEL, &kcm_proto, kern);
	if (!sk)
		return NULL;

	sock->ops = &kcm_ops;
	sock_init_data(sock, sk);
	sk->sk_protocol = KCMPROTO_CONNECTED;
	sk->sk_destruct = kcm_mem_sock_destruct;
	kcm_sock_tx_init(kcm_sk(sk));
	kcm_steer_sock_init(kcm_sk(sk));
	return kcm_sk(sk);
}

/* Context: process context; the socket is not visible to user space yet. */
static int kcm_sock_init(struct net *net, struct socket *sock, int kern)
{
	struct kcm_mux *mux;
	struct kcm_sock *kcm;

	mux = kcm_mux_alloc(net);
	if (!mux)
		return -ENOMEM;

	kcm = kcm_sk_alloc(net, sock, kern);
	if (!kcm) {
		kcm_mux_free(mux);
		return -ENOMEM;
	}

	kcm_mux_add_sock(mux, kcm);
	kcm_mux_publish(mux);
	return 0;
}

/* Context: process context (socket(2) and clones). */
static int kcm_create(struct net *net, struct socket *sock, int protocol,
		      int kern)
{
	if (sock->type != SOCK_DGRAM && sock->type != SOCK_SEQPACKET)
		return -ESOCKTNOSUPPORT;

	if (protocol != KCMPROTO_CONNECTED)
		return -EPROTONOSUPPORT;

	return kcm_sock_init(net, sock, kern);
}

/* Context: process context, called once when the file is closed. */
static int kcm_release(struct socket *sock)
{
	struct sock *sk = sock->sk;

	if (!sk)
		return 0;

	/*
	 * Unread messages go back to the mux for the other sockets; unsent
	 * ones are dropped and counted.
	 */
	lock_sock(sk);
	kcm_rx_sock_leave(kcm_sk(sk));
	kcm_tx_sock_leave(kcm_sk(sk));
	release_sock(sk);
	kcm_tx_sock_flush_work(kcm_sk(sk));

	sock_orphan(sk);
	kcm_mux_del_sock(kcm_sk(sk));

	lock_sock(sk);
	__skb_queue_purge(&sk->sk_receive_queue);
	__skb_queue_purge(&sk->sk_write_queue);
	kcm_rx_sock_free(kcm_sk(sk));
	kcm_mem_sock_release(sk);
	release_sock(sk);

	sock->sk = NULL;
	sock_put(sk);
	return 0;
}

/* Context: process context; @newsock is not visible to user space. */
static void kcm_sock_move(struct socket *newsock, struct kcm_mux *mux)
{
	struct kcm_sock *kcm = kcm_sk(newsock->sk);

	kcm_mux_del_sock(kcm);
	kcm_mux_add_sock(mux, kcm);
}

/**
 * kcm_clone() - create a new KCM socket on the mux of an existing one
 * @sock: a KCM socket the caller holds open
 * @flags: O_CLOEXEC and O_NONBLOCK for the new file
 *
 * The new socket goes through __sock_create(), so every LSM socket hook
 * runs for the calling task as it does for socket(2).
 *
 * Context: process context, may sleep.
 * Return: the new socket's file, or an ERR_PTR().
 */
static struct file *kcm_clone(struct socket *sock, int flags)
{
	struct sock *sk = sock->sk;
	struct socket *newsock;
	int err;

	err = __sock_create(sock_net(sk), PF_KCM, sock->type,
			    KCMPROTO_CONNECTED, &newsock, 0);
	if (err)
		return ERR_PTR(err);

	kcm_sock_move(newsock, kcm_sk(sk)->mux);
	/* On failure sock_alloc_file() releases newsock. */
	return sock_alloc_file(newsock, flags, NULL);
}

/**
 * kcm_accept_sock() - accept(2) and accept4(2): a new socket on the same mux
 * @sock: a KCM socket the caller holds open
 * @newsock: the socket the socket layer made for the result, with its file
 *	(SOCK_CLOEXEC, SOCK_NONBLOCK applied) and LSM accept check done
 * @kern: the caller is the kernel
 *
 * The 2015 design's way to clone: like SIOCKCMCLONE, but the new socket
 * inherits the security label of @sock the way a TCP child inherits its
 * listener's (security_sk_clone(), then security_sock_graft()), and the
 * descriptor flags come from accept4().
 *
 * Context: process context, may sleep.
 * Return: 0 or -ENOMEM.
 */
int kcm_accept_sock(struct socket *sock, struct socket *newsock, bool kern)
{
	struct sock *sk = sock->sk;
	struct kcm_sock *kcm;

	kcm = kcm_sk_alloc(sock_net(sk), newsock, kern);
	if (!kcm)
		return -ENOMEM;

	/*
	 * sock_init_data() grafted the socket already, without the LSM
	 * hook; nothing else sees it yet.
	 */
	security_sk_clone(sk, &kcm->sk);
	security_sock_graft(&kcm->sk, newsock);
	kcm_mux_add_sock(kcm_sk(sk)->mux, kcm);
	return 0;
}

/*
 * KCM sockets have no address.  Only accept() (@peer == 2) asks with an
 * address buffer it must fill: it gets the bare family.  getsockname() and
 * getpeername() keep failing as upstream's do.
 *
 * Context: process context.
 */
static int kcm_getname(struct socket *sock, struct sockaddr *addr, int peer)
{
	if (peer != 2)
		return -EOPNOTSUPP;

	addr->sa_family = AF_KCM;
	return sizeof(addr->sa_family);
}

/* Context: process context (ioctl). */
static int kcm_ioctl_clone(struct socket *sock, struct kcm_clone __user *arg)
{
	struct kcm_clone info = {};
	struct file *file;
	int fd;

	fd = get_unused_fd_flags(0);
	if (fd < 0)
		return fd;

	file = kcm_clone(sock, 0);
	if (IS_ERR(file)) {
		put_unused_fd(fd);
		return PTR_ERR(file);
	}

	info.fd = fd;
	if (copy_to_user(arg, &info, sizeof(info))) {
		fput(file);
		put_unused_fd(fd);
		return -EFAULT;
	}

	fd_install(fd, file);
	return 0;
}

/* Context: process context (ioctl). */
static int kcm_ioctl_attach(struct socket *sock, void __user *arg)
{
	struct kcm_attach info;

	if (copy_from_user(&info, arg, sizeof(info)))
		return -EFAULT;

	return kcm_attach_ioctl(kcm_sk(sock->sk), &info);
}

/* Context: process context (ioctl). */
static int kcm_ioctl_attach_ext(struct socket *sock, void __user *arg)
{
	struct kcm_attach_ext info;
	int err;

	err = kcm_attach_ext_copy(&info, arg);
	if (err)
		return err;

	return kcm_attach_ext_ioctl(kcm_sk(sock->sk), &info);
}

/* Context: process context (ioctl). */
static int kcm_ioctl_unattach(struct socket *sock, void __user *arg)
{
	struct kcm_unattach info;

	if (copy_from_user(&info, arg, sizeof(info)))
		return -EFAULT;

	return kcm_unattach_ioctl(kcm_sk(sock->sk), &info);
}

/* Context: process context (ioctl). */
static int kcm_ioctl(struct socket *sock, unsigned int cmd, unsigned long arg)
{
	switch (cmd) {
	case SIOCKCMCLONE:
		return kcm_ioctl_clone(sock, (void __user *)arg);
	case SIOCKCMATTACH:
		return kcm_ioctl_attach(sock, (void __user *)arg);
	case SIOCKCMUNATTACH:
		return kcm_ioctl_unattach(sock, (void __user *)arg);
	case SIOCKCMATTACHEXT:
		return kcm_ioctl_attach_ext(sock, (void __user *)arg);
	default:
		return -ENOIOCTLCMD;
	}
}

#ifdef CONFIG_COMPAT
/*
 * Context: process context (32-bit ioctl).  The arguments hold only ints
 * but for SIOCKCMATTACHEXT's, which kcm_attach_ext_copy() converts.
 */
static int kcm_compat_ioctl(struct socket *sock, unsigned int cmd,
			    unsigned long arg)
{
	return kcm_ioctl(sock, cmd, (unsigned long)compat_ptr(arg));
}
#endif

/*
 * Context: process context; takes lock_sock() for KCM_RECV_DISABLE.
 * KCM_RECV_CONN_ID and KCM_RECV_BATCH are only read by the socket's own
 * readers; KCM_RECV_KEY is the mux's (kcm_steer.c).
 */
static int kcm_setsockopt(struct socket *sock, int level, int optname,
			  sockptr_t optval, unsigned int optlen)
{
	struct kcm_sock *kcm = kcm_sk(sock->sk);
	int val;

	if (level != SOL_KCM)
		return -ENOPROTOOPT;

	if (optname == KCM_RECV_KEY)
		return kcm_steer_setsockopt(kcm, optval, optlen);

	if (optname != KCM_RECV_DISABLE && optname != KCM_RECV_CONN_ID &&
	    optname != KCM_RECV_BATCH)
		return -ENOPROTOOPT;

	if (optlen < sizeof(int))
		return -EINVAL;

	if (copy_from_sockptr(&val, optval, sizeof(int)))
		return -EFAULT;

	switch (optname) {
	case KCM_RECV_CONN_ID:
		WRITE_ONCE(kcm->rx_conn_id, !!val);
		return 0;
	case KCM_RECV_BATCH:
		if (val < 0 || val > KCM_RECV_BATCH_MAX)
			return -EINVAL;
		WRITE_ONCE(kcm->rx_batch, val);
		return 0;
	}

	lock_sock(&kcm->sk);
	kcm_rx_set_disabled(kcm, !!val);
	release_sock(&kcm->sk);
	return 0;
}

/* Context: process context; reads the options locklessly. */
static int kcm_getsockopt(struct socket *sock, int level, int optname,
			  char __user *optval, int __user *optlen)
{
	struct kcm_sock *kcm = kcm_sk(sock->sk);
	int val, len;

	if (level != SOL_KCM)
		return -ENOPROTOOPT;

	if (optname == KCM_RECV_KEY)
		return kcm_steer_getsockopt(kcm, optval, optlen);

	switch (optname) {
	case KCM_RECV_DISABLE:
		val = READ_ONCE(kcm->rx_disabled);
		break;
	case KCM_RECV_CONN_ID:
		val = READ_ONCE(kcm->rx_conn_id);
		break;
	case KCM_RECV_BATCH:
		val = READ_ONCE(kcm->rx_batch);
		break;
	default:
		return -ENOPROTOOPT;
	}

	if (get_user(len, optlen))
		return -EFAULT;

	if (len < 0)
		return -EINVAL;

	len = min_t(int, len, sizeof(int));
	if (put_user(len, optlen) || copy_to_user(optval, &val, len))
		return -EFAULT;

	return 0;
}

/* Context: process context (poll/select/epoll). */
static __poll_t kcm_poll(struct file *file, struct socket *sock,
			 poll_table *wait)
{
	struct sock *sk = sock->sk;
	__poll_t mask = 0;

	sock_poll_wait(file, sock, wait);
	if (READ_ONCE(sk->sk_err))
		mask |= EPOLLERR;

	if (skb_queue_empty_lockless(&sk->sk_receive_queue))
		kcm_rx_sock_join(kcm_sk(sk));
	if (!skb_queue_empty_lockless(&sk->sk_receive_queue))
		mask |= EPOLLIN | EPOLLRDNORM;

	/* Writable only when a send would not wait for buffer space. */
	if (sock_writeable(sk)) {
		mask |= EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND;
	} else {
		sk_set_bit(SOCKWQ_ASYNC_NOSPACE, sk);
		set_bit(SOCK_NOSPACE, &sk->sk_socket->flags);
		/* Write space may have come before the bit was set. */
		smp_mb__after_atomic();
		if (sock_writeable(sk))
			mask |= EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND;
	}

	return mask;
}

static const struct proto_ops kcm_ops = {
	.family = PF_KCM,
	.owner = THIS_MODULE,
	.release = kcm_release,
	.bind = sock_no_bind,
	.connect = sock_no_connect,
	.socketpair = sock_no_socketpair,
	.accept = kcm_accept,
	.getname = kcm_getname,
	.poll = kcm_poll,
	.ioctl = kcm_ioctl,
#ifdef CONFIG_COMPAT
	.compat_ioctl = kcm_compat_ioctl,
#endif
	.listen = sock_no_listen,
	.shutdown = sock_no_shutdown,
	.setsockopt = kcm_setsockopt,
	.getsockopt = kcm_getsockopt,
	.sendmsg = kcm_sendmsg,
	.recvmsg = kcm_recvmsg,
	.mmap = sock_no_mmap,
#ifdef KCM_HAVE_SENDPAGE
	.sendpage = kcm_sendpage,
#endif
};

static const struct net_proto_family kcm_family_ops = {
	.family = PF_KCM,
	.create = kcm_create,
	.owner = THIS_MODULE,
};

static int __init kcm_init(void)
{
	int err;

	kcm_mem_proto_init(&kcm_proto);
	err = proto_register(&kcm_proto, 1);
	if (err)
		return err;

	err = kcm_mem_sysctl_register();
	if (err)
		goto out_proto;

	err = kcm_net_register();
	if (err)
		goto out_sysctl;

	err = sock_register(&kcm_family_ops);
	if (err)
		goto out_net;

	return 0;

out_net:
	kcm_net_unregister();
out_sysctl:
	kcm_mem_sysctl_unregister();
out_proto:
	proto_unregister(&kcm_proto);
	return err;
}

static void __exit kcm_exit(void)
{
	sock_unregister(PF_KCM);
	kcm_net_unregister();
	kcm_mem_sysctl_unregister();
	proto_unregister(&kcm_proto);
}

module_init(kcm_init);
module_exit(kcm_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Kernel Connection Multiplexor sockets (AF_KCM)");
MODULE_ALIAS_NETPROTO(PF_KCM);
/*
 * The release, as in dkms.conf: DKMS installs a module over the kernel's
 * own only when it carries a version (the kernel's kcm.ko has none), and
 * /sys/module/kcm/version tells which of the two is loaded.
 */
MODULE_VERSION("1.0");
