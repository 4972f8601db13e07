/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Minimal rtnetlink for the KCM selftests: a veth pair across two network
 * namespaces, addresses, links up, and a netem qdisc, without ip(8) or
 * tc(8).  Every request works in the caller's current network namespace
 * and returns 0 or a negative errno (the kernel's answer).
 */
#ifndef KCM_NETLINK_H
#define KCM_NETLINK_H

#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>

#define KCM_NL_BUF	2048

struct kcm_nl_req {
	struct nlmsghdr nh;
	char buf[KCM_NL_BUF];
};

/* Starts a request of @type; @hdr (@hdr_len bytes) is the family header. */
static inline void kcm_nl_init(struct kcm_nl_req *req, int type, int flags,
			       const void *hdr, size_t hdr_len)
{
	memset(req, 0, sizeof(*req));
	req->nh.nlmsg_len = NLMSG_LENGTH(hdr_len);
	req->nh.nlmsg_type = type;
	req->nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
	req->nh.nlmsg_seq = 1;
	memcpy(NLMSG_DATA(&req->nh), hdr, hdr_len);
}

static inline struct rtattr *kcm_nl_tail(struct kcm_nl_req *req)
{
	return (struct rtattr *)((char *)&req->nh +
				 NLMSG_ALIGN(req->nh.nlmsg_len));
}

/* Appends raw bytes (a family header inside a nest) to the message. */
static inline int kcm_nl_raw(struct kcm_nl_req *req, const void *data,
			     size_t len)
{
	size_t off = NLMSG_ALIGN(req->nh.nlmsg_len);

	if (off + len > sizeof(*req))
		return -ENOSPC;
	memcpy((char *)&req->nh + off, data, len);
	req->nh.nlmsg_len = off + len;
	return 0;
}

static inline struct rtattr *kcm_nl_attr(struct kcm_nl_req *req, int type,
					 const void *data, size_t len)
{
	struct rtattr *rta = kcm_nl_tail(req);
	size_t off = NLMSG_ALIGN(req->nh.nlmsg_len);

	if (off + RTA_SPACE(len) > sizeof(*req))
		return NULL;
	rta->rta_type = type;
	rta->rta_len = RTA_LENGTH(len);
	if (len)
		memcpy(RTA_DATA(rta), data, len);
	req->nh.nlmsg_len = off + RTA_SPACE(len);
	return rta;
}

static inline struct rtattr *kcm_nl_str(struct kcm_nl_req *req, int type,
					const char *s)
{
	return kcm_nl_attr(req, type, s, strlen(s) + 1);
}

/* Opens an attribute that the following ones go into. */
static inline struct rtattr *kcm_nl_nest(struct kcm_nl_req *req, int type)
{
	return kcm_nl_attr(req, type, NULL, 0);
}

static inline void kcm_nl_nest_end(struct kcm_nl_req *req, struct rtattr *nest)
{
	nest->rta_len = (char *)kcm_nl_tail(req) - (char *)nest;
}

/* Sends @req on a new NETLINK_ROUTE socket; returns the ack's error. */
static inline int kcm_nl_talk(struct kcm_nl_req *req)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	char ans[4096];
	int fd, err = -EIO;
	ssize_t n;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	if (sendto(fd, req, req->nh.nlmsg_len, 0, (struct sockaddr *)&sa,
		   sizeof(sa)) != (ssize_t)req->nh.nlmsg_len) {
		err = -errno;
		goto out;
	}
	for (;;) {
		struct nlmsghdr *nh = (struct nlmsghdr *)ans;

		n = recv(fd, ans, sizeof(ans), 0);
		if (n < 0) {
			err = -errno;
			break;
		}
		for (; NLMSG_OK(nh, n); nh = NLMSG_NEXT(nh, n)) {
			if (nh->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(nh);

				err = e->error;
				goto out;
			}
		}
	}
out:
	close(fd);
	return err;
}

/*
 * Creates the veth pair @name (here) and @peer, the peer end in the
 * network namespace of @peer_ns_fd.
 */
static inline int kcm_nl_veth(const char *name, const char *peer,
			      int peer_ns_fd)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	struct rtattr *linkinfo, *data, *pinfo;
	uint32_t nsfd = peer_ns_fd;
	struct kcm_nl_req req;

	kcm_nl_init(&req, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &ifi,
		    sizeof(ifi));
	if (!kcm_nl_str(&req, IFLA_IFNAME, name))
		return -ENOSPC;
	linkinfo = kcm_nl_nest(&req, IFLA_LINKINFO);
	if (!linkinfo || !kcm_nl_str(&req, IFLA_INFO_KIND, "veth"))
		return -ENOSPC;
	data = kcm_nl_nest(&req, IFLA_INFO_DATA);
	pinfo = data ? kcm_nl_nest(&req, VETH_INFO_PEER) : NULL;
	/* VETH_INFO_PEER: a struct ifinfomsg, then the peer's IFLA_* */
	if (!pinfo || kcm_nl_raw(&req, &ifi, sizeof(ifi)) ||
	    !kcm_nl_str(&req, IFLA_IFNAME, peer) ||
	    !kcm_nl_attr(&req, IFLA_NET_NS_FD, &nsfd, sizeof(nsfd)))
		return -ENOSPC;
	kcm_nl_nest_end(&req, pinfo);
	kcm_nl_nest_end(&req, data);
	kcm_nl_nest_end(&req, linkinfo);
	return kcm_nl_talk(&req);
}

/* Sets link @name up. */
static inline int kcm_nl_link_up(const char *name)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC,
				 .ifi_flags = IFF_UP, .ifi_change = IFF_UP };
	struct kcm_nl_req req;

	kcm_nl_init(&req, RTM_NEWLINK, 0, &ifi, sizeof(ifi));
	if (!kcm_nl_str(&req, IFLA_IFNAME, name))
		return -ENOSPC;
	return kcm_nl_talk(&req);
}

/* Adds the IPv4 address @addr/@prefix (network byte order) to @name. */
static inline int kcm_nl_addr4(const char *name, in_addr_t addr, int prefix)
{
	struct ifaddrmsg ifa = { .ifa_family = AF_INET,
				 .ifa_prefixlen = prefix,
				 .ifa_scope = RT_SCOPE_UNIVERSE };
	struct kcm_nl_req req;

	ifa.ifa_index = if_nametoindex(name);
	if (!ifa.ifa_index)
		return -ENODEV;
	kcm_nl_init(&req, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, &ifa,
		    sizeof(ifa));
	if (!kcm_nl_attr(&req, IFA_LOCAL, &addr, sizeof(addr)) ||
	    !kcm_nl_attr(&req, IFA_ADDRESS, &addr, sizeof(addr)))
		return -ENOSPC;
	return kcm_nl_talk(&req);
}

/* What netem does to the packets leaving a device, as tc(8) words it. */
struct kcm_netem {
	uint64_t delay_ns;	/* delay */
	uint64_t jitter_ns;	/*   ... with this jitter */
	double loss;		/* loss, in % */
	double reorder;		/* reorder: sent at once instead, in % */
	double reorder_corr;	/*   ... correlation, in % */
	uint32_t limit;		/* queue limit in packets (tc: 1000) */
};

/* netem's probabilities: 0 is never, UINT32_MAX always. */
static inline uint32_t kcm_nl_prob(double percent)
{
	if (percent <= 0)
		return 0;
	if (percent >= 100)
		return UINT32_MAX;
	return (uint32_t)(percent / 100 * UINT32_MAX);
}

/*
 * Replaces the root qdisc of @name by netem with @ne.  TCA_OPTIONS is the
 * struct tc_netem_qopt followed directly (not nested) by TCA_NETEM_*
 * attributes; see parse_attr() in net/sched/sch_netem.c.
 */
static inline int kcm_nl_netem(const char *name, const struct kcm_netem *ne)
{
	struct tcmsg tcm = { .tcm_family = AF_UNSPEC,
			     .tcm_handle = 1U << 16,	/* 1: */
			     .tcm_parent = TC_H_ROOT };
	struct tc_netem_qopt qopt = { .limit = ne->limit ? ne->limit : 1000,
				      .loss = kcm_nl_prob(ne->loss) };
	struct tc_netem_reorder reorder = {
		.probability = kcm_nl_prob(ne->reorder),
		.correlation = kcm_nl_prob(ne->reorder_corr),
	};
	int64_t delay = ne->delay_ns, jitter = ne->jitter_ns;
	struct kcm_nl_req req;
	struct rtattr *opts;

	tcm.tcm_ifindex = if_nametoindex(name);
	if (!tcm.tcm_ifindex)
		return -ENODEV;
	/* As tc(8): reordering needs a gap, "1" leaves it to the odds. */
	if (ne->reorder > 0)
		qopt.gap = 1;
	kcm_nl_init(&req, RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE, &tcm,
		    sizeof(tcm));
	if (!kcm_nl_str(&req, TCA_KIND, "netem"))
		return -ENOSPC;
	opts = kcm_nl_attr(&req, TCA_OPTIONS, &qopt, sizeof(qopt));
	if (!opts ||
	    !kcm_nl_attr(&req, TCA_NETEM_LATENCY64, &delay, sizeof(delay)) ||
	    !kcm_nl_attr(&req, TCA_NETEM_JITTER64, &jitter, sizeof(jitter)))
		return -ENOSPC;
	if (ne->reorder > 0 &&
	    !kcm_nl_attr(&req, TCA_NETEM_REORDER, &reorder, sizeof(reorder)))
		return -ENOSPC;
	kcm_nl_nest_end(&req, opts);
	return kcm_nl_talk(&req);
}

#endif /* KCM_NETLINK_H */
