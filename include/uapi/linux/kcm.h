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

#endif /* _UAPI_LINUX_KCM_H */
