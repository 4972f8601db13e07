/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcm_util.h: what the KCM selftests, tools and examples share.
 *
 * Loopback TCP connections, the KCM ioctls, the length parser loaded as
 * raw eBPF instructions through the bpf() system call (no clang, no
 * libbpf), kernel TLS with test keys, the test message format, whole
 * reads and writes, a monotonic clock and TCP's counters.  Header only:
 * each program includes it (the Makefiles put this directory on the
 * include path) and gets its own copy of what it calls.
 *
 * No function here prints or exits: each returns -1 (or another negative
 * number where it says so) with errno set, and the caller decides.  Every
 * name starts with kcm_u_ (u for user space), so that none meets the
 * selftests' own kcm_ helpers or a tool's.
 *
 * A message is a 4-byte big-endian length of the payload followed by the
 * payload (KCM_U_HDR + length bytes): the format of the parser
 * "return load_word(skb, 0) + 4;".  kcm_u_msg_build() makes payloads that
 * check themselves: a 4-byte sequence number, then bytes derived from it
 * and their offset, so that a message that arrives cut, merged or shifted
 * fails kcm_u_msg_check().
 */
#ifndef KCM_UTIL_H
#define KCM_UTIL_H

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <linux/kcm.h>
#include <linux/tls.h>

/* A C library older than KCM has neither. */
#ifndef AF_KCM
#define AF_KCM		41
#endif
#ifndef SOL_KCM
#define SOL_KCM		281
#endif

#define KCM_U_HDR	4	/* the length header of a message */

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#endif

/* ---------------------------------------------------------------- time */

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t kcm_u_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Milliseconds since @t0, a kcm_u_now_ns() value. */
static inline long kcm_u_ms_since(uint64_t t0)
{
	return (long)((kcm_u_now_ns() - t0) / 1000000);
}

/* ------------------------------------------------------------- sockets */

static inline int kcm_u_setsockopt_int(int fd, int level, int name, int val)
{
	return setsockopt(fd, level, name, &val, sizeof(val));
}

/* The int option @name, or -1. */
static inline int kcm_u_getsockopt_int(int fd, int level, int name)
{
	socklen_t len = sizeof(int);
	int val = -1;

	if (getsockopt(fd, level, name, &val, &len) < 0)
		return -1;
	return val;
}

/* SO_RCVTIMEO or SO_SNDTIMEO (@optname) of @ms milliseconds. */
static inline int kcm_u_set_timeo(int fd, int optname, int ms)
{
	struct timeval tv = { .tv_sec = ms / 1000,
			      .tv_usec = (ms % 1000) * 1000 };

	return setsockopt(fd, SOL_SOCKET, optname, &tv, sizeof(tv));
}

/*
 * Brings lo up if it is down: a new network namespace, or a test VM,
 * starts with it down.  Changing it needs CAP_NET_ADMIN; reading not.
 */
static inline int kcm_u_lo_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM, 0), ret = -1;

	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (!ioctl(fd, SIOCGIFFLAGS, &ifr)) {
		ret = 0;
		if (!(ifr.ifr_flags & IFF_UP)) {
			ifr.ifr_flags |= IFF_UP;
			ret = ioctl(fd, SIOCSIFFLAGS, &ifr);
		}
	}
	close(fd);
	return ret;
}

/* A TCP socket listening on 127.0.0.1, any port; its address goes to @sin. */
static inline int kcm_u_tcp_listener(struct sockaddr_in *sin)
{
	socklen_t len = sizeof(*sin);
	int fd, err;

	kcm_u_lo_up();
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)sin, len) || listen(fd, 64) ||
	    getsockname(fd, (struct sockaddr *)sin, &len)) {
		err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

/* A TCP socket connected to @sin. */
static inline int kcm_u_tcp_connect(const struct sockaddr_in *sin)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), err;

	if (fd < 0)
		return -1;
	if (connect(fd, (const struct sockaddr *)sin, sizeof(*sin))) {
		err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

/*
 * A connected loopback TCP pair: @peer connects (with TCP_NODELAY, for
 * the small writes of a test), @local is the accepted end, the one to
 * attach to a KCM mux.  Returns 0, or -1 with nothing left open.
 */
static inline int kcm_u_tcp_pair(int *peer, int *local)
{
	struct sockaddr_in sin;
	int l = kcm_u_tcp_listener(&sin), err;

	*peer = -1;
	*local = -1;
	if (l < 0)
		return -1;
	*peer = kcm_u_tcp_connect(&sin);
	if (*peer >= 0)
		*local = accept(l, NULL, NULL);
	err = errno;
	close(l);
	if (*local < 0) {
		if (*peer >= 0)
			close(*peer);
		*peer = -1;
		errno = err;
		return -1;
	}
	kcm_u_setsockopt_int(*peer, IPPROTO_TCP, TCP_NODELAY, 1);
	return 0;
}

/* ----------------------------------------------------------- KCM ioctls */

/* SIOCKCMCLONE: a new KCM socket on the mux of @kcm; its fd, or -1. */
static inline int kcm_u_clone(int kcm)
{
	struct kcm_clone info = { .fd = -1 };

	if (ioctl(kcm, SIOCKCMCLONE, &info) < 0)
		return -1;
	return info.fd;
}

/* SIOCKCMATTACH: TCP socket @fd joins the mux of @kcm, framed by @prog. */
static inline int kcm_u_attach(int kcm, int fd, int prog)
{
	struct kcm_attach att = { .fd = fd, .bpf_fd = prog };

	return ioctl(kcm, SIOCKCMATTACH, &att);
}

/* SIOCKCMUNATTACH: TCP socket @fd leaves the mux of @kcm. */
static inline int kcm_u_unattach(int kcm, int fd)
{
	struct kcm_unattach un = { .fd = fd };

	return ioctl(kcm, SIOCKCMUNATTACH, &un);
}

/* ------------------------------------------------------------------ BPF */

static inline long kcm_u_bpf(int cmd, union bpf_attr *attr)
{
	return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

/*
 * BPF_PROG_LOAD of @n instructions, GPL; @attach_type and @btf_id are 0
 * but for tracing and LSM programs.  With @log, the verifier's log goes
 * there.  Returns the program's fd, or -1.
 */
static inline int kcm_u_bpf_load(int type, int attach_type, int btf_id,
				 const struct bpf_insn *insns, unsigned int n,
				 char *log, unsigned int log_size)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.prog_type = type;
	attr.expected_attach_type = attach_type;
	attr.attach_btf_id = btf_id;
	attr.insns = (unsigned long)insns;
	attr.insn_cnt = n;
	attr.license = (unsigned long)"GPL";
	attr.log_buf = (unsigned long)log;
	attr.log_size = log ? log_size : 0;
	attr.log_level = log ? 1 : 0;
	return kcm_u_bpf(BPF_PROG_LOAD, &attr);
}

/*
 * The parser of the documentation, "return load_word(skb, 0) + 4;", as a
 * socket filter program: a message is its length header and that many
 * bytes more.  Returns its fd, or -1.
 */
static inline int kcm_u_parser_len4(void)
{
	const struct bpf_insn insns[] = {
		/* r6 = ctx: BPF_LD_ABS reads the skb in r6 */
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 6,
		  .src_reg = 1 },
		/* r0 = ntohl(*(u32 *)(data + 0)); out of range: return 0 */
		{ .code = BPF_LD | BPF_W | BPF_ABS, .imm = 0 },
		/* r0 += 4: the header itself */
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = 0,
		  .imm = KCM_U_HDR },
		{ .code = BPF_JMP | BPF_EXIT },
	};

	return kcm_u_bpf_load(BPF_PROG_TYPE_SOCKET_FILTER, 0, 0, insns,
			      ARRAY_SIZE(insns), NULL, 0);
}

/* ----------------------------------------------------------- kernel TLS */

#ifndef TCP_ULP
#define TCP_ULP		31
#endif
#ifndef SOL_TLS
#define SOL_TLS		282
#endif

/* TCP_ULP "tls" on @fd: ENOENT when the kernel has no kTLS. */
static inline int kcm_u_ktls_ulp(int fd)
{
	return setsockopt(fd, IPPROTO_TCP, TCP_ULP, "tls", sizeof("tls"));
}

/* Bytes of the crypto_info of @cipher, or 0 for one not known here. */
static inline size_t kcm_u_ktls_info_size(unsigned short cipher)
{
	switch (cipher) {
	case TLS_CIPHER_AES_GCM_128:
		return sizeof(struct tls12_crypto_info_aes_gcm_128);
	case TLS_CIPHER_AES_GCM_256:
		return sizeof(struct tls12_crypto_info_aes_gcm_256);
	case TLS_CIPHER_AES_CCM_128:
		return sizeof(struct tls12_crypto_info_aes_ccm_128);
	case TLS_CIPHER_CHACHA20_POLY1305:
		return sizeof(struct tls12_crypto_info_chacha20_poly1305);
	}
	return 0;
}

/*
 * kTLS keys for @dir (TLS_TX or TLS_RX) on @fd, which has the ULP: TLS
 * @version with @cipher, every secret byte (key, salt, iv, record
 * number) @key.  A test key, as the kernel's selftests/net/tls.c uses
 * without a handshake: two ends given the same @key understand each
 * other.
 */
static inline int kcm_u_ktls_key(int fd, int dir, unsigned short version,
				 unsigned short cipher, unsigned char key)
{
	unsigned char ci[64];
	struct tls_crypto_info *info = (struct tls_crypto_info *)ci;
	size_t size = kcm_u_ktls_info_size(cipher);

	if (!size || size > sizeof(ci)) {
		errno = EINVAL;
		return -1;
	}
	memset(ci, key, size);
	info->version = version;
	info->cipher_type = cipher;
	return setsockopt(fd, SOL_TLS, dir, ci, size);
}

/* kTLS both ways on @fd: the ULP, then kcm_u_ktls_key() each way. */
static inline int kcm_u_ktls(int fd, unsigned short version,
			     unsigned short cipher, unsigned char key)
{
	if (kcm_u_ktls_ulp(fd) ||
	    kcm_u_ktls_key(fd, TLS_TX, version, cipher, key) ||
	    kcm_u_ktls_key(fd, TLS_RX, version, cipher, key))
		return -1;
	return 0;
}

/* ------------------------------------------------------------- messages */

/* Payload byte @i (from 0, sequence number included) of message @seq. */
static inline unsigned char kcm_u_msg_byte(uint32_t seq, size_t i)
{
	return (unsigned char)(seq * 131 + i * 7 + (i >> 8));
}

/*
 * Writes message @seq with @plen payload bytes to @buf; returns its size,
 * KCM_U_HDR + @plen.  A payload under 4 bytes has no sequence number.
 */
static inline size_t kcm_u_msg_build(char *buf, size_t plen, uint32_t seq)
{
	uint32_t hdr = htonl(plen), nseq = htonl(seq);
	size_t i;

	memcpy(buf, &hdr, KCM_U_HDR);
	for (i = 0; i < plen; i++)
		buf[KCM_U_HDR + i] = kcm_u_msg_byte(seq, i);
	if (plen >= 4)
		memcpy(buf + KCM_U_HDR, &nseq, 4);
	return KCM_U_HDR + plen;
}

/* Checks the whole message @buf of @len bytes: its sequence number, or -1. */
static inline long kcm_u_msg_check(const char *buf, size_t len)
{
	uint32_t hdr, seq = 0;
	size_t i, plen;

	if (len < KCM_U_HDR)
		return -1;
	memcpy(&hdr, buf, KCM_U_HDR);
	plen = ntohl(hdr);
	if (plen + KCM_U_HDR != len)
		return -1;
	if (plen >= 4) {
		memcpy(&seq, buf + KCM_U_HDR, 4);
		seq = ntohl(seq);
	}
	for (i = plen >= 4 ? 4 : 0; i < plen; i++)
		if ((unsigned char)buf[KCM_U_HDR + i] != kcm_u_msg_byte(seq, i))
			return -1;
	return seq;
}

/* ------------------------------------------------------------- streams */

/* Writes all @len bytes; -1 on an error (EPIPE if nothing was taken). */
static inline int kcm_u_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t n;

	while (len) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (!n)
				errno = EPIPE;
			return -1;
		}
		p += n;
		len -= n;
	}
	return 0;
}

/* Reads exactly @len bytes; -1 on an error (EPIPE: the stream ended). */
static inline int kcm_u_read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	ssize_t n;

	while (len) {
		n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (!n)
				errno = EPIPE;
			return -1;
		}
		p += n;
		len -= n;
	}
	return 0;
}

/*
 * Reads one message from a TCP stream into @buf: its size, -1 when it is
 * longer than @cap (errno EMSGSIZE; its header is in @buf, the rest still
 * in the stream), -2 when the read failed or the stream ended.
 */
static inline long kcm_u_read_msg(int fd, char *buf, size_t cap)
{
	uint32_t hdr;
	size_t plen;

	if (cap < KCM_U_HDR) {
		errno = EMSGSIZE;
		return -1;
	}
	if (kcm_u_read_full(fd, buf, KCM_U_HDR))
		return -2;
	memcpy(&hdr, buf, KCM_U_HDR);
	plen = ntohl(hdr);
	if (plen > cap - KCM_U_HDR) {
		errno = EMSGSIZE;
		return -1;
	}
	if (kcm_u_read_full(fd, buf + KCM_U_HDR, plen))
		return -2;
	return KCM_U_HDR + plen;
}

/* ------------------------------------------------------------ counters */

/*
 * The TcpExt counter @name of this network namespace (/proc/net/netstat:
 * a line of names, then one of values), or -1 when there is none.
 */
static inline long kcm_u_tcpext(const char *name)
{
	char names[8192], values[8192], *n, *v, *sn, *sv;
	FILE *f = fopen("/proc/net/netstat", "r");
	long r = -1;

	if (!f)
		return -1;
	while (fgets(names, sizeof(names), f) &&
	       fgets(values, sizeof(values), f)) {
		if (strncmp(names, "TcpExt:", 7))
			continue;
		n = strtok_r(names, "\n ", &sn);
		v = strtok_r(values, "\n ", &sv);
		while (n && v && strcmp(n, name)) {
			n = strtok_r(NULL, "\n ", &sn);
			v = strtok_r(NULL, "\n ", &sv);
		}
		if (n && v)
			r = strtol(v, NULL, 10);
		break;
	}
	fclose(f);
	return r;
}

#endif /* KCM_UTIL_H */
