/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * Kernel Connection Multiplexor (AF_KCM): user API.
 *
 * Byte-compatible with the <linux/kcm.h> that Linux has shipped since 4.6:
 * the same structures, option names and ioctl numbers.  Extensions of this
 * implementation are appended below the upstream items and never change
 * them.
 */
#ifndef _UAPI_LINUX_KCM_H
#define _UAPI_LINUX_KCM_H

#include <linux/types.h>
#include <linux/filter.h>
#include <linux/sockios.h>

/**
 * struct kcm_attach - argument of SIOCKCMATTACH
 * @fd: a connected TCP socket to attach to the multiplexor
 * @bpf_fd: an eBPF BPF_PROG_TYPE_SOCKET_FILTER program that returns the
 *	length of the message at the start of the data it is given
 */
struct kcm_attach {
	int fd;
	int bpf_fd;
};

/**
 * struct kcm_unattach - argument of SIOCKCMUNATTACH
 * @fd: the attached TCP socket to give back
 */
struct kcm_unattach {
	int fd;
};

/**
 * struct kcm_clone - argument of SIOCKCMCLONE
 * @fd: on return, the new KCM socket on the same multiplexor
 */
struct kcm_clone {
	int fd;
};

#define SIOCKCMATTACH	(SIOCPROTOPRIVATE + 0)
#define SIOCKCMUNATTACH	(SIOCPROTOPRIVATE + 1)
#define SIOCKCMCLONE	(SIOCPROTOPRIVATE + 2)

#define KCMPROTO_CONNECTED	0

/* Socket options (level SOL_KCM) */
#define KCM_RECV_DISABLE	1

/*
 * Extensions: not in upstream Linux.  A kernel without them fails
 * SIOCKCMATTACHEXT with ENOTTY (upstream answers unknown ioctls so).
 */

/* struct kcm_attach_ext.bpf_type */
#define KCM_BPF_TYPE_FD		1	/* bpf_fd: an eBPF socket filter */
#define KCM_BPF_TYPE_PROG	2	/* fprog: classic BPF, inline */
#define KCM_PARSER_LENFIELD	3	/* lenfield: built in, no BPF */

/* struct kcm_lenfield.byte_order */
#define KCM_LENFIELD_BE		0	/* network byte order */
#define KCM_LENFIELD_LE		1

/**
 * struct kcm_lenfield - a length field parser
 * @offset: where the field starts, in bytes from the start of the message
 * @width: its size in bytes: 1, 2, 4 or 8 (unsigned)
 * @byte_order: KCM_LENFIELD_BE or KCM_LENFIELD_LE
 * @adjust: added to the field's value to give the whole message length
 *	(e.g. the header size when the field counts the payload only)
 * @max_len: longest message accepted, 0 for no limit of its own (the TCP
 *	socket's receive buffer always limits); longer is EMSGSIZE
 * @reserved: must be 0
 */
struct kcm_lenfield {
	__u32 offset;
	__u32 width;
	__u32 byte_order;
	__s32 adjust;
	__u32 max_len;
	__u32 reserved;
};

/**
 * struct kcm_attach_ext - argument of SIOCKCMATTACHEXT
 * @fd: a connected TCP socket to attach to the multiplexor
 * @bpf_type: what the union holds: KCM_BPF_TYPE_FD, KCM_BPF_TYPE_PROG or
 *	KCM_PARSER_LENFIELD
 * @bpf_fd: as in struct kcm_attach
 * @fprog: a classic BPF program, as for SO_ATTACH_FILTER; it returns the
 *	message length, 0 for "need more" (a load past the bytes received
 *	so far returns 0), values from 2^31 on are errors like an eBPF
 *	parser's negative ones
 * @lenfield: the built-in parser's parameters
 */
struct kcm_attach_ext {
	int fd;
	int bpf_type;
	union {
		int bpf_fd;
		struct sock_fprog fprog;
		struct kcm_lenfield lenfield;
	};
};

#define SIOCKCMATTACHEXT	(SIOCPROTOPRIVATE + 3)

/*
 * Per-connection addressing.  Every attached TCP socket has an id, unique
 * within its mux for the mux's life: the <index> of its psock-<index> line
 * in /proc/net/kcm.
 */

/* Socket option (level SOL_KCM, int 0/1): tell the connection of every
 * received message in a KCM_CONN_ID control message.
 */
#define KCM_RECV_CONN_ID	2

/* Control message (level SOL_KCM, a __u32 connection id): on receive,
 * where the message came from; on send, the connection it must go out on.
 */
#define KCM_CONN_ID		2

/*
 * Batched receive.  Socket option (level SOL_KCM, int 0 to 65536): the
 * most whole messages one recvmsg() may return, back to back; 0 and 1
 * mean one (the default).  Each such call then carries a KCM_MSG_LENS
 * control message: one __u32 length per message, in order (and, with
 * KCM_RECV_CONN_ID, a KCM_CONN_ID one with one __u32 id per message).
 */
#define KCM_RECV_BATCH		3
#define KCM_RECV_BATCH_MAX	65536

/* Control message (level SOL_KCM, __u32[]): the lengths of a batch. */
#define KCM_MSG_LENS		3

/*
 * Steering by key ("smart load balancing").  Socket option (level
 * SOL_KCM, struct kcm_recv_key), set on any KCM socket of a mux and
 * applying to the whole mux: a key function that gives every message
 * framed from then on a 32-bit key.  While the set of receiving sockets
 * (those without KCM_RECV_DISABLE) does not change, every message of one
 * key goes to the same socket, in the order its connection carried it;
 * a socket that leaves hands its keys, and the messages it had queued,
 * to the sockets that own them next, and one that joins takes over only
 * the keys it owns then.  KCM_NO_KEY is "no key": that message is
 * balanced as without a key function.  getsockopt() returns the key_type
 * in force (and the field of KCM_KEY_FIELD).
 */
#define KCM_RECV_KEY		4

/* struct kcm_recv_key.key_type (1 and 2: KCM_BPF_TYPE_FD, _PROG) */
#define KCM_KEY_OFF		0	/* remove the key function */
#define KCM_KEY_FIELD		3	/* field: built in, no BPF */
#define KCM_KEY_CONN		4	/* the connection: one connection, one socket */

/* The key that means "no key". */
#define KCM_NO_KEY		0xffffffffU

/**
 * struct kcm_keyfield - a key field in the message
 * @offset: where the field starts, in bytes from the start of the message
 * @width: its size in bytes: 1, 2, 4 or 8 (an 8-byte field's two halves
 *	are XORed into 32 bits)
 * @byte_order: KCM_LENFIELD_BE or KCM_LENFIELD_LE
 * @reserved: must be 0
 *
 * A message too short to hold the field has no key.
 */
struct kcm_keyfield {
	__u32 offset;
	__u32 width;
	__u32 byte_order;
	__u32 reserved;
};

/**
 * struct kcm_recv_key - value of the KCM_RECV_KEY socket option
 * @key_type: KCM_KEY_OFF, KCM_BPF_TYPE_FD, KCM_BPF_TYPE_PROG,
 *	KCM_KEY_FIELD or KCM_KEY_CONN
 * @reserved: must be 0
 * @bpf_fd: an eBPF BPF_PROG_TYPE_SOCKET_FILTER program, run on each whole
 *	message (at offset 0, skb->len its length): its result is the key
 * @fprog: a classic BPF program, as for SIOCKCMATTACHEXT (no privilege
 *	needed); a load past the message's end ends it with key 0
 * @field: the built-in key field
 *
 * With KCM_KEY_OFF and KCM_KEY_CONN the union is all 0.
 */
struct kcm_recv_key {
	int key_type;
	int reserved;
	union {
		int bpf_fd;
		struct sock_fprog fprog;
		struct kcm_keyfield field;
	};
};

#endif /* _UAPI_LINUX_KCM_H */
