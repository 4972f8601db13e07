/* SPDX-License-Identifier: GPL-2.0 */
/*
 * BPF for the KCM selftests without clang or libbpf: instruction macros,
 * maps, tracing programs and a lookup of kernel BTF ids (the bpf() system
 * call and the program loader are kcm_util.h's).
 */
#ifndef KCM_BPF_H
#define KCM_BPF_H

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <linux/btf.h>

#include "kcm_util.h"

#define KCM_INSN(c, d, s, o, i)						\
	((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (s), \
			    .off = (o), .imm = (i) })

/* dst = imm, dst = src */
#define BPF_MOV64_IMM(d, i)	KCM_INSN(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define BPF_MOV64_REG(d, s)	KCM_INSN(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define BPF_ADD64_IMM(d, i)	KCM_INSN(BPF_ALU64 | BPF_ADD | BPF_K, d, 0, 0, i)
/* dst = *(size *)(src + off), *(size *)(dst + off) = imm */
#define BPF_LDX_MEM(sz, d, s, o) KCM_INSN(BPF_LDX | BPF_MEM | (sz), d, s, o, 0)
#define BPF_ST_MEM(sz, d, o, i)	KCM_INSN(BPF_ST | BPF_MEM | (sz), d, 0, o, i)
/* lock *(u64 *)(dst + off) += src */
#define BPF_ATOMIC_ADD64(d, s, o)					\
	KCM_INSN(BPF_STX | BPF_ATOMIC | BPF_DW, d, s, o, BPF_ADD)
/* if ((u32)dst op imm) goto pc + off */
#define BPF_JMP32_IMM(op, d, i, o) KCM_INSN(BPF_JMP32 | (op) | BPF_K, d, 0, o, i)
#define BPF_JMP_IMM(op, d, i, o) KCM_INSN(BPF_JMP | (op) | BPF_K, d, 0, o, i)
#define BPF_CALL_HELPER(f)	KCM_INSN(BPF_JMP | BPF_CALL, 0, 0, 0, f)
#define BPF_EXIT_INSN()		KCM_INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
/* dst = map (two instructions) */
#define BPF_LD_MAP_FD(d, fd)						\
	KCM_INSN(BPF_LD | BPF_DW | BPF_IMM, d, BPF_PSEUDO_MAP_FD, 0, fd), \
	KCM_INSN(0, 0, 0, 0, 0)

static inline int kcm_bpf_array_map(unsigned int value_size)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.map_type = BPF_MAP_TYPE_ARRAY;
	attr.key_size = 4;
	attr.value_size = value_size;
	attr.max_entries = 1;
	return kcm_u_bpf(BPF_MAP_CREATE, &attr);
}

static inline int kcm_bpf_map_rw(int cmd, int map, void *value)
{
	union bpf_attr attr;
	__u32 key = 0;

	memset(&attr, 0, sizeof(attr));
	attr.map_fd = map;
	attr.key = (uintptr_t)&key;
	attr.value = (uintptr_t)value;
	return kcm_u_bpf(cmd, &attr);
}

/* Attaches a tracing or LSM program; closing the fd detaches it. */
static inline int kcm_bpf_attach_tracing(int prog)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.raw_tracepoint.prog_fd = prog;
	return kcm_u_bpf(BPF_RAW_TRACEPOINT_OPEN, &attr);
}

/* Bytes of type data that follow a struct btf_type of this kind. */
static inline long kcm_btf_extra(const struct btf_type *t)
{
	unsigned int vlen = BTF_INFO_VLEN(t->info);

	switch (BTF_INFO_KIND(t->info)) {
	case BTF_KIND_INT:
	case BTF_KIND_VAR:
	case BTF_KIND_DECL_TAG:
		return 4;
	case BTF_KIND_ARRAY:
		return sizeof(struct btf_array);
	case BTF_KIND_STRUCT:
	case BTF_KIND_UNION:
		return vlen * sizeof(struct btf_member);
	case BTF_KIND_ENUM:
		return vlen * sizeof(struct btf_enum);
	case BTF_KIND_FUNC_PROTO:
		return vlen * sizeof(struct btf_param);
	case BTF_KIND_DATASEC:
		return vlen * sizeof(struct btf_var_secinfo);
	case BTF_KIND_ENUM64:
		return vlen * 12;
	case BTF_KIND_PTR:
	case BTF_KIND_FWD:
	case BTF_KIND_TYPEDEF:
	case BTF_KIND_VOLATILE:
	case BTF_KIND_CONST:
	case BTF_KIND_RESTRICT:
	case BTF_KIND_FUNC:
	case BTF_KIND_FLOAT:
	case BTF_KIND_TYPE_TAG:
		return 0;
	default:
		return -1;
	}
}

static inline char *kcm_read_file(const char *path, size_t *len)
{
	size_t cap = 1 << 20, n = 0;
	char *buf = malloc(cap);
	ssize_t r;
	int fd;

	fd = open(path, O_RDONLY);
	if (fd < 0 || !buf)
		goto fail;
	while ((r = read(fd, buf + n, cap - n)) > 0) {
		n += r;
		if (n == cap) {
			char *bigger = realloc(buf, cap * 2);

			if (!bigger)
				goto fail;
			buf = bigger;
			cap *= 2;
		}
	}
	if (r < 0)
		goto fail;
	close(fd);
	*len = n;
	return buf;
fail:
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

/* The vmlinux BTF id of a BTF_KIND_FUNC by name; -1 if not found. */
static inline int kcm_btf_func_id(const char *name)
{
	const struct btf_header *h;
	const char *types, *strs;
	size_t len, off = 0;
	int id = 1, found = -1;
	char *buf;

	buf = kcm_read_file("/sys/kernel/btf/vmlinux", &len);
	if (!buf)
		return -1;
	h = (const struct btf_header *)buf;
	if (len < sizeof(*h) || h->magic != BTF_MAGIC ||
	    h->hdr_len + h->str_off + h->str_len > len)
		goto out;
	types = buf + h->hdr_len + h->type_off;
	strs = buf + h->hdr_len + h->str_off;
	while (off + sizeof(struct btf_type) <= h->type_len) {
		const struct btf_type *t = (const void *)(types + off);
		long extra = kcm_btf_extra(t);

		if (extra < 0)
			break;
		if (BTF_INFO_KIND(t->info) == BTF_KIND_FUNC &&
		    t->name_off < h->str_len && !strcmp(strs + t->name_off, name)) {
			found = id;
			break;
		}
		off += sizeof(*t) + extra;
		id++;
	}
out:
	free(buf);
	return found;
}

#endif /* KCM_BPF_H */
