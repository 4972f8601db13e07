// SPDX-License-Identifier: GPL-2.0
/*
 * kcmperf -m steer: messages that carry a key, each key's messages to one
 * worker.  N connections feed M workers as in -m rx, but every message
 * carries one of STEER_KEYS keys, changing from message to message, and
 * all the messages of a key must reach one worker, in order:
 *
 *   kcm   one mux whose key function (KCM_RECV_KEY, the built-in key
 *         field: the key byte of the header) steers each message to the
 *         KCM socket that owns its key; the readers of -m rx (-G: our
 *         batched receive).
 *   user  the user-space framer of -m rx, whose I/O thread hands each
 *         message to the worker its key hashes to (and waits for that
 *         worker when it is full) instead of the next one in turn.
 *
 * A message's source is its connection and its key: src = conn << 8 |
 * key, so that on a little-endian host the key is byte 4 of the message.
 * The senders are those of -m rx; message g of connection c (its
 * sequence number) has key (17 g + c) % STEER_KEYS, so a key comes back
 * every STEER_KEYS messages.  A worker checks, beyond what msg_check()
 * checks, that each of its sources' messages come every STEER_KEYS
 * numbers with none missing, and that no other worker had that key.
 */
#define _GNU_SOURCE
#include <linux/kcm.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "kcmperf.h"

#define STEER_KEYS	64
#define STEER_MUL	17	/* odd: message g's key runs through them all */
#define STEER_INV	49	/* STEER_MUL * STEER_INV % STEER_KEYS == 1 */

/* The checker (worker) that has had each key; 0 for none yet. */
static atomic_uintptr_t owner[STEER_KEYS];

static bool steering(void)
{
	return opt.mode == MODE_STEER;
}

/* The key of message @seq of connection @conn. */
static uint32_t steer_key(uint32_t conn, uint64_t seq)
{
	return (seq * STEER_MUL + conn) % STEER_KEYS;
}

/* The first message of connection @conn with key @key. */
static uint64_t steer_first(uint32_t conn, uint32_t key)
{
	return (uint64_t)(key + STEER_KEYS - conn % STEER_KEYS) * STEER_INV %
	       STEER_KEYS;
}

/**
 * steer_src() - the source field of message @i of sender @src's buffer
 * @src: the sender (connection)
 * @i: the message's place in the buffer, its sequence number at first
 *
 * With -m steer, the connection and the message's key; else @src.
 */
uint32_t steer_src(uint32_t src, unsigned int i)
{
	return steering() ? src << 8 | steer_key(src, i) : src;
}

/**
 * steer_worker() - user framer: the worker of @msg's key
 * @msg: a whole message
 *
 * The dispatcher's hash of the key, as an application would write it.
 */
int steer_worker(const char *msg)
{
	uint32_t key = (unsigned char)msg[4];

	return (key * 2654435761u >> 16) % opt.kcms;
}

/*
 * Checks what msg_check() does not: the message is the next of its key
 * on its connection, and this worker owns the key.
 */
static long steer_check(struct checker *ck, const char *p, size_t n)
{
	uintptr_t none = 0, me = (uintptr_t)ck;
	uint32_t src, conn, key;
	uint64_t seq, want;
	long r;

	if (n < HDR)
		return msg_check(ck, p, n, 0);
	memcpy(&src, p + 4, 4);
	memcpy(&seq, p + 8, 8);
	conn = src >> 8;
	key = src & 0xff;
	if (conn >= (uint32_t)opt.conns || key != steer_key(conn, seq)) {
		show_bad(ck, p, n, "key does not match the message");
		return -1;
	}
	want = ck->next[src] ? ck->next[src] - 1 + STEER_KEYS :
	       steer_first(conn, key);
	if (seq != want) {
		show_bad(ck, p, n, "a message of its key is missing");
		return -1;
	}
	r = msg_check(ck, p, n, 0);
	if (r < 0)
		return r;
	if (!atomic_compare_exchange_strong(&owner[key], &none, me) &&
	    none != me) {
		show_bad(ck, p, n, "key already at another worker");
		return -1;
	}
	return r;
}

/**
 * rx_check() - check a message received by a worker
 * @ck: the worker's checker (rx_checker())
 * @p: the message
 * @n: its length
 *
 * Return: its source, or -1 when it is bad.
 */
long rx_check(struct checker *ck, const char *p, size_t n)
{
	return steering() ? steer_check(ck, p, n) : msg_check(ck, p, n, 0);
}

/**
 * rx_checker() - the checker of a worker that receives from the senders
 * @fmt: its name, with @i
 * @i: its number
 *
 * Return: a checker of every source the senders have.
 */
struct checker *rx_checker(const char *fmt, int i)
{
	return checker_new(steering() ? opt.conns << 8 : opt.conns, fmt, i);
}

/* The mux steers by the key byte of the header. */
static void steer_by_key(int kcm)
{
	struct kcm_recv_key k = { .key_type = KCM_KEY_FIELD };

	k.field.offset = 4;
	k.field.width = 1;
	k.field.byte_order = KCM_LENFIELD_BE;
	if (setsockopt(kcm, SOL_KCM, KCM_RECV_KEY, &k, sizeof(k)))
		die_errno("setsockopt(KCM_RECV_KEY)");
}

static void setup_steer(void)
{
	long i;

	if (opt.impl == IMPL_RAW || opt.uring)
		die("-m steer: -i kcm or user, and not with -U");
	/* A sender's buffer comes back with the same keys. */
	per_buf -= per_buf % STEER_KEYS;
	if (!per_buf)
		per_buf = STEER_KEYS;
	for (i = 0; i < STEER_KEYS; i++)
		atomic_store(&owner[i], 0);
	setup_receivers();
	if (opt.impl == IMPL_KCM)
		steer_by_key(kfd[0]);
	for (i = 0; i < opt.conns; i++)
		spawn(stream_sender, (void *)i);
	n_tx = opt.conns;
}

const struct perf_mode mode_steer = {
	.name = "steer",
	.setup = setup_steer,
	.report = report_stream,
};
