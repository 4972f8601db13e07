// SPDX-License-Identifier: GPL-2.0
/*
 * The KCM parser for messages with a 4-byte big-endian length header that
 * does not count itself, in C for clang:
 *
 *   clang -O2 -g -target bpf -I/usr/include/$(gcc -dumpmachine) \
 *         -c parser_len.bpf.c -o parser_len.bpf.o
 *
 * KCM calls it with the next message at offset 0.  load_word() is an
 * absolute load: beyond the bytes received so far it ends the program
 * with 0, "need more", so the header may arrive in pieces.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

unsigned long long load_word(void *skb, unsigned long long off)
	asm("llvm.bpf.load.word");

SEC("socket")
int kcm_len4(struct __sk_buff *skb)
{
	return load_word(skb, 0) + 4;
}

char LICENSE[] SEC("license") = "GPL";
