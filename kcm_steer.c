// SPDX-License-Identifier: GPL-2.0-only
/*
 * Kernel Connection Multiplexor: steering messages to KCM sockets by a
 * key (KCM_RECV_KEY; not in upstream Linux).
 *
 * Key function
 * ------------
 * A mux may have a key function, set from any of its KCM sockets: an eBPF
 * or classic BPF socket filter program or a built-in key field, loaded,
 * checked and read by the helpers of the parsers (kcm_parser.c), or the
 * connection id.  Framing runs it once per whole message, where it runs
 * the parser: on the message at offset 0, skb->len its length
 * (kcm_steer_key()).  The key travels with the message, in
 * kcm_rx_msg.key, or for a pack whose messages have different keys in an
 * array after their lengths (kcm_rx_key_at()).  The function is replaced
 * under the mux lock and freed after an RCU grace period; messages framed
 * before keep the keys they were given.
 *
 * Key to socket
 * -------------
 * A key hashes (salted per mux) to one of KCM_STEER_SLOTS slots, and a
 * slot belongs to the member with the highest weight, a hash of the slot
 * and the socket's index: rendezvous hashing.  Members are the mux's KCM
 * sockets with receiving enabled.  When one leaves, only its slots move,
 * each to the member that now weighs most; one that joins takes exactly
 * the slots where it now weighs most, from whoever had them.  The owner
 * of every slot is kept in mux->steer.map, so a lookup is a hash and a
 * load.
 *
 * Delivery (kcm_rx.c) hands a message with a key to the owner of the key
 * or holds it for it; __kcm_steer_sort() first cuts a pack whose messages
 * have different owners into packs of one owner each, copying the bytes.
 *
 * Invariants, under the mux lock: steer.map is set exactly while steer.fn
 * is; a map entry is NULL only while there is no member; a socket owns
 * slots (kcm_steer_sock.slots) only while it is a member; the parts of
 * struct kcm_steer_sock are empty outside __kcm_steer_sort()'s caller.
 */

#include <linux/bpf.h>
#include <linux/filter.h>
#include <linux/jhash.h>
#include <linux/random.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/sockptr.h>
#include <linux/uaccess.h>
#include <net/sock.h>
#include <net/kcm.h>
#include <trace/events/kcm.h>

#include "kcm_compat.h"

/* Most bytes of a pack cut by owner: data, lengths and keys. */
#define KCM_STEER_PART_MAX	(16 * 1024)

/* ---- keys ------------------------------------------------------------ */

/* Context: any.  A field's value folded into a key. */
static u32 kcm_steer_fold(u64 val)
{
	return (u32)val ^ (u32)(val >> 32);
}

/*
 * The key @fn gives the message @skb framed by @psock, exactly the bytes
 * of the message (skb->len).
 *
 * Context: RCU read side; the TCP socket's lock held.
 */
static u32 kcm_steer_run(const struct kcm_steer_fn *fn,
			 const struct kcm_psock *psock,
			 const struct sk_buff *skb)
{
	u64 val;

	switch (fn->f.kind) {
	case KCM_KEY_CONN:
		return psock->index;
	case KCM_KEY_FIELD:
		if (!kcm_field_read(&fn->f, skb, &val))
			return KCM_NO_KEY;
		return kcm_steer_fold(val);
	default:
		return bpf_prog_run_pin_on_cpu(fn->prog, skb);
	}
}

/**
 * __kcm_steer_key() - run the mux's key function on a whole message
 * @psock: the psock that framed it
 * @skb: the message at offset 0, perhaps with bytes after it
 * @len: the message's length
 *
 * The bytes after the message (a framing buffer or view holds what came
 * after it too) are hidden while the function runs: skb->len is @len.
 *
 * Context: the TCP socket's lock held (framing).
 * Return: the key, or KCM_NO_KEY.
 */
u32 __kcm_steer_key(struct kcm_psock *psock, struct sk_buff *skb,
		    unsigned int len)
{
	unsigned int olen = skb->len, odata = skb->data_len;
	unsigned int head = skb_headlen(skb);
	const struct kcm_steer_fn *fn;
	u32 key = KCM_NO_KEY;

	rcu_read_lock();
	fn = rcu_dereference(psock->mux->steer.fn);
	if (fn) {
		if (len < olen) {
			skb->len = len;
			skb->data_len = len > head ? len - head : 0;
		}
		key = kcm_steer_run(fn, psock, skb);
		skb->len = olen;
		skb->data_len = odata;
	}
	rcu_read_unlock();
	return key;
}

/* ---- the map of slots ------------------------------------------------ */

/* Context: any.  The slot @key hashes to in a mux salted with @salt. */
static u32 kcm_steer_slot(u32 key, u32 salt)
{
	return jhash_1word(key, salt) & (KCM_STEER_SLOTS - 1);
}

/* Context: any.  Does socket @a weigh more than @b (or NULL) for @slot? */
static bool kcm_steer_beats(const struct kcm_sock *a,
			    const struct kcm_sock *b, u32 slot, u32 salt)
{
	u32 wa, wb;

	if (!b)
		return true;
	wa = jhash_2words(slot, a->index, salt);
	wb = jhash_2words(slot, b->index, salt);
	return wa > wb || (wa == wb && a->index > b->index);
}

/* Context: mux->lock held.  @kcm owns @slot from now on. */
static void __kcm_steer_assign(struct kcm_mux *mux, u32 slot,
			       struct kcm_sock *kcm)
{
	struct kcm_sock *old = mux->steer.map[slot];

	lockdep_assert_held(&mux->lock);
	if (old)
		old->steer.slots--;
	if (kcm)
		kcm->steer.slots++;
	mux->steer.map[slot] = kcm;
}

/* Context: mux->lock held.  The member that weighs most for @slot. */
static struct kcm_sock *__kcm_steer_best(struct kcm_mux *mux, u32 slot)
{
	struct kcm_sock *kcm, *best = NULL;

	lockdep_assert_held(&mux->lock);
	list_for_each_entry(kcm, &mux->socks, mux_node) {
		if (kcm->steer.member &&
		    kcm_steer_beats(kcm, best, slot, mux->steer.salt))
			best = kcm;
	}
	return best;
}

/*
 * Member @kcm takes the slots where it weighs most.
 *
 * Context: mux->lock held; the map exists.
 * Return: how many it took from other members.
 */
static unsigned int __kcm_steer_map_add(struct kcm_mux *mux,
					struct kcm_sock *kcm)
{
	struct kcm_sock *old;
	unsigned int s, moved = 0;

	lockdep_assert_held(&mux->lock);
	for (s = 0; s < KCM_STEER_SLOTS; s++) {
		old = mux->steer.map[s];
		if (!kcm_steer_beats(kcm, old, s, mux->steer.salt))
			continue;
		if (old)
			moved++;
		__kcm_steer_assign(mux, s, kcm);
	}
	return moved;
}

/*
 * The slots of @kcm, no longer a member, go to the members that now weigh
 * most (none left: nobody owns them).
 *
 * Context: mux->lock held; the map exists.
 * Return: how many went to another member.
 */
static unsigned int __kcm_steer_map_del(struct kcm_mux *mux,
					struct kcm_sock *kcm)
{
	struct kcm_sock *best;
	unsigned int s, moved = 0;

	lockdep_assert_held(&mux->lock);
	for (s = 0; s < KCM_STEER_SLOTS && kcm->steer.slots; s++) {
		if (mux->steer.map[s] != kcm)
			continue;
		best = __kcm_steer_best(mux, s);
		if (best)
			moved++;
		__kcm_steer_assign(mux, s, best);
	}
	return moved;
}

/*
 * @kcm becomes a member (@join) or stops being one: it takes its slots
 * from the others, or gives them to them.
 *
 * Context: mux->lock held.
 * Return: the slots that changed owner.
 */
static unsigned int __kcm_steer_member(struct kcm_sock *kcm, bool join)
{
	struct kcm_mux *mux = kcm->mux;
	unsigned int moved;

	lockdep_assert_held(&mux->lock);
	if (kcm->steer.member == join)
		return 0;
	kcm->steer.member = join;
	mux->steer.members += join ? 1 : -1;
	if (!mux->steer.map)
		return 0;
	moved = join ? __kcm_steer_map_add(mux, kcm) :
		       __kcm_steer_map_del(mux, kcm);
	kcm_stat_add(&mux->mstats.steer_remaps, moved);
	trace_kcm_steer_member(kcm, join, moved);
	return moved;
}

/**
 * __kcm_steer_join() - a socket starts receiving: it becomes a member
 * @kcm: a socket of its mux without KCM_RECV_DISABLE
 *
 * Context: mux->lock held.
 * Return: true when it took slots from other members: messages held for
 * them may be its now (__kcm_rx_steer_changed()).
 */
bool __kcm_steer_join(struct kcm_sock *kcm)
{
	return __kcm_steer_member(kcm, true);
}

/**
 * __kcm_steer_leave() - a socket stops receiving (closed, or
 *	KCM_RECV_DISABLE): its keys go to the other members
 * @kcm: a socket of its mux
 *
 * Its queued and held messages are the caller's to give back.
 *
 * Context: mux->lock held.
 */
void __kcm_steer_leave(struct kcm_sock *kcm)
{
	__kcm_steer_member(kcm, false);
}

/**
 * __kcm_steer_owner() - the socket that owns a key
 * @mux: the mux
 * @key: a steering key
 *
 * Context: mux->lock held.
 * Return: the owner; NULL for KCM_NO_KEY, without a map or a member.
 */
struct kcm_sock *__kcm_steer_owner(struct kcm_mux *mux, u32 key)
{
	lockdep_assert_held(&mux->lock);
	if (key == KCM_NO_KEY || !mux->steer.map)
		return NULL;
	return mux->steer.map[kcm_steer_slot(key, mux->steer.salt)];
}

/*
 * The map was made or went: with one, every member takes its slots;
 * without, nobody owns any.
 *
 * Context: mux->lock held.
 */
static void __kcm_steer_map_fill(struct kcm_mux *mux)
{
	struct kcm_sock *kcm;

	lockdep_assert_held(&mux->lock);
	list_for_each_entry(kcm, &mux->socks, mux_node)
		kcm->steer.slots = 0;
	if (!mux->steer.map)
		return;
	list_for_each_entry(kcm, &mux->socks, mux_node)
		if (kcm->steer.member)
			__kcm_steer_map_add(mux, kcm);
}

/* ---- cutting packs by owner ------------------------------------------ */

/**
 * kcm_steer_part_init() - an empty part (struct kcm_steer_part)
 * @part: a socket's, or a caller's for messages without an owner
 *
 * Context: any.
 */
void kcm_steer_part_init(struct kcm_steer_part *part)
{
	__skb_queue_head_init(&part->skbs);
	part->n = 0;
	part->bytes = 0;
	INIT_LIST_HEAD(&part->node);
}

/*
 * The part the messages of @key go to: their owner's, which joins
 * @owners with its first message, or @rest.
 *
 * Context: mux->lock held.
 */
static struct kcm_steer_part *__kcm_steer_part_of(struct kcm_mux *mux,
						  u32 key,
						  struct list_head *owners,
						  struct kcm_steer_part *rest)
{
	struct kcm_sock *kcm = __kcm_steer_owner(mux, key);

	lockdep_assert_held(&mux->lock);
	if (!kcm)
		return rest;
	if (list_empty(&kcm->steer.part.node))
		list_add_tail(&kcm->steer.part.node, owners);
	return &kcm->steer.part;
}

/* Context: any.  Bytes before the data of a cut pack of @n messages. */
static unsigned int kcm_steer_part_head(unsigned int n)
{
	return ALIGN(n * sizeof(u16), sizeof(u32)) + n * sizeof(u32);
}

/*
 * A new empty pack for the next messages of @part, from connection
 * @conn_id: room for as many of them as KCM_STEER_PART_MAX allows, their
 * lengths and keys in its headroom.
 *
 * Context: mux->lock held (the mux's fragment cache); atomic allocation.
 * Return: the skb, on @part->skbs, or NULL.
 */
static struct sk_buff *__kcm_steer_part_new(struct kcm_mux *mux,
					    struct kcm_steer_part *part,
					    u32 conn_id)
{
	unsigned int n = min_t(unsigned int, part->n, KCM_RX_PACK_MAX);
	unsigned int head = kcm_steer_part_head(n);
	unsigned int size = head + min(part->bytes, KCM_STEER_PART_MAX - head);
	struct kcm_rx_msg *rxm;
	struct sk_buff *skb;

	lockdep_assert_held(&mux->lock);
	skb = kcm_frag_skb(&mux->steer.frag, size, GFP_ATOMIC | __GFP_NOWARN);
	if (!skb)
		skb = alloc_skb(size, GFP_ATOMIC | __GFP_NOWARN);
	if (!skb)
		return NULL;
	skb_reserve(skb, head);
	rxm = kcm_rx_msg(skb);
	memset(rxm, 0, sizeof(*rxm));
	rxm->conn_id = conn_id;
	rxm->pack = true;
	rxm->keys_off = ALIGN(n * sizeof(u16), sizeof(u32));
	__skb_queue_tail(&part->skbs, skb);
	return skb;
}

/* Context: any.  Can the pack being cut, @skb, take @len bytes more? */
static bool kcm_steer_part_room(const struct sk_buff *skb, unsigned int len)
{
	const struct kcm_rx_msg *rxm = (const struct kcm_rx_msg *)skb->cb;
	/* Its headroom is its lengths and keys: room for that many. */
	unsigned int n = (skb_headroom(skb) - rxm->keys_off) / sizeof(u32);

	return rxm->nmsgs < n && skb_tailroom(skb) >= len;
}

/*
 * Copy message @idx of @src (at @pos, @len bytes) into the last pack of
 * @part, or a new one when that is full.
 *
 * Context: mux->lock held.
 * Return: 0 or -ENOMEM.
 */
static int __kcm_steer_part_add(struct kcm_mux *mux,
				struct kcm_steer_part *part,
				struct sk_buff *src, unsigned int idx,
				unsigned int pos, unsigned int len)
{
	struct sk_buff *skb = skb_peek_tail(&part->skbs);
	struct kcm_rx_msg *rxm;

	lockdep_assert_held(&mux->lock);
	if (!skb || !kcm_steer_part_room(skb, len)) {
		skb = __kcm_steer_part_new(mux, part, kcm_rx_msg(src)->conn_id);
		if (!skb)
			return -ENOMEM;
	}
	rxm = kcm_rx_msg(skb);
	kcm_pack_lens(skb)[rxm->nmsgs] = len;
	((u32 *)(skb->head + rxm->keys_off))[rxm->nmsgs] =
		kcm_rx_key_at(src, idx);
	rxm->nmsgs++;
	WARN_ON_ONCE(skb_copy_bits(src, pos, skb_put(skb, len), len));
	part->n--;
	part->bytes -= len;
	return 0;
}

/*
 * The packs of @rest hold messages without an owner: they have no key
 * any more.
 *
 * Context: mux->lock held.
 */
static void __kcm_steer_rest_seal(struct kcm_steer_part *rest)
{
	struct sk_buff *skb;

	skb_queue_walk(&rest->skbs, skb) {
		kcm_rx_msg(skb)->keys_off = 0;
		kcm_rx_msg(skb)->key = KCM_NO_KEY;
	}
}

/* Context: mux->lock held.  Undo: every part emptied, @owners too. */
static void __kcm_steer_parts_drop(struct list_head *owners,
				   struct kcm_steer_part *rest)
{
	struct kcm_sock *kcm, *tmp;

	list_for_each_entry_safe(kcm, tmp, owners, steer.part.node) {
		__skb_queue_purge(&kcm->steer.part.skbs);
		kcm_steer_part_init(&kcm->steer.part);
	}
	INIT_LIST_HEAD(owners);
	__skb_queue_purge(&rest->skbs);
	kcm_steer_part_init(rest);
}

/*
 * Count the messages of @skb, from its current one on, in the parts of
 * their owners; put the parts with messages on @owners.
 *
 * Context: mux->lock held.
 * Return: the number of parts with messages (@rest included).
 */
static unsigned int __kcm_steer_tally(struct kcm_mux *mux, struct sk_buff *skb,
				      struct list_head *owners,
				      struct kcm_steer_part *rest)
{
	struct kcm_rx_msg *rxm = kcm_rx_msg(skb);
	unsigned int i, len, pos = rxm->pos, parts = 0;
	unsigned int end = rxm->next + kcm_rx_left(skb);
	struct kcm_steer_part *part;

	lockdep_assert_held(&mux->lock);
	for (i = rxm->next; i < end; i++) {
		part = __kcm_steer_part_of(mux, kcm_rx_key_at(skb, i), owners,
					   rest);
		len = kcm_rx_len_at(skb, i, pos);
		parts += !part->n;
		part->n++;
		part->bytes += len;
		pos += len;
	}
	return parts;
}

/*
 * Copy every message of @skb, from its current one on, to the part of its
 * owner (or @rest), as tallied by __kcm_steer_tally().
 *
 * Context: mux->lock held.
 * Return: 0 or -ENOMEM.
 */
static int __kcm_steer_copy(struct kcm_mux *mux, struct sk_buff *skb,
			    struct list_head *owners,
			    struct kcm_steer_part *rest)
{
	struct kcm_rx_msg *rxm = kcm_rx_msg(skb);
	unsigned int i, len, pos = rxm->pos;
	unsigned int end = rxm->next + kcm_rx_left(skb);
	struct kcm_steer_part *part;
	int err;

	lockdep_assert_held(&mux->lock);
	for (i = rxm->next; i < end; i++) {
		part = __kcm_steer_part_of(mux, kcm_rx_key_at(skb, i), owners,
					   rest);
		len = kcm_rx_len_at(skb, i, pos);
		err = __kcm_steer_part_add(mux, part, skb, i, pos, len);
		if (err)
			return err;
		pos += len;
	}
	return 0;
}

/*
 * All the messages of @skb go to one part: @skb itself becomes it.
 *
 * Context: mux->lock held.
 */
static void __kcm_steer_whole(struct list_head *owners,
			      struct kcm_steer_part *rest, struct sk_buff *skb)
{
	struct kcm_steer_part *part = rest;
	struct kcm_sock *kcm;

	if (!list_empty(owners)) {
		kcm = list_first_entry(owners, struct kcm_sock,
				       steer.part.node);
		part = &kcm->steer.part;
	}
	part->n = 0;
	part->bytes = 0;
	__skb_queue_tail(&part->skbs, skb);
	if (part == rest) {
		kcm_rx_msg(skb)->keys_off = 0;
		kcm_rx_msg(skb)->key = KCM_NO_KEY;
	}
}

/**
 * __kcm_steer_sort() - share out the messages of a received skb among the
 *	owners of their keys
 * @mux: the mux
 * @skb: one message or a pack, keyed, from its current message on; on no
 *	queue, charged to no socket
 * @owners: an empty list; the sockets with messages join it (through
 *	kcm_steer_sock.part.node), their messages on part.skbs, in order
 * @rest: an empty part; messages with no owner (no key, or no member)
 *	go there, without keys
 *
 * When all the messages have one owner (or none), @skb itself goes to it.
 * Otherwise each part gets new packs with copies of its messages and
 * @skb is freed.
 *
 * Context: mux->lock held; atomic allocations.
 * Return: 0, or -ENOMEM with @skb and the parts as they were.
 */
int __kcm_steer_sort(struct kcm_mux *mux, struct sk_buff *skb,
		     struct list_head *owners, struct kcm_steer_part *rest)
{
	lockdep_assert_held(&mux->lock);
	if (!kcm_rx_msg(skb)->keys_off) {
		__kcm_steer_part_of(mux, kcm_rx_msg(skb)->key, owners, rest);
		__kcm_steer_whole(owners, rest, skb);
		return 0;
	}
	if (__kcm_steer_tally(mux, skb, owners, rest) == 1) {
		__kcm_steer_whole(owners, rest, skb);
		return 0;
	}
	if (__kcm_steer_copy(mux, skb, owners, rest)) {
		__kcm_steer_parts_drop(owners, rest);
		return -ENOMEM;
	}
	__kcm_steer_rest_seal(rest);
	consume_skb(skb);
	return 0;
}

/* ---- KCM_RECV_KEY ---------------------------------------------------- */

/* Context: process context.  Frees a key function nothing runs any more. */
static void kcm_steer_fn_free(struct kcm_steer_fn *fn)
{
	if (!fn)
		return;
	kcm_bpf_put(fn->f.kind, fn->prog);
	kfree(fn);
}

/*
 * The key function @info asks for, NULL for KCM_KEY_OFF.
 *
 * Context: process context, may sleep.
 * Return: 0, or the errno of a bad request (see kcm_steer_setsockopt()).
 */
static int kcm_steer_fn_get(const struct kcm_recv_key *info,
			    struct kcm_steer_fn **fnp)
{
	const struct kcm_keyfield *kf = &info->field;
	struct kcm_steer_fn *fn;
	int err = 0;

	*fnp = NULL;
	if (info->reserved)
		return -EINVAL;
	/* Without parameters, the union is zero: it may mean more later. */
	if ((info->key_type == KCM_KEY_OFF || info->key_type == KCM_KEY_CONN) &&
	    memchr_inv(&info->fprog, 0,
		       sizeof(*info) - offsetof(struct kcm_recv_key, fprog)))
		return -EINVAL;
	if (info->key_type == KCM_KEY_OFF)
		return 0;
	fn = kzalloc(sizeof(*fn), GFP_KERNEL_ACCOUNT);
	if (!fn)
		return -ENOMEM;
	switch (info->key_type) {
	case KCM_BPF_TYPE_FD:
	case KCM_BPF_TYPE_PROG:
		fn->f.kind = info->key_type;
		err = kcm_bpf_get(info->key_type, info->bpf_fd, &info->fprog,
				  &fn->prog);
		break;
	case KCM_KEY_FIELD:
		err = kf->reserved ? -EINVAL :
		      kcm_field_set(&fn->f, KCM_KEY_FIELD, kf->offset,
				    kf->width, kf->byte_order);
		break;
	case KCM_KEY_CONN:
		fn->f.kind = KCM_KEY_CONN;
		break;
	default:
		err = -EINVAL;
	}
	if (err) {
		kcm_steer_fn_free(fn);
		return err;
	}
	*fnp = fn;
	return 0;
}

/*
 * Put @fn in force on @mux; with a function, the map is built from
 * @map (which the caller frees when it comes back unused), without one
 * the map goes (and is returned for the caller to free) and what was held
 * for the sockets is handed out in turn.
 *
 * Context: mux->lock held.
 * Return: the function replaced, for the caller to free after a grace
 * period.
 */
static struct kcm_steer_fn *__kcm_steer_set(struct kcm_mux *mux,
					    struct kcm_steer_fn *fn,
					    struct kcm_sock ***map)
{
	struct kcm_steer_fn *old;
	struct kcm_sock **spare = *map;

	lockdep_assert_held(&mux->lock);
	old = rcu_replace_pointer(mux->steer.fn, fn,
				  lockdep_is_held(&mux->lock));
	*map = NULL;
	if (fn && !mux->steer.map) {
		mux->steer.map = spare;
		mux->steer.salt = get_random_u32();
		__kcm_steer_map_fill(mux);
	} else if (!fn && mux->steer.map) {
		*map = mux->steer.map;
		mux->steer.map = NULL;
		__kcm_steer_map_fill(mux);
		__kcm_rx_steer_changed(mux);
		kcm_frag_cache_drain(&mux->steer.frag);
	} else {
		*map = spare;
	}
	return old;
}

/**
 * kcm_steer_setsockopt() - KCM_RECV_KEY: set or remove the mux's key
 *	function
 * @kcm: any KCM socket of the mux
 * @optval: a struct kcm_recv_key
 * @optlen: its size; at least sizeof(struct kcm_recv_key)
 *
 * Messages framed from now on get keys from the new function; those
 * framed before keep theirs.  Removing the function hands what was held
 * for each socket to the rotation.
 *
 * Context: process context, may sleep.
 * Return: 0; -EINVAL for a short value, an unknown key_type, reserved
 * fields that are not 0, bad field parameters or a classic program the
 * checker refuses; -EBADF or -EINVAL for a bad eBPF program (not open,
 * not a socket filter); -EFAULT; -ENOMEM.
 */
int kcm_steer_setsockopt(struct kcm_sock *kcm, sockptr_t optval,
			 unsigned int optlen)
{
	struct kcm_mux *mux = kcm->mux;
	struct kcm_sock **map = NULL;
	struct kcm_steer_fn *fn, *old;
	struct kcm_recv_key info;
	int err;

	if (optlen < sizeof(info))
		return -EINVAL;
	if (copy_from_sockptr(&info, optval, sizeof(info)))
		return -EFAULT;
	if (info.key_type == KCM_BPF_TYPE_PROG)
		kcm_ext_fprog(&info.fprog);
	err = kcm_steer_fn_get(&info, &fn);
	if (err)
		return err;
	if (fn) {
		map = kvcalloc(KCM_STEER_SLOTS, sizeof(*map),
			       GFP_KERNEL_ACCOUNT);
		if (!map) {
			kcm_steer_fn_free(fn);
			return -ENOMEM;
		}
	}

	spin_lock_bh(&mux->lock);
	old = __kcm_steer_set(mux, fn, &map);
	trace_kcm_steer_set(mux, fn ? fn->f.kind : KCM_KEY_OFF);
	spin_unlock_bh(&mux->lock);

	kvfree(map);
	if (old) {
		/* Framing may be running it. */
		synchronize_rcu();
		kcm_steer_fn_free(old);
	}
	return 0;
}

/**
 * kcm_steer_getsockopt() - KCM_RECV_KEY: the key function in force
 * @kcm: any KCM socket of the mux
 * @optval: a struct kcm_recv_key: key_type, and the field of a
 *	KCM_KEY_FIELD; the rest is 0
 * @optlen: its size; a shorter one gets that many bytes
 *
 * Context: process context.
 * Return: 0, -EINVAL for a negative length, or -EFAULT.
 */
int kcm_steer_getsockopt(struct kcm_sock *kcm, char __user *optval,
			 int __user *optlen)
{
	const struct kcm_steer_fn *fn;
	struct kcm_recv_key info;
	int len;

	if (get_user(len, optlen))
		return -EFAULT;
	if (len < 0)
		return -EINVAL;

	memset(&info, 0, sizeof(info));
	rcu_read_lock();
	fn = rcu_dereference(kcm->mux->steer.fn);
	if (fn) {
		info.key_type = fn->f.kind;
		if (fn->f.kind == KCM_KEY_FIELD) {
			info.field.offset = fn->f.offset;
			info.field.width = fn->f.width;
			info.field.byte_order = fn->f.le ? KCM_LENFIELD_LE :
						KCM_LENFIELD_BE;
		}
	}
	rcu_read_unlock();

	len = min_t(int, len, sizeof(info));
	if (put_user(len, optlen) || copy_to_user(optval, &info, len))
		return -EFAULT;
	return 0;
}

/**
 * kcm_steer_kind() - the kind of key function, for /proc/net/kcm_ext
 * @mux: the mux
 *
 * Context: mux->lock held.
 * Return: "off", "bpf", "cbpf", "field" or "conn".
 */
const char *kcm_steer_kind(struct kcm_mux *mux)
{
	const struct kcm_steer_fn *fn;

	fn = rcu_dereference_protected(mux->steer.fn,
				       lockdep_is_held(&mux->lock));
	if (!fn)
		return "off";
	switch (fn->f.kind) {
	case KCM_BPF_TYPE_FD:
		return "bpf";
	case KCM_BPF_TYPE_PROG:
		return "cbpf";
	case KCM_KEY_FIELD:
		return "field";
	default:
		return "conn";
	}
}

/**
 * kcm_steer_sock_init() - the steering state of a new KCM socket
 * @kcm: a socket that belongs to no mux yet
 *
 * Context: any.
 */
void kcm_steer_sock_init(struct kcm_sock *kcm)
{
	__skb_queue_head_init(&kcm->steer.hold);
	kcm_steer_part_init(&kcm->steer.part);
}

/**
 * kcm_steer_mux_free() - free the steering state of a dying mux
 * @mux: a mux without KCM sockets or psocks: nothing frames, nothing
 *	delivers
 *
 * Context: process context.
 */
void kcm_steer_mux_free(struct kcm_mux *mux)
{
	struct kcm_steer_fn *fn;

	fn = rcu_dereference_protected(mux->steer.fn, !mux->nsocks);
	RCU_INIT_POINTER(mux->steer.fn, NULL);
	kcm_steer_fn_free(fn);
	kvfree(mux->steer.map);
	mux->steer.map = NULL;
	kcm_frag_cache_drain(&mux->steer.frag);
}

#if IS_ENABLED(CONFIG_AF_KCM_KUNIT_TEST)
#include "kcm_steer_test.c"
#endif
