#!/usr/bin/env bash
# Installs what linerate needs on a fresh Debian machine (run as root) and builds it.
# Sourced by ./run.sh and ./test.sh; safe to run again (installs only what is missing).
set -euo pipefail

need_pkgs=()
have() { command -v "$1" >/dev/null 2>&1; }
# command -> Debian package providing it
for pair in ip:iproute2 gcc:gcc g++:g++ ping:iputils-ping tcpdump:tcpdump nft:nftables \
            sysctl:procps valgrind:valgrind ethtool:ethtool traceroute:traceroute \
            tracepath:iputils-tracepath python3:python3 bird:bird2 vtysh:frr \
            iperf3:iperf3 ssh:openssh-client sshd:openssh-server ss:iproute2 clang:clang \
            rsvg-convert:librsvg2-bin keepalived:keepalived; do
    have "${pair%%:*}" || need_pkgs+=("${pair##*:}")
done
# The eBPF programs (crates/io/bpf/*.bpf.c) are built by clang with libbpf's headers and the
# kernel's UAPI headers.
[[ -e /usr/include/bpf/bpf_helpers.h ]] || need_pkgs+=(libbpf-dev)
[[ -e /usr/include/linux/bpf.h ]] || need_pkgs+=(linux-libc-dev)
# Tools the tests check linerate's metrics and service unit with, without what they recommend
# (prometheus would bring a node exporter): promtool, systemd-analyze, and Debian's Python
# client to parse OpenMetrics text.
tool_pkgs=()
for pair in promtool:prometheus systemd-analyze:systemd; do
    have "${pair%%:*}" || tool_pkgs+=("${pair##*:}")
done
/usr/bin/python3 -c 'import prometheus_client' 2>/dev/null || tool_pkgs+=(python3-prometheus-client)
if ((${#tool_pkgs[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "setup: missing ${tool_pkgs[*]}; run as root to install them" >&2
        exit 1
    fi
    echo "setup: installing ${tool_pkgs[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${tool_pkgs[@]}" >/dev/null
fi
if ((${#need_pkgs[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "setup: missing ${need_pkgs[*]}; run as root to install them" >&2
        exit 1
    fi
    echo "setup: installing ${need_pkgs[*]}" >&2
    apt-get update -qq
    # The tests start their own sshd (and iperf3) inside namespaces: keep the packages from
    # starting a server on this machine's addresses, now or at boot (policy-rc.d(8)).
    own_policy=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && own_policy=1
    fi
    rc=0
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null || rc=$?
    if ((own_policy)); then rm -f /usr/sbin/policy-rc.d; fi
    ((rc == 0)) || exit "$rc"
    if [[ " ${need_pkgs[*]} " == *" openssh-server "* ]] && have systemctl; then
        systemctl disable ssh.service ssh.socket >/dev/null 2>&1 || true
    fi
fi

if ! have cargo; then
    [[ -x "$HOME/.cargo/bin/cargo" ]] && export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! have cargo; then
    echo "setup: no Rust toolchain found (cargo); install Rust >= 1.95 with rustup first" >&2
    exit 1
fi
# The test command gates on rustfmt's layout and clippy's warnings (test.sh).
if ! cargo clippy --version >/dev/null 2>&1 && have rustup; then
    rustup component add clippy >/dev/null
fi
if ! cargo fmt --version >/dev/null 2>&1 && have rustup; then
    rustup component add rustfmt >/dev/null
fi
