// SPDX-License-Identifier: GPL-2.0-only
/*
 * Kernel Connection Multiplexor: the message parsers of attached TCP
 * sockets.
 *
 * Three kinds, chosen at attach time: an eBPF socket filter (SIOCKCMATTACH
 * and KCM_BPF_TYPE_FD), a classic BPF program passed inline and converted
 * the way SO_ATTACH_FILTER converts it (KCM_BPF_TYPE_PROG; needs no
 * privilege), and a built-in length field parser (KCM_PARSER_LENFIELD; no
 * BPF at all).  The last two are extensions, not in upstream Linux.  The
 * key functions of steering (kcm_steer.c) come in the same forms and are
 * loaded, checked and read by the same helpers (kcm_bpf_get(),
 * kcm_field_set(), kcm_field_read(), kcm_ext_fprog()).
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

/* Context: any.  The value of a field of @width bytes at @p. */
static u64 kcm_field_value(const u8 *p, unsigned int width, bool le)
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

/**
 * kcm_field_read() - the value of the field a parser or key function reads
 * @f: its offset, width and byte order
 * @skb: a message at offset 0
 * @val: the value
 *
 * Context: any; @skb is not changed meanwhile.
 * Return: false when @skb does not hold the whole field.
 */
bool kcm_field_read(const struct kcm_parser *f, const struct sk_buff *skb,
		    u64 *val)
{
	u8 tmp[8];
	const u8 *p;

	if (skb->len < f->offset + f->width)
		return false;
	p = skb_header_pointer(skb, f->offset, f->width, tmp);
	if (unlikely(!p))
		return false;
	*val = kcm_field_value(p, f->width, f->le);
	return true;
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
	s64 total;
	u64 val;

	if (!kcm_field_read(lf, skb, &val))
		return 0;

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

/**
 * kcm_field_set() - check a field's place and set it in @f
 * @f: a parser or key function; @kind is set too
 * @kind: KCM_PARSER_LENFIELD or KCM_KEY_FIELD
 * @offset: where the field starts in the message
 * @width: 1, 2, 4 or 8 bytes
 * @byte_order: KCM_LENFIELD_BE or KCM_LENFIELD_LE
 *
 * Context: any.
 * Return: 0 or -EINVAL.
 */
int kcm_field_set(struct kcm_parser *f, u8 kind, u32 offset, u32 width,
		  u32 byte_order)
{
	if (width != 1 && width != 2 && width != 4 && width != 8)
		return -EINVAL;
	if (byte_order != KCM_LENFIELD_BE && byte_order != KCM_LENFIELD_LE)
		return -EINVAL;
	if (offset > KCM_LENFIELD_MAX_OFFSET)
		return -EINVAL;

	f->kind = kind;
	f->offset = offset;
	f->width = width;
	f->le = byte_order == KCM_LENFIELD_LE;
	return 0;
}

/* Context: process context.  Checks and copies lenfield parameters. */
static int kcm_parser_lenfield(struct kcm_parser *parser,
			       const struct kcm_lenfield *lf)
{
	if (lf->reserved)
		return -EINVAL;
	/* No message could both hold its field and fit. */
	if (lf->max_len && lf->max_len < (u64)lf->offset + lf->width)
		return -EINVAL;
	if (lf->max_len > INT_MAX)
		return -EINVAL;

	parser->adjust = lf->adjust;
	parser->max_len = lf->max_len;
	return kcm_field_set(parser, KCM_PARSER_LENFIELD, lf->offset,
			     lf->width, lf->byte_order);
}

/**
 * kcm_bpf_get() - take the BPF program of a parser or key function
 * @type: KCM_BPF_TYPE_FD (@bpf_fd) or KCM_BPF_TYPE_PROG (@fprog)
 * @bpf_fd: an eBPF socket filter program
 * @fprog: a classic program in user memory, converted to eBPF
 * @prog: the program taken; put it with kcm_bpf_put()
 *
 * Context: process context, may sleep.
 * Return: 0; -EBADF or -EINVAL for a bad eBPF program; -EINVAL for a
 * classic one the checker refuses, -EFAULT for one that cannot be read;
 * -ENOMEM.
 */
int kcm_bpf_get(int type, int bpf_fd, const struct sock_fprog *fprog,
		struct bpf_prog **prog)
{
	struct sock_fprog copy;

	*prog = NULL;
	if (type == KCM_BPF_TYPE_FD) {
		*prog = bpf_prog_get_type(bpf_fd, BPF_PROG_TYPE_SOCKET_FILTER);
		if (IS_ERR(*prog)) {
			int err = PTR_ERR(*prog);

			*prog = NULL;
			return err;
		}
		return 0;
	}
	copy = *fprog;
	return bpf_prog_create_from_user(prog, &copy, NULL, false);
}

/**
 * kcm_bpf_put() - put what kcm_bpf_get() took
 * @type: the type it was taken as
 * @prog: the program, or NULL
 *
 * Context: process context.
 */
void kcm_bpf_put(int type, struct bpf_prog *prog)
{
	if (!prog)
		return;

	if (type == KCM_BPF_TYPE_PROG)
		bpf_prog_destroy(prog);
	else
		bpf_prog_put(prog);
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
	memset(parser, 0, sizeof(*parser));
	*prog = NULL;
	switch (info->bpf_type) {
	case KCM_BPF_TYPE_FD:
	case KCM_BPF_TYPE_PROG:
		parser->kind = info->bpf_type;
		return kcm_bpf_get(info->bpf_type, info->bpf_fd, &info->fprog,
				   prog);
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
	kcm_bpf_put(parser->kind, prog);
}

/**
 * kcm_ext_fprog() - the classic program of an extension's argument, as
 *	the calling task laid it out
 * @fprog: the struct sock_fprog of a struct kcm_attach_ext or struct
 *	kcm_recv_key just copied from the task
 *
 * Both are ints, then a union in which a struct sock_fprog is the one
 * member with a pointer.  A 32-bit task lays them out alike, with the
 * same size, but for that member (a struct compat_sock_fprog, at the same
 * place): it is converted in place.
 *
 * Context: process context (the syscall of the task).
 */
void kcm_ext_fprog(struct sock_fprog *fprog)
{
#ifdef CONFIG_COMPAT
	struct compat_sock_fprog c;

	BUILD_BUG_ON(offsetof(struct kcm_attach_ext, fprog) != 2 * sizeof(s32) ||
		     offsetof(struct kcm_recv_key, fprog) != 2 * sizeof(s32));
	BUILD_BUG_ON(sizeof(c) > sizeof(*fprog));
	if (!in_compat_syscall())
		return;
	memcpy(&c, fprog, sizeof(c));
	fprog->len = c.len;
	fprog->filter = compat_ptr(c.filter);
#endif
}

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
	if (copy_from_user(info, arg, sizeof(*info)))
		return -EFAULT;
	if (info->bpf_type == KCM_BPF_TYPE_PROG)
		kcm_ext_fprog(&info->fprog);
	return 0;
}
