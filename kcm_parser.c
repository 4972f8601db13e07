// SPDX-License-Identifier: GPL-2.0-only
/*
 * Kernel Connection Multiplexor: the message parsers of attached TCP
 * sockets.
 *
 * Three kinds, chosen at attach time: an eBPF socket filter (SIOCKCMATTACH
 * and KCM_BPF_TYPE_FD), a classic BPF program passed inline and converted
 * the way SO_ATTACH_FILTER converts it (KCM_BPF_TYPE_PROG; needs no
 * privilege), and a built-in length field parser (KCM_PARSER_LENFIELD; no
 * BPF at all).  The last two are extensions, not in upstream Linux.
 *
 * Every kind answers the same question for the receive engine: the whole
 * length of the message that starts at offset 0 of the framing buffer, 0
 * when more bytes are needed, or a negative errno.  A classic program's
 * u32 result is read as an int, so results from 2^31 on are errors like
 * an eBPF program's negative ones; a load past the bytes received so far
 * ends a classic program with 0, which is "need more".
 */

#include <linux/bpf.h>
#include <linux/compat.h>
#include <linux/filter.h>
#include <linux/skbuff.h>
#include <linux/uaccess.h>
#include <net/kcm.h>

#include "kcm_compat.h"

/* A length field must start within this many bytes of the message. */
#define KCM_LENFIELD_MAX_OFFSET	65535

/* Context: TCP socket lock held.  The field's value, @width bytes. */
static u64 kcm_lenfield_value(const u8 *p, unsigned int width, bool le)
{
	switch (width) {
	case 1:
		return *p;
	case 2:
		return le ? get_unaligned_le16(p) : get_unaligned_be16(p);
	case 4:
		return le ? get_unaligned_le32(p) : get_unaligned_be32(p);
	default:
		return le ? get_unaligned_le64(p) : get_unaligned_be64(p);
	}
}

/*
 * The built-in parser.  A length that does not cover the field itself is
 * EPROTO, one over the configured maximum (or over INT_MAX) EMSGSIZE:
 * what the engine answers to a BPF parser's bad or too large length.
 * Each is counted in the psock's stats when @count is set.
 *
 * Context: TCP socket lock held.
 */
int kcm_parse_lenfield(struct kcm_psock *psock, struct sk_buff *skb,
		       bool count)
{
	const struct kcm_parser *lf = &psock->parser;
	unsigned int hdr = lf->offset + lf->width;
	u8 tmp[8];
	const u8 *p;
	s64 total;
	u64 val;

	if (skb->len < hdr)
		return 0;

	p = skb_header_pointer(skb, lf->offset, lf->width, tmp);
	if (unlikely(!p))
		return 0;

	val = kcm_lenfield_value(p, lf->width, lf->le);
	/* Past U32_MAX no adjustment brings it under INT_MAX. */
	total = val > U32_MAX ? S64_MAX : (s64)val + lf->adjust;
	if (total < hdr) {
		if (count)
			kcm_stat_add(&psock->stats.rx_bad_len, 1);
		return -EPROTO;
	}
	if (total > INT_MAX || (lf->max_len && total > lf->max_len)) {
		if (count)
			kcm_stat_add(&psock->stats.rx_too_big, 1);
		return -EMSGSIZE;
	}
	return total;
}

/**
 * kcm_parse_lock() - enter the section a run of kcm_parse_locked() needs
 * @psock: the psock whose parser runs
 *
 * A BPF program runs under rcu_read_lock() with migration disabled; one
 * such section may cover the parser runs over several messages, as long
 * as nothing in it sleeps.  The built-in parser needs none.
 *
 * Context: TCP socket lock held.
 */
void kcm_parse_lock(struct kcm_psock *psock)
	__acquires(RCU)
{
	rcu_read_lock();
	if (psock->parser.kind != KCM_PARSER_LENFIELD)
		migrate_disable();
}

/**
 * kcm_parse_unlock() - leave the section kcm_parse_lock() entered
 * @psock: the psock whose parser ran
 *
 * Context: TCP socket lock held, in kcm_parse_lock()'s section.
 */
void kcm_parse_unlock(struct kcm_psock *psock)
	__releases(RCU)
{
	if (psock->parser.kind != KCM_PARSER_LENFIELD)
		migrate_enable();
	rcu_read_unlock();
}

/* Context: process context.  Checks and copies lenfield parameters. */
static int kcm_parser_lenfield(struct kcm_parser *parser,
			       const struct kcm_lenfield *lf)
{
	if (lf->width != 1 && lf->width != 2 && lf->width != 4 &&
	    lf->width != 8)
		return -EINVAL;
	if (lf->byte_order != KCM_LENFIELD_BE &&
	    lf->byte_order != KCM_LENFIELD_LE)
		return -EINVAL;
	if (lf->reserved || lf->offset > KCM_LENFIELD_MAX_OFFSET)
		return -EINVAL;
	/* No message could both hold its field and fit. */
	if (lf->max_len && lf->max_len < lf->offset + lf->width)
		return -EINVAL;
	if (lf->max_len > INT_MAX)
		return -EINVAL;

	parser->kind = KCM_PARSER_LENFIELD;
	parser->offset = lf->offset;
	parser->width = lf->width;
	parser->le = lf->byte_order == KCM_LENFIELD_LE;
	parser->adjust = lf->adjust;
	parser->max_len = lf->max_len;
	return 0;
}

/**
 * kcm_parser_get() - build the parser an extended attach asks for
 * @info: the user's request (the copy in kernel memory)
 * @parser: filled in
 * @prog: the BPF program of the parser, NULL for the built-in one
 *
 * Context: process context, may sleep.
 * Return: 0; -EINVAL for an unknown type, bad lenfield parameters or a
 * classic program the checker refuses; -EBADF or -EINVAL for a bad eBPF
 * program; -EFAULT for an unreadable classic program; -ENOMEM.
 */
int kcm_parser_get(const struct kcm_attach_ext *info,
		   struct kcm_parser *parser, struct bpf_prog **prog)
{
	struct sock_fprog fprog;

	memset(parser, 0, sizeof(*parser));
	*prog = NULL;
	switch (info->bpf_type) {
	case KCM_BPF_TYPE_FD:
		*prog = bpf_prog_get_type(info->bpf_fd,
					  BPF_PROG_TYPE_SOCKET_FILTER);
		if (IS_ERR(*prog))
			return PTR_ERR(*prog);
		parser->kind = KCM_BPF_TYPE_FD;
		return 0;
	case KCM_BPF_TYPE_PROG:
		fprog = info->fprog;
		parser->kind = KCM_BPF_TYPE_PROG;
		return bpf_prog_create_from_user(prog, &fprog, NULL, false);
	case KCM_PARSER_LENFIELD:
		return kcm_parser_lenfield(parser, &info->lenfield);
	default:
		return -EINVAL;
	}
}

/**
 * kcm_parser_put() - release what kcm_parser_get() took
 * @parser: the parser
 * @prog: its program, or NULL
 *
 * Context: process context.
 */
void kcm_parser_put(const struct kcm_parser *parser, struct bpf_prog *prog)
{
	if (!prog)
		return;

	if (parser->kind == KCM_BPF_TYPE_PROG)
		bpf_prog_destroy(prog);
	else
		bpf_prog_put(prog);
}

#ifdef CONFIG_COMPAT
/* struct kcm_attach_ext as a 32-bit task lays it out. */
struct kcm_compat_attach_ext {
	s32 fd;
	s32 bpf_type;
	union {
		s32 bpf_fd;
		struct compat_sock_fprog fprog;
		struct kcm_lenfield lenfield;
	};
};
#endif

/**
 * kcm_attach_ext_copy() - read the argument of SIOCKCMATTACHEXT
 * @info: where it goes
 * @arg: the user's pointer
 *
 * Context: process context, may sleep.
 * Return: 0 or -EFAULT.
 */
int kcm_attach_ext_copy(struct kcm_attach_ext *info, const void __user *arg)
{
#ifdef CONFIG_COMPAT
	struct kcm_compat_attach_ext c;

	if (in_compat_syscall()) {
		if (copy_from_user(&c, arg, sizeof(c)))
			return -EFAULT;
		memset(info, 0, sizeof(*info));
		info->fd = c.fd;
		info->bpf_type = c.bpf_type;
		if (c.bpf_type == KCM_BPF_TYPE_PROG) {
			info->fprog.len = c.fprog.len;
			info->fprog.filter = compat_ptr(c.fprog.filter);
		} else {
			info->lenfield = c.lenfield;
		}
		return 0;
	}
#endif
	if (copy_from_user(info, arg, sizeof(*info)))
		return -EFAULT;
	return 0;
}
