/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Kernel Connection Multiplexor (AF_KCM): objects shared by the files of
 * net/kcm.  See the implementation notes at the top of kcmsock.c.
 */
#ifndef _NET_KCM_H
#define _NET_KCM_H

#include <linux/filter.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/spinlock.h>
#include <linux/skbuff.h>
#include <linux/sockptr.h>
#include <linux/types.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <net/netns/generic.h>
#include <net/sock.h>
#include <linux/kcm.h>

struct bio_vec;

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
 * struct kcm_psock_stats - counters of attached TCP sockets
 * @rx_msgs: messages framed
 * @rx_bytes: bytes of those messages
 * @tx_msgs: messages written whole to the TCP socket
 * @tx_bytes: bytes of those messages
 * @reserved: times a KCM socket reserved the psock for sending
 * @unreserved: times it was given back (queue drained, failure, unattach)
 * @rx_aborts: half-assembled messages dropped (error, unattach)
 * @rx_intr: times framing paused because the mux held too much of it
 * @rx_unrecov: framing errors that stopped the psock
 * @rx_mem_fail: allocations that failed while framing (retried)
 * @rx_need_more: parser calls that asked for more bytes
 * @rx_bad_len: lengths the parser should have returned earlier (EPROTO)
 * @rx_too_big: messages over the TCP socket's receive buffer (EMSGSIZE)
 * @rx_timeouts: messages not complete within SO_RCVTIMEO (ETIMEDOUT)
 * @tx_aborts: messages whose transmission failed on this psock
 * @rx_in_place: small messages framed in TCP's pages, not copied to the
 *	framing buffer (kcm_rx.c)
 * @ulp_stops: times the psock stopped because its TCP socket gained an
 *	upper layer protocol KCM cannot go through (kcm_psock_io()); 0 or 1
 *
 * In the order of /proc/net/kcm_stats, all u64 (see kcm_stats_fold()).
 * Receive counters are written under the TCP socket's lock, @rx_intr,
 * @reserved and @unreserved under the mux lock, the other transmit
 * counters under the lock of the KCM socket that has the psock reserved;
 * /proc reads them locklessly.
 */
struct kcm_psock_stats {
	u64 rx_msgs;
	u64 rx_bytes;
	u64 tx_msgs;
	u64 tx_bytes;
	u64 reserved;
	u64 unreserved;
	u64 rx_aborts;
	u64 rx_intr;
	u64 rx_unrecov;
	u64 rx_mem_fail;
	u64 rx_need_more;
	u64 rx_bad_len;
	u64 rx_too_big;
	u64 rx_timeouts;
	u64 tx_aborts;
	u64 rx_in_place;
	u64 ulp_stops;
};

/**
 * struct kcm_mux_stats - events of a mux
 * @tx_retries: messages sent again on another psock after a failure
 * @attach: TCP sockets attached
 * @unattach: TCP sockets unattached (by the application or the mux dying)
 * @unattach_rsvd: of those, unattached while reserved for sending
 * @rx_ready_drops: received messages dropped: held on a dying mux, or
 *	partly read by a SEQPACKET socket that closed
 * @tx_dropped: messages dropped unsent when their KCM socket closed
 * @tx_too_big: messages dropped because they outgrew their KCM socket's
 *	send buffer (EMSGSIZE)
 * @rx_mem_short: times a KCM socket could not be charged for a message
 *	and left the receive rotation for a while
 * @steered: messages framed with a key while the mux had a key function
 *	(KCM_RECV_KEY), handed to the socket that owns their key
 * @steer_nokey: messages framed while it had one that gave no key (or
 *	framed before it was set), balanced in turn
 * @steer_moved: messages with a key that a leaving socket (closed or
 *	KCM_RECV_DISABLE) gave back, handed to their key's next owner
 * @steer_remaps: key slots that changed owner as sockets joined or left
 *
 * Under the mux lock; all u64.
 */
struct kcm_mux_stats {
	u64 tx_retries;
	u64 attach;
	u64 unattach;
	u64 unattach_rsvd;
	u64 rx_ready_drops;
	u64 tx_dropped;
	u64 tx_too_big;
	u64 rx_mem_short;
	u64 steered;
	u64 steer_nokey;
	u64 steer_moved;
	u64 steer_remaps;
};

/* Adds every u64 counter of @src to @dst; @src may be written meanwhile. */
static inline void kcm_stats_fold_u64(u64 *dst, const u64 *src, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		dst[i] += READ_ONCE(src[i]);
}

#define kcm_stats_fold(dst, src) do {					\
	typeof(dst) __kd = (dst);					\
	typeof(src) __ks = (src);					\
									\
	BUILD_BUG_ON(sizeof(*__kd) % sizeof(u64) ||			\
		     sizeof(*__kd) != sizeof(*__ks));			\
	kcm_stats_fold_u64((u64 *)__kd, (const u64 *)__ks,		\
			   sizeof(*__kd) / sizeof(u64));		\
} while (0)

/**
 * struct kcm_net - per network namespace state
 * @lock: protects everything below
 * @muxes: every live multiplexor of the namespace
 * @count: number of entries on @muxes
 * @next_mux_id: id given to the next mux published (/proc/net/kcm_ext)
 * @msg_stats: totals of the KCM sockets of destroyed muxes
 * @mux_stats: totals of destroyed muxes
 * @psock_stats: totals of the psocks of destroyed muxes
 */
struct kcm_net {
	struct mutex lock;	/* protects everything below */
	struct list_head muxes;
	unsigned int count;
	unsigned int next_mux_id;
	struct kcm_msg_stats msg_stats;
	struct kcm_mux_stats mux_stats;
	struct kcm_psock_stats psock_stats;
};

/* Slots that keys hash to, each owned by one KCM socket (kcm_steer.c). */
#define KCM_STEER_SLOTS		1024

/**
 * struct kcm_steer - steering of a mux's messages by key (kcm_steer.c)
 * @fn: the key function (KCM_RECV_KEY), NULL for none; framing reads it
 *	under RCU, the mux lock serialises its replacement, and the one
 *	replaced is freed after a grace period
 * @map: the owner of each of the KCM_STEER_SLOTS slots, NULL while @fn is
 *	NULL; an entry is NULL only while no socket is a member
 * @salt: what keys are hashed with, random per mux
 * @members: KCM sockets that own slots (struct kcm_steer_sock.member)
 * @frag: where the packs that __kcm_steer_sort() cuts are carved from
 *
 * All but @fn under the mux lock.
 */
struct kcm_steer {
	struct kcm_steer_fn __rcu *fn;
	struct kcm_sock **map;
	u32 salt;
	unsigned int members;
	struct page_frag_cache frag;
};

/**
 * struct kcm_mux - a multiplexor: KCM sockets on one side, TCP on the other
 * @knet: namespace state; the mux is on @knet->muxes while it lives
 * @net_node: entry on @knet->muxes, protected by @knet->lock
 * @id: number of the mux within its namespace, from 1, set when published
 *	(under @knet->lock) and fixed from then on; shown in /proc/net/kcm_ext
 * @lock: protects everything below but @psock_mutex and @rcu
 * @socks: the KCM sockets of the mux (struct kcm_sock.mux_node)
 * @nsocks: number of entries on @socks; the mux dies when it drops to 0
 * @next_index: index given to the next KCM socket that joins
 * @rx_ready: KCM sockets that can take a message now, in round-robin
 *	order (struct kcm_sock.rx_node)
 * @rx_hold: complete messages that no KCM socket could take yet
 * @rx_mem_work: lets sockets short of memory take messages again
 * @psocks: attached TCP sockets (struct kcm_psock.mux_node)
 * @psock_ids: the same psocks by index (connection id); an entry is
 *	reserved before its psock takes over the TCP socket and holds the
 *	psock from the moment it is on @psocks until it leaves them
 * @npsocks: number of entries on @psocks
 * @next_psock_index: index given to the next psock; written under
 *	@psock_mutex and @lock
 * @tx_idle: psocks that can be reserved (struct kcm_psock.tx_node)
 * @tx_waiters: KCM sockets waiting for any psock, first come first served
 *	(struct kcm_sock.tx_wait_node)
 * @tx_wait_next: ticket of the next socket that starts waiting, so that
 *	waiters for any psock and for one psock are served in order
 * @tx_nwaiting: sockets waiting for a psock, on @tx_waiters or on a
 *	psock's tx_direct, so that one taking an idle psock knows it is not
 *	jumping the queue; under @lock
 * @stats: totals of the KCM sockets that have left the mux
 * @mstats: events of the mux
 * @psock_stats: totals of the psocks that have been unattached
 * @steer: steering by key (kcm_steer.c)
 * @psock_mutex: serialises attach and unattach (process context)
 * @rcu: deferred free
 */
struct kcm_mux {
	struct kcm_net *knet;
	struct list_head net_node;
	unsigned int id;

	spinlock_t lock;	/* see the kernel-doc above */
	struct list_head socks;
	unsigned int nsocks;
	unsigned int next_index;
	struct list_head rx_ready;
	struct sk_buff_head rx_hold;
	struct delayed_work rx_mem_work;
	struct list_head psocks;
	struct xarray psock_ids;
	unsigned int npsocks;
	unsigned int next_psock_index;
	struct list_head tx_idle;
	struct list_head tx_waiters;
	u64 tx_wait_next;
	unsigned int tx_nwaiting;
	struct kcm_msg_stats stats;
	struct kcm_mux_stats mstats;
	struct kcm_psock_stats psock_stats;
	struct kcm_steer steer;

	struct mutex psock_mutex;	/* serialises attach and unattach */
	struct rcu_head rcu;
};

/**
 * struct kcm_parser - how a psock finds message lengths (kcm_parser.c)
 * @kind: 0 or KCM_BPF_TYPE_FD: an eBPF program; KCM_BPF_TYPE_PROG: a
 *	converted classic program; KCM_PARSER_LENFIELD: the fields below.
 *	A key function (kcm_steer.c) uses the same, with KCM_KEY_FIELD and
 *	KCM_KEY_CONN for kinds of its own
 * @width: length field size in bytes
 * @le: the field is little endian
 * @offset: where the field starts in the message
 * @adjust: added to the field's value to give the message length
 * @max_len: longest message, 0 for no limit of the parser's own
 *
 * Fixed from attach to unattach (a key function's: for its life).
 */
struct kcm_parser {
	u8 kind;
	u8 width;
	bool le;
	u32 offset;
	s32 adjust;
	u32 max_len;
};

/**
 * struct kcm_steer_fn - a key function of steering (KCM_RECV_KEY)
 * @f: its kind (KCM_BPF_TYPE_FD, KCM_BPF_TYPE_PROG, KCM_KEY_FIELD or
 *	KCM_KEY_CONN) and, for a field, where the field is
 * @prog: the BPF program, NULL for the built-in kinds
 *
 * Never changed once published in struct kcm_steer.fn.
 */
struct kcm_steer_fn {
	struct kcm_parser f;
	struct bpf_prog *prog;
};

/* Most small messages one pack (one skb) carries. */
#define KCM_RX_PACK_MAX		256

/**
 * struct kcm_strp - the framing of a psock's TCP stream (kcm_strp.c)
 * @buf: bytes of the stream not framed yet, message start at data[0]
 * @view: what the parser runs on when messages are framed in place in
 *	TCP's page fragments; it holds no page reference
 * @msg: a large message being assembled once its length is known
 * @chunk: the last skb of @msg (@msg itself or on its frag_list)
 * @msg_len: the length of the message starting at @buf or @msg, 0 while
 *	unknown
 * @msg_fill: bytes of @msg written so far
 * @chunk_fill: bytes of @chunk written so far
 * @copying: @chunk is a chunk being copied into, not a reference
 * @frag_copies: small pieces of @msg copied into @frag
 * @last_large: the last message framed was a large one
 * @seen: bytes the parser was shown when it last asked for more
 * @start: jiffies when the current message began (assembly timeout)
 * @timing: a message is incomplete and @start is valid
 * @batch: messages framed in this read, delivered together at its end
 * @pack_off: where the small messages framed but not yet packed start in
 *	@buf's head; they end at @buf->data
 * @pack_n: number of those messages
 * @pack_lens: their lengths; while messages are framed in place, the
 *	lengths of the pack being built there
 * @pack_keys: the keys of the same messages (kcm_steer_key())
 * @buf_shared: packs may reference bytes of @buf's head, so they may not
 *	be overwritten: the buffer is replaced rather than compacted
 * @spares: framing buffers used before @buf, oldest first, each reused
 *	once no pack references it
 * @spares_low: the fewest unreferenced spares a replacement found since
 *	@trim_work last ran (UINT_MAX: none was replaced)
 * @frag: where the heads of small messages, and small copied pieces of
 *	large ones, are carved from
 * @gfp: allocation flags of the current framing context
 * @work: framing in process context
 * @timer_work: assembly timeout
 * @trim_work: lets go of spares no pack references
 * @spares_size: truesize of the skbs on @spares
 * @charged: bytes charged to the TCP socket for what the psock holds
 *	(kcm_mem_psock_sync()); read locklessly by /proc
 * @mem_short: the TCP socket's memory refused to be charged more: no
 *	reading until it takes the charge; read locklessly by @work
 *
 * All of it under the TCP socket's lock.
 */
struct kcm_strp {
	struct sk_buff *buf;
	struct sk_buff *view;
	struct sk_buff *msg;
	struct sk_buff *chunk;
	unsigned int msg_len;
	unsigned int msg_fill;
	unsigned int chunk_fill;
	bool copying;
	u8 frag_copies;
	bool last_large;
	unsigned int seen;
	unsigned long start;
	bool timing;
	struct sk_buff_head batch;
	unsigned int pack_off;
	unsigned int pack_n;
	u16 pack_lens[KCM_RX_PACK_MAX];
	u32 pack_keys[KCM_RX_PACK_MAX];
	bool buf_shared;
	struct sk_buff_head spares;
	unsigned int spares_low;
	struct page_frag_cache frag;
	gfp_t gfp;
	struct delayed_work work;
	struct delayed_work timer_work;
	struct delayed_work trim_work;
	unsigned int spares_size;
	unsigned int charged;
	bool mem_short;
};

/**
 * struct kcm_psock - a TCP socket attached to a mux
 * @mux: the mux
 * @sk: the TCP socket
 * @file: reference that keeps @sk open while attached
 * @prog: the BPF program that returns message lengths, NULL for the
 *	built-in parser
 * @parser: the kind of parser and the built-in one's parameters
 * @mux_node: entry on @mux->psocks, protected by @mux->lock
 * @index: number of the psock within its mux, shown in /proc; the id of
 *	KCM_CONN_ID, never reused within the mux
 * @saved_data_ready: the TCP socket's callbacks, restored on unattach
 * @saved_write_space: see @saved_data_ready
 * @saved_state_change: see @saved_data_ready
 * @strp: framing of the stream (kcm_strp.c), under the TCP socket's lock
 * @rx_stopped: no more receiving: error or unattach (READ_ONCE)
 * @rx_paused: too much of our data held on the mux; written under
 *	@mux->lock, read locklessly by the framing code
 * @rx_held: bytes of our messages held on the mux: on @mux->rx_hold or
 *	on a KCM socket's steering hold; under @mux->lock
 * @rx_wait: while @rx_paused, the index of the KCM socket the newest of
 *	its held messages waits for (steering by key), or -1 when it waits
 *	for any socket; set at each park, so it follows messages that move
 *	to a new owner; under @mux->lock
 * @tx_kcm: the KCM socket the psock is reserved to; under @mux->lock
 * @tx_node: entry on @mux->tx_idle; under @mux->lock
 * @tx_direct: KCM sockets waiting for this psock in particular, to send a
 *	message addressed to it (struct kcm_sock.tx_wait_node); under
 *	@mux->lock
 * @tx_stopped: no more transmitting: send error or unattach; written
 *	under @mux->lock
 * @tx_gone: the psock is being unattached (so @tx_stopped too): messages
 *	addressed to it fail with ENOENT, not EPIPE; written under @mux->lock
 * @ulp_stopped: the TCP socket gained an upper layer protocol KCM cannot
 *	go through (kcm_psock_io()): nothing more is read or written, and
 *	messages addressed to it fail with EOPNOTSUPP; set once under the
 *	TCP socket's lock (READ_ONCE)
 * @tx_orphan: the rest of a message whose KCM socket closed while it was
 *	half written, finished by @tx_work; set under @mux->lock
 * @tx_orphan_off: bytes of @tx_orphan already written
 * @tx_work: writes @tx_orphan
 * @stats: counters
 * @rcu: deferred free: a socket that kept the psock idle may still look
 *	at @tx_direct after another took the psock (kcm_tx_release())
 */
struct kcm_psock {
	struct kcm_mux *mux;
	struct sock *sk;
	struct file *file;
	struct bpf_prog *prog;
	struct kcm_parser parser;
	struct list_head mux_node;
	unsigned int index;

	void (*saved_data_ready)(struct sock *sk);
	void (*saved_write_space)(struct sock *sk);
	void (*saved_state_change)(struct sock *sk);

	struct kcm_strp strp;
	bool rx_stopped;
	bool rx_paused;
	unsigned int rx_held;
	int rx_wait;

	struct kcm_sock *tx_kcm;
	struct list_head tx_node;
	struct list_head tx_direct;
	bool tx_stopped;
	bool tx_gone;
	bool ulp_stopped;
	struct sk_buff *tx_orphan;
	unsigned int tx_orphan_off;
	struct work_struct tx_work;

	struct kcm_psock_stats stats;
	struct rcu_head rcu;
};

/**
 * kcm_psock_of() - the psock a TCP socket is attached as
 * @csk: a TCP socket whose callbacks are KCM's
 *
 * Context: read_lock_bh(&csk->sk_callback_lock) held: unattach clears
 * sk_user_data under the write lock, so the psock stays while it is held.
 * Return: the psock, or NULL when @csk was just unattached.
 */
static inline struct kcm_psock *kcm_psock_of(struct sock *csk)
{
	struct kcm_psock *psock;

	lockdep_assert_held(&csk->sk_callback_lock);
	rcu_read_lock();
	psock = rcu_dereference_sk_user_data(csk);
	rcu_read_unlock();
	return psock;
}

/**
 * struct kcm_rx_msg - what KCM keeps in skb->cb of a received skb
 * @psock: the psock it came from while it is on @mux->rx_hold, or NULL
 * @offset: bytes of the current message already read by a SEQPACKET
 *	reader
 * @conn_id: index of the psock it came from (KCM_CONN_ID)
 * @pos: where the current message starts in the skb
 * @nmsgs: 0 or 1 for an skb holding one message; more for a pack: that
 *	many small messages of one connection back to back, their lengths
 *	a u16 array at skb->head (see kcm_pack_lens())
 * @next: index of the current message of a pack
 * @pack: the skb is a pack: message lengths come from its array, even
 *	when @nmsgs was cut to keep only some of them
 * @key: the steering key of its messages (KCM_NO_KEY: none), unless
 *	@keys_off says they differ
 * @keys_off: 0, or where the u32 array of the keys of a pack's messages
 *	starts, from skb->head (see kcm_rx_key_at())
 *
 * Only the owner of the receive queue (lock_sock()) moves @offset, @pos
 * and @next on; the framing code sets them before the skb is queued, and
 * the rest never changes.
 */
struct kcm_rx_msg {
	struct kcm_psock *psock;
	unsigned int offset;
	u32 conn_id;
	u32 pos;
	u32 key;
	u16 nmsgs;
	u16 next;
	u16 keys_off;
	bool pack;
};

static inline struct kcm_rx_msg *kcm_rx_msg(struct sk_buff *skb)
{
	BUILD_BUG_ON(sizeof(struct kcm_rx_msg) > sizeof(skb->cb));
	return (struct kcm_rx_msg *)skb->cb;
}

/*
 * The lengths of the messages of a pack, received or to send: a u16
 * array in the headroom of its skb.
 */
static inline u16 *kcm_pack_lens(const struct sk_buff *skb)
{
	return (u16 *)skb->head;
}

/* Length of message @idx, starting at @pos, of a received skb. */
static inline unsigned int kcm_rx_len_at(struct sk_buff *skb,
					 unsigned int idx, unsigned int pos)
{
	if (kcm_rx_msg(skb)->pack)
		return kcm_pack_lens(skb)[idx];
	return skb->len - pos;
}

/* Length of the current (first unread) message of a received skb. */
static inline unsigned int kcm_rx_cur_len(struct sk_buff *skb)
{
	struct kcm_rx_msg *rxm = kcm_rx_msg(skb);

	return kcm_rx_len_at(skb, rxm->next, rxm->pos);
}

/* The steering key of message @idx of a received skb. */
static inline u32 kcm_rx_key_at(const struct sk_buff *skb, unsigned int idx)
{
	const struct kcm_rx_msg *rxm = (const struct kcm_rx_msg *)skb->cb;

	if (!rxm->keys_off)
		return rxm->key;
	return ((const u32 *)(skb->head + rxm->keys_off))[idx];
}

/* Do the messages of a received skb carry steering keys? */
static inline bool kcm_rx_keyed(const struct sk_buff *skb)
{
	const struct kcm_rx_msg *rxm = (const struct kcm_rx_msg *)skb->cb;

	return rxm->keys_off || rxm->key != KCM_NO_KEY;
}

/* Messages of a received skb not read yet, the current one included. */
static inline unsigned int kcm_rx_left(struct sk_buff *skb)
{
	struct kcm_rx_msg *rxm = kcm_rx_msg(skb);

	return rxm->nmsgs > rxm->next ? rxm->nmsgs - rxm->next : 1;
}

/**
 * struct kcm_tx_msg - what KCM keeps in skb->cb of a message to send
 * @conn_id: the psock index it must go out on, when @directed
 * @directed: sent with a KCM_CONN_ID control message
 * @retried: its transmission on a psock failed or was cut short by an
 *	unattach, and it is being sent again from the start on another
 * @pack: the skb is a pack: @nmsgs small messages back to back in its
 *	linear data, their lengths a u16 array at skb->head
 *	(kcm_pack_lens()); more may join while it is last in the queue
 * @nmsgs: messages in a pack
 */
struct kcm_tx_msg {
	u32 conn_id;
	bool directed;
	bool retried;
	bool pack;
	u16 nmsgs;
};

static inline struct kcm_tx_msg *kcm_tx_msg(struct sk_buff *skb)
{
	BUILD_BUG_ON(sizeof(struct kcm_tx_msg) > sizeof(skb->cb));
	return (struct kcm_tx_msg *)skb->cb;
}

/* Messages a queued skb to send holds: one, or those of a pack. */
static inline unsigned int kcm_tx_nmsgs(struct sk_buff *skb)
{
	return kcm_tx_msg(skb)->pack ? kcm_tx_msg(skb)->nmsgs : 1;
}

/* How a KCM socket holds its reserved psock (struct kcm_sock.tx_hold). */
enum {
	KCM_TX_ACTIVE,
	KCM_TX_IDLE,
	KCM_TX_TAKEN,
};

/**
 * struct kcm_steer_part - messages of one owner cut out of received skbs
 *	(__kcm_steer_sort()): scratch of the mux lock's holder
 * @skbs: the packs made for them so far
 * @n: messages still to be placed
 * @bytes: their bytes
 * @node: entry on the caller's list of owners with a part
 */
struct kcm_steer_part {
	struct sk_buff_head skbs;
	unsigned int n;
	unsigned int bytes;
	struct list_head node;
};

/**
 * struct kcm_steer_sock - a KCM socket's side of steering by key
 * @hold: messages of its keys that it could not take yet, in order; they
 *	count as held by their psocks (kcm_psock.rx_held)
 * @member: it takes part: it belongs to the mux and receives (no
 *	KCM_RECV_DISABLE)
 * @slots: slots of the mux's map it owns
 * @part: scratch of __kcm_steer_sort()
 *
 * Under the mux lock.
 */
struct kcm_steer_sock {
	struct sk_buff_head hold;
	bool member;
	unsigned int slots;
	struct kcm_steer_part part;
};

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
 * @rx_mem_short: the socket left the rotation because it could not be
 *	charged for a message; @mux->rx_mem_work lets it try again; under
 *	@mux->lock
 * @rx_mem_retried: @mux->rx_mem_work made its memory cgroup reclaim and
 *	let it try again, and it has not been charged since: the next try
 *	waits; under @mux->lock
 * @rx_conn_id: KCM_RECV_CONN_ID; READ_ONCE/WRITE_ONCE
 * @rx_batch: KCM_RECV_BATCH, the most messages one read returns (0 and 1:
 *	one); READ_ONCE/WRITE_ONCE
 * @rx_ents: lengths and ids of a batched read too large for the stack,
 *	kept for the next ones; under lock_sock()
 * @rx_ents_room: entries (a length and an id each) @rx_ents has room for
 * @tx_psock: the psock reserved to this socket; under @mux->lock.  Only
 *	this socket (under lock_sock()) or unattach (holding lock_sock() of
 *	this socket) take it away, except while @tx_hold is KCM_TX_IDLE:
 *	then another socket may take it (see @tx_hold)
 * @tx_wait_node: entry on @mux->tx_waiters, or on @tx_want->tx_direct,
 *	while @tx_waiting
 * @tx_waiting: waiting for a psock; under @mux->lock
 * @tx_want: the psock waited for when the message is addressed to one;
 *	under @mux->lock
 * @tx_wait_seq: ticket taken from @mux->tx_wait_next; under @mux->lock
 * @tx_hold: how @tx_psock is held: KCM_TX_ACTIVE (in use, or none),
 *	KCM_TX_IDLE (kept with nothing to send: a socket that needs a psock
 *	may take it), KCM_TX_TAKEN (taken; @tx_psock is NULL).  Only this
 *	socket moves it from KCM_TX_ACTIVE to KCM_TX_IDLE (under lock_sock());
 *	it leaves KCM_TX_IDLE only by cmpxchg(); see kcm_tx.c, "Reservation"
 * @tx_closing: the socket is being released; under lock_sock()
 * @tx_in_call: the owner is in sendmsg() with the socket locked, and
 *	pushes before it lets go when @tx_owed; written under lock_sock(),
 *	read under @mux->lock
 * @tx_owed: the socket became writable (a psock granted, TCP room) while
 *	@tx_in_call, so tx_work was not kicked; set under @mux->lock,
 *	cleared under lock_sock()
 * @tx_partial: the message being built (MSG_MORE, SEQPACKET without
 *	MSG_EOR); under lock_sock()
 * @tx_too_big: a message outgrew the send buffer and was dropped: what
 *	follows of it is dropped too (kcm_tx_check_size()); under
 *	lock_sock()
 * @tx_frag: where small messages are carved from; under lock_sock()
 * @tx_frag_page: the page of @tx_frag the socket is charged for, whole;
 *	under lock_sock()
 * @tx_frag_charged: bytes charged for @tx_frag_page; under lock_sock()
 * @tx_offset: bytes of the first queued message written to @tx_psock;
 *	under lock_sock()
 * @tx_sent: bytes written since the socket got @tx_psock; under lock_sock()
 * @tx_queued: messages on the write queue (packs hold several); written
 *	under lock_sock(), read locklessly by /proc
 * @tx_work: transmits in process context when TCP has room again, a psock
 *	becomes free, or a while after TCP ran short of memory
 * @stats: message counters of this socket
 * @steer: steering by key (kcm_steer.c); under @mux->lock
 */
struct kcm_sock {
	struct sock sk;
	struct kcm_mux *mux;
	struct list_head mux_node;
	unsigned int index;
	bool rx_disabled;
	struct list_head rx_node;
	bool rx_ready;
	bool rx_mem_short;
	bool rx_mem_retried;
	bool rx_conn_id;
	unsigned int rx_batch;
	u32 *rx_ents;
	unsigned int rx_ents_room;
	struct kcm_psock *tx_psock;
	struct list_head tx_wait_node;
	bool tx_waiting;
	struct kcm_psock *tx_want;
	u64 tx_wait_seq;
	int tx_hold;
	bool tx_closing;
	bool tx_in_call;
	bool tx_owed;
	struct sk_buff *tx_partial;
	bool tx_too_big;
	struct page_frag_cache tx_frag;
	struct page *tx_frag_page;
	unsigned int tx_frag_charged;
	unsigned int tx_offset;
	unsigned int tx_sent;
	unsigned int tx_queued;
	struct delayed_work tx_work;
	struct kcm_msg_stats stats;
	struct kcm_steer_sock steer;
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

/* kcmsock.c: the socket calls */
int kcm_accept_sock(struct socket *sock, struct socket *newsock, bool kern);

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
int kcm_attach_ext_ioctl(struct kcm_sock *kcm,
			 const struct kcm_attach_ext *info);
int kcm_unattach_ioctl(struct kcm_sock *kcm, const struct kcm_unattach *info);
void kcm_mux_unattach_all(struct kcm_mux *mux);

/* How a psock reads or writes its TCP socket (kcm_psock_io()). */
enum kcm_io {
	KCM_IO_TCP,	/* plain TCP */
	KCM_IO_TLS,	/* through kTLS, which has keys for that direction */
	KCM_IO_WAIT,	/* kTLS is set up but has no keys for it yet */
};

int kcm_psock_io(struct kcm_psock *psock, bool tx);

/* kcm_strp.c: framing the stream of a psock */
void kcm_strp_init(struct kcm_psock *psock);
void kcm_psock_data_ready(struct sock *csk);
void kcm_strp_kick(struct kcm_psock *psock);
void kcm_strp_flush(struct kcm_psock *psock);

/* kcm_rx.c: delivery and reading */
void kcm_rx_deliver(struct kcm_psock *psock, struct sk_buff_head *msgs);
void __kcm_rx_unhold(struct kcm_mux *mux, struct sk_buff *skb);
void __kcm_mux_psock_gone(struct kcm_mux *mux, struct kcm_psock *psock);
void __kcm_rx_join(struct kcm_sock *kcm);
void __kcm_rx_enter(struct kcm_sock *kcm);
void __kcm_rx_steer_changed(struct kcm_mux *mux);
void __kcm_rx_remove(struct kcm_sock *kcm);
void kcm_rx_sock_join(struct kcm_sock *kcm);
void kcm_rx_sock_leave(struct kcm_sock *kcm);
void kcm_rx_set_disabled(struct kcm_sock *kcm, bool disable);
int kcm_recvmsg(struct socket *sock, struct msghdr *msg, size_t len,
		int flags);
void kcm_rx_sock_free(struct kcm_sock *kcm);
unsigned int kcm_rx_queued(struct sock *sk);
void kcm_mux_rx_init(struct kcm_mux *mux);
void kcm_mux_rx_purge(struct kcm_mux *mux);

/* kcm_parser.c: message parsers (the extended ones not in upstream) */
void kcm_parse_lock(struct kcm_psock *psock) __acquires(RCU);
int kcm_parse_lenfield(struct kcm_psock *psock, struct sk_buff *skb,
		       bool count);
void kcm_parse_unlock(struct kcm_psock *psock) __releases(RCU);
int kcm_parser_get(const struct kcm_attach_ext *info,
		   struct kcm_parser *parser, struct bpf_prog **prog);
void kcm_parser_put(const struct kcm_parser *parser, struct bpf_prog *prog);
int kcm_attach_ext_copy(struct kcm_attach_ext *info, const void __user *arg);
void kcm_ext_fprog(struct sock_fprog *fprog);
int kcm_bpf_get(int type, int bpf_fd, const struct sock_fprog *fprog,
		struct bpf_prog **prog);
void kcm_bpf_put(int type, struct bpf_prog *prog);
int kcm_field_set(struct kcm_parser *f, u8 kind, u32 offset, u32 width,
		  u32 byte_order);
bool kcm_field_read(const struct kcm_parser *f, const struct sk_buff *skb,
		    u64 *val);

/**
 * kcm_parse_locked() - the length of the message at the start of @skb
 * @psock: the psock whose parser runs
 * @skb: the framing buffer or the view: the message starts at offset 0
 * @count: count a length the built-in parser rejects in the psock's
 *	stats; false for a try whose error the framing buffer judges again
 *
 * Context: TCP socket lock held, in kcm_parse_lock()'s section.
 * Return: the whole message length, 0 for "need more bytes", or a
 * negative number (an error).
 */
static inline int kcm_parse_locked(struct kcm_psock *psock,
				   struct sk_buff *skb, bool count)
{
	if (psock->parser.kind == KCM_PARSER_LENFIELD)
		return kcm_parse_lenfield(psock, skb, count);
	return (int)bpf_prog_run(psock->prog, skb);
}

/* kcm_steer.c: steering messages to KCM sockets by key (not in upstream) */
u32 __kcm_steer_key(struct kcm_psock *psock, struct sk_buff *skb,
		    unsigned int len);
int kcm_steer_setsockopt(struct kcm_sock *kcm, sockptr_t optval,
			 unsigned int optlen);
int kcm_steer_getsockopt(struct kcm_sock *kcm, char __user *optval,
			 int __user *optlen);
void kcm_steer_sock_init(struct kcm_sock *kcm);
bool __kcm_steer_join(struct kcm_sock *kcm);
void __kcm_steer_leave(struct kcm_sock *kcm);
struct kcm_sock *__kcm_steer_owner(struct kcm_mux *mux, u32 key);
int __kcm_steer_sort(struct kcm_mux *mux, struct sk_buff *skb,
		     struct list_head *owners, struct kcm_steer_part *rest);
void kcm_steer_part_init(struct kcm_steer_part *part);
const char *kcm_steer_kind(struct kcm_mux *mux);
void kcm_steer_mux_free(struct kcm_mux *mux);

/**
 * kcm_steer_key() - the steering key of a whole message
 * @psock: the psock that framed it
 * @skb: the message at offset 0; bytes after it (skb->len past @len) are
 *	hidden from the key function
 * @len: the message's length
 *
 * Context: the TCP socket's lock held (framing).
 * Return: the key, KCM_NO_KEY when the mux has no key function.
 */
static inline u32 kcm_steer_key(struct kcm_psock *psock, struct sk_buff *skb,
				unsigned int len)
{
	if (likely(!rcu_access_pointer(psock->mux->steer.fn)))
		return KCM_NO_KEY;
	return __kcm_steer_key(psock, skb, len);
}

/* kcm_tls.c: attached sockets and kernel TLS */
int kcm_tls_io(const struct sock *csk, bool tx);
int kcm_tls_attach_check(struct sock *csk);
void kcm_tls_hook_callbacks(struct kcm_psock *psock);
void kcm_tls_restore_callbacks(struct kcm_psock *psock);
int kcm_tls_read_sock(struct sock *csk, read_descriptor_t *desc,
		      sk_read_actor_t actor);
int kcm_tls_send_pages(struct sock *csk, struct bio_vec *bv, unsigned int nr,
		       size_t len, int flags);

/* kcm_conn.c: per-connection addressing (not in upstream) */
struct kcm_psock *__kcm_mux_psock_by_id(struct kcm_mux *mux, u32 id);
int __kcm_conn_tx_errno(const struct kcm_psock *psock);
void kcm_conn_rx_cmsg(struct kcm_sock *kcm, struct msghdr *msg,
		      struct sk_buff *skb);
int kcm_conn_tx_cmsg(struct kcm_sock *kcm, struct msghdr *msg,
		     struct kcm_tx_msg *to);
void kcm_conn_tx_set(struct kcm_sock *kcm, const struct kcm_tx_msg *to);

/* Counters are written by one context at a time and read by /proc. */
static inline void kcm_stat_add(u64 *ctr, u64 n)
{
	WRITE_ONCE(*ctr, *ctr + n);
}

/* kcm_tx.c: reserving psocks, building and writing messages */
void kcm_sock_tx_init(struct kcm_sock *kcm);
void kcm_psock_tx_init(struct kcm_psock *psock);
void __kcm_tx_psock_ready(struct kcm_mux *mux, struct kcm_psock *psock);
void kcm_psock_tx_detach(struct kcm_psock *psock);
void kcm_psock_write_space(struct sock *csk);
void kcm_psock_state_change(struct sock *csk);
void kcm_tx_sock_leave(struct kcm_sock *kcm);
void kcm_tx_sock_flush_work(struct kcm_sock *kcm);
int kcm_sendmsg(struct socket *sock, struct msghdr *msg, size_t len);
int kcm_tx_sendmsg(struct socket *sock, struct msghdr *msg, size_t len,
		   bool splice);

/* kcm_mem.c: memory accounting */
void kcm_mem_proto_init(struct proto *prot);
int kcm_mem_sysctl_register(void);
void kcm_mem_sysctl_unregister(void);
long kcm_mem_pages(void);
bool kcm_mem_rx_charge(struct sock *sk, struct sk_buff *skb);
bool kcm_mem_tx_charge(struct sock *sk, unsigned int size);
void kcm_mem_tx_uncharge(struct sock *sk, unsigned int size);
void kcm_mem_tx_own(struct sock *sk, struct sk_buff *skb);
void kcm_mem_sock_release(struct sock *sk);
void kcm_mem_sock_destruct(struct sock *sk);
bool kcm_mem_psock_sync(struct kcm_psock *psock, unsigned int held);
bool kcm_mem_reclaim(struct sock *sk, unsigned int size);

/* kcmproc.c: /proc/net/kcm, /proc/net/kcm_stats and /proc/net/kcm_ext */
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
