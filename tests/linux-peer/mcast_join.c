/*
 * mcast_join: makes the peer's IP stack a member of one IPv4 multicast group
 * on one interface, for as long as it runs (perftest's multicast mode, `-g`,
 * against Linux: tests/tests/perftest.rs).
 *
 * Why: Linux rxe's ibv_attach_mcast (drivers/infiniband/sw/rxe/rxe_mcast.c,
 * Linux 6.1) only adds a link-layer address to the netdev (dev_mc_add, and
 * the one ipv6_eth_mc_map gives even for an IPv4-mapped group: 33:33:...,
 * not 01:00:5e:...); it never joins the group at the IP layer. rxe's frames
 * arrive through its UDP tunnel socket, behind the IP stack, and the IPv4
 * input path (net/ipv4/route.c, ip_route_input_rcu) drops a multicast
 * datagram for a group the interface is not a member of (ip_check_mc_rcu).
 * rdma_cm's join does join (cma_igmp_send, ip_mc_inc_group), which is why
 * rdma_cm's `mckey` receives and `ib_send_bw -g` does not. IP_ADD_MEMBERSHIP
 * joins the group here (and adds its 01:00:5e MAC to the NIC's filter).
 *
 * Usage: mcast_join <interface> <IPv4 group> [seconds]
 * Prints "joined <group> on <interface>" once a member; holds the membership
 * for `seconds` (default: until killed), and leaves the group on exit.
 */
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct ip_mreqn req;
	char *end = NULL;
	long secs = 0;
	int s;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: %s <interface> <IPv4 group> [seconds]\n", argv[0]);
		return 2;
	}
	memset(&req, 0, sizeof(req));
	if (inet_pton(AF_INET, argv[2], &req.imr_multiaddr) != 1 ||
	    !IN_MULTICAST(ntohl(req.imr_multiaddr.s_addr))) {
		fprintf(stderr, "%s: not an IPv4 multicast group: %s\n", argv[0], argv[2]);
		return 2;
	}
	req.imr_ifindex = (int)if_nametoindex(argv[1]);
	if (req.imr_ifindex == 0) {
		fprintf(stderr, "%s: no interface %s\n", argv[0], argv[1]);
		return 2;
	}
	if (argc == 4) {
		secs = strtol(argv[3], &end, 10);
		if (*argv[3] == '\0' || *end != '\0' || secs <= 0) {
			fprintf(stderr, "%s: not a number of seconds: %s\n", argv[0], argv[3]);
			return 2;
		}
	}
	s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0 || setsockopt(s, IPPROTO_IP, IP_ADD_MEMBERSHIP, &req, sizeof(req)) < 0) {
		perror("IP_ADD_MEMBERSHIP");
		return 1;
	}
	printf("joined %s on %s\n", argv[2], argv[1]);
	fflush(stdout);
	if (secs > 0)
		sleep((unsigned int)secs);
	else
		for (;;)
			pause();
	/* Closing the socket leaves the group. */
	close(s);
	return 0;
}
