/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Kernel Connection Multiplexor: the interfaces that differ between the
 * kernels this tree builds for, in one place.
 *
 * Each entry names the kernel that introduced the interface used on newer
 * kernels; Documentation/networking/kcm.rst ("Kernel versions") lists
 * them.  In the kernel tree only the newest branch of each remains.  This
 * is the one file that tests LINUX_VERSION_CODE (make lint lets it).
 *
 *  - 6.5: proto_ops.sendpage, kernel_sendpage_locked() and
 *    MSG_SENDPAGE_NOTLAST are gone; sendmsg() with MSG_SPLICE_PAGES and a
 *    bvec iterator carries page references both ways.  Tested by version:
 *    Debian's 6.1 defines MSG_SPLICE_PAGES (only to clear it on entry)
 *    while its TCP still ignores it.
 *  - 6.6: kTLS gives a TLS socket a proto_ops.read_sock that hands over
 *    decrypted records, and its sendmsg() takes MSG_SPLICE_PAGES (6.5):
 *    from then on KCM carries kTLS connections (kcm_tls.c); before, a
 *    TLS socket's read_sock is TCP's, which would read ciphertext.
 *  - 6.4: memcg_kmem_enabled() is named memcg_kmem_online().
 *  - 6.6: register_net_sysctl_sz() takes the size of the table, which
 *    no longer needs an empty entry at its end (and later may not have
 *    one): KCM's tables keep it, and its size is given without it.
 *  - 6.9: page_frag_cache_drain() gives back a fragment cache's page; from
 *    6.13 on the cache no longer keeps it in ->va (encoded_page), so only
 *    that call can.
 *  - 6.10: proto_ops.accept takes a struct proto_accept_arg.
 *  - 6.11: skb_frag_unref() and friends live in <linux/skbuff_ref.h>.
 *  - 6.12: <asm/unaligned.h> became <linux/unaligned.h> (kcm_parser.c and
 *    kcm_strp_test.c include this header for it).
 *  - 6.13: page_frag_alloc() of more than a page fails whenever the
 *    cache's current page has no room left for it, where it used to take
 *    a new page (kcm_frag_skb() then drains the cache and asks again);
 *    the cache's page is ->encoded_page, not ->va
 *    (kcm_frag_cache_has_page()).
 */

#ifndef __KCM_COMPAT_H
#define __KCM_COMPAT_H

#include <linux/bvec.h>
#include <linux/memcontrol.h>
#include <linux/net.h>
#include <linux/socket.h>
#include <linux/uio.h>
#include <linux/version.h>
#include <net/sock.h>
#include <net/tcp.h>
#include <net/kcm.h>

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 12, 0)
#include <linux/unaligned.h>
#else
#include <asm/unaligned.h>
#endif

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 11, 0)
#include <linux/skbuff_ref.h>
#endif

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 5, 0)

/**
 * kcm_tcp_send_pages_locked() - write page segments to a TCP socket
 * @csk: the TCP socket
 * @bv: the segments; TCP takes its own page references
 * @nr: number of segments
 * @len: their bytes
 * @flags: MSG_DONTWAIT, MSG_NOSIGNAL, MSG_MORE
 *
 * Context: lock_sock(csk) held.
 * Return: bytes written (maybe fewer than @len), or a negative errno.
 */
static inline int kcm_tcp_send_pages_locked(struct sock *csk,
					    struct bio_vec *bv,
					    unsigned int nr, size_t len,
					    int flags)
{
	struct msghdr msg = { .msg_flags = flags | MSG_SPLICE_PAGES };

	iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, bv, nr, len);
	return tcp_sendmsg_locked(csk, &msg, len);
}

/* Context: any.  Does @msg hand over page references (splice())? */
static inline bool kcm_msg_splice(const struct msghdr *msg)
{
	return msg->msg_flags & MSG_SPLICE_PAGES;
}

#else /* before 6.5: sendpage */

#define KCM_HAVE_SENDPAGE 1

static inline int kcm_tcp_send_pages_locked(struct sock *csk,
					    struct bio_vec *bv,
					    unsigned int nr, size_t len,
					    int flags)
{
	unsigned int i;
	int done = 0, ret, more;

	for (i = 0; i < nr; i++) {
		more = i + 1 < nr ? MSG_MORE | MSG_SENDPAGE_NOTLAST : 0;
		ret = kernel_sendpage_locked(csk, bv[i].bv_page,
					     bv[i].bv_offset, bv[i].bv_len,
					     flags | more);
		if (ret <= 0)
			return done ? done : ret;
		done += ret;
		if (ret < bv[i].bv_len)
			break;
	}
	return done;
}

static inline bool kcm_msg_splice(const struct msghdr *msg)
{
	return false;
}

/**
 * kcm_sendpage() - proto_ops.sendpage before 6.5: one page segment
 * @sock: a KCM socket
 * @page: the page
 * @offset: where the data starts in @page
 * @size: bytes
 * @flags: MSG_MORE or MSG_SENDPAGE_NOTLAST keep the message open (for
 *	both socket types), MSG_BATCH defers transmission
 *
 * The same path as sendmsg(MSG_SPLICE_PAGES) on newer kernels.
 *
 * Context: process context, may sleep.
 * Return: @size, or a negative errno.
 */
static inline ssize_t kcm_sendpage(struct socket *sock, struct page *page,
				   int offset, size_t size, int flags)
{
	struct msghdr msg = { .msg_flags = flags };
	struct bio_vec bv;

	if (flags & MSG_SENDPAGE_NOTLAST)
		msg.msg_flags |= MSG_MORE;
	bvec_set_page(&bv, page, size, offset);
	iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, &bv, 1, size);
	return kcm_tx_sendmsg(sock, &msg, size, true);
}

#endif /* 6.5 */

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 6, 0)

/* Context: any.  Can KCM read and write through kTLS on this kernel? */
static inline bool kcm_tls_carried(void)
{
	return true;
}

#define KCM_MSG_SPLICE_PAGES	MSG_SPLICE_PAGES

#else

static inline bool kcm_tls_carried(void)
{
	return false;
}

/* Never used: kcm_tls_io() gives no KCM_IO_TLS before 6.6. */
#define KCM_MSG_SPLICE_PAGES	0

#endif /* 6.6 */

/*
 * Are kernel allocations (__GFP_ACCOUNT) charged to memory cgroups?
 * memcg_kmem_enabled() became memcg_kmem_online() in 6.4.
 */
static inline bool kcm_memcg_kmem_on(void)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 4, 0)
	return memcg_kmem_online();
#else
	return memcg_kmem_enabled();
#endif
}

/*
 * Register the @n entries of @table (an empty one follows them) under
 * @path of @net's sysctls.  register_net_sysctl_sz(): 6.6.
 */
static inline struct ctl_table_header *
kcm_register_net_sysctl(struct net *net, const char *path,
			struct ctl_table *table, size_t n)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 6, 0)
	return register_net_sysctl_sz(net, path, table, n);
#else
	return register_net_sysctl(net, path, table);
#endif
}

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 10, 0)

/* proto_ops.accept: see kcm_accept_sock(). */
static inline int kcm_accept(struct socket *sock, struct socket *newsock,
			     struct proto_accept_arg *arg)
{
	return kcm_accept_sock(sock, newsock, arg->kern);
}

#else

static inline int kcm_accept(struct socket *sock, struct socket *newsock,
			     int flags, bool kern)
{
	return kcm_accept_sock(sock, newsock, kern);
}

#endif

/**
 * kcm_frag_skb() - an empty skb for a small message, head from a page
 *	fragment cache
 * @nc: the psock's or KCM socket's cache
 * @size: room for data
 * @gfp: allocation flags
 *
 * No kmalloc() per message, and (with init_on_alloc) only the bytes used
 * are ever zeroed, once per page.  The head is a page fragment, so TCP can
 * take it by reference.
 *
 * Context: whatever serialises @nc (the TCP or the KCM socket's lock).
 * Return: the skb, or NULL.
 */
static inline struct sk_buff *kcm_frag_skb(struct page_frag_cache *nc,
					   unsigned int size, gfp_t gfp)
{
	unsigned int fragsz = SKB_DATA_ALIGN(size) +
			      SKB_DATA_ALIGN(sizeof(struct skb_shared_info));
	struct sk_buff *skb;
	void *data;

	data = page_frag_alloc(nc, fragsz, gfp);
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
	/* more than a page: from a new page when the current one is short */
	if (!data && fragsz > PAGE_SIZE) {
		page_frag_cache_drain(nc);
		data = page_frag_alloc(nc, fragsz, gfp);
	}
#endif
	if (!data)
		return NULL;
	skb = build_skb(data, fragsz);
	if (!skb)
		skb_free_frag(data);
	return skb;
}

/*
 * Does fragment cache @nc hold a page (charged whole while it does)?
 * Context: whatever serialises @nc.  6.13 keeps the page encoded with
 * its order in ->encoded_page, no longer at ->va.
 */
static inline bool kcm_frag_cache_has_page(const struct page_frag_cache *nc)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
	return nc->encoded_page;
#else
	return nc->va;
#endif
}

/**
 * kcm_frag_cache_drain() - give back the page of a fragment cache
 * @nc: a psock's or KCM socket's cache of small-message heads
 *
 * Fragments already handed out keep their own page references.
 *
 * Context: whatever serialises @nc (the TCP or the KCM socket's lock).
 */
static inline void kcm_frag_cache_drain(struct page_frag_cache *nc)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 9, 0)
	page_frag_cache_drain(nc);
#else
	if (!nc->va)
		return;
	__page_frag_cache_drain(virt_to_head_page(nc->va), nc->pagecnt_bias);
	nc->va = NULL;
#endif
}

/*
 * May the bytes of @skb's page fragments be read, and their pages be
 * referenced?  Not those of device memory (6.12's devmem TCP: net_iov).
 */
static inline bool kcm_skb_frags_readable(const struct sk_buff *skb)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 12, 0)
	return skb_frags_readable(skb);
#else
	return true;
#endif
}

#endif /* __KCM_COMPAT_H */
