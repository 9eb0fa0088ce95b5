package fastpath

// The BPF object and its Go bindings are generated from bpf/fastpath.c
// (and the headers it includes) with Debian's clang and committed; `make bpf-check` regenerates them and
// fails if anything changed.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel -no-global-types -type nat_key -type nat_val -type br_key -type br_val -type micro_key -type micro_val -type r6_key -type r6_val -type fwd -type ppp_session -type flow_stats fastpath bpf/fastpath.c
