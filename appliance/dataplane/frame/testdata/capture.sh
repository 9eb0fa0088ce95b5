#!/bin/sh
# Regenerates kernel-frames.hex (needs root, iproute2, ethtool, tcpdump, ping, python3, dhclient):
#   sh capture.sh /tmp/framecap && python3 pcap2hex.py /tmp/framecap/out.pcap > body
# then prepend the header comment of kernel-frames.hex. It touches only two temporary netns.
OUT=${1:-/tmp/framecap}
mkdir -p "$OUT"
set -e
rm -f "$OUT"/ready
A=fcapA$$; B=fcapB$$
ip netns add $A; ip netns add $B
trap "ip netns del $A; ip netns del $B" EXIT
ip -n $A link add v0 type veth peer name v1 netns $B
for ns in $A $B; do ip -n $ns link set lo up; done
ip netns exec $A ethtool -K v0 tx off >/dev/null
ip netns exec $B ethtool -K v1 tx off >/dev/null
ip -n $A link set v0 address 02:00:00:00:00:0a
ip -n $B link set v1 address 02:00:00:00:00:0b
ip -n $A addr add 192.168.77.1/24 dev v0
ip -n $B addr add 192.168.77.2/24 dev v1
ip -n $A addr add fd00:77::1/64 dev v0 nodad
ip -n $B addr add fd00:77::2/64 dev v1 nodad
ip -n $A link set v0 up; ip -n $B link set v1 up
ip netns exec $A tcpdump -i v0 -w "$OUT"/out.pcap -U -s 0 2>/dev/null &
TD=$!
sleep 1
ip netns exec $A ping -c1 -W1 192.168.77.2 >/dev/null
ip netns exec $A ping -c1 -W1 -s 3000 192.168.77.2 >/dev/null
ip netns exec $A ping -6 -c1 -W1 fd00:77::2 >/dev/null
ip netns exec $A ping -6 -c1 -W1 -s 3000 fd00:77::2 >/dev/null
ip netns exec $A python3 -c '
import socket
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.sendto(b"hello frame", ("192.168.77.2", 33434))
s=socket.socket(socket.AF_INET6,socket.SOCK_DGRAM); s.sendto(b"hello frame6", ("fd00:77::2", 33435))
for fam,addr in ((socket.AF_INET,"192.168.77.2"),(socket.AF_INET6,"fd00:77::2")):
    s=socket.socket(fam,socket.SOCK_STREAM); s.settimeout(1)
    try: s.connect((addr, 9))
    except Exception: pass
'
ip netns exec $B python3 -c '
import socket,time
l=socket.socket(socket.AF_INET,socket.SOCK_STREAM); l.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1); l.bind(("0.0.0.0",8080)); l.listen()
open("'"$OUT"'/ready","w").close()
c,_=l.accept(); c.sendall(b"x"*100); time.sleep(0.3); c.close()
' &
while [ ! -e "$OUT"/ready ]; do sleep 0.1; done
ip netns exec $A python3 -c '
import socket
s=socket.create_connection(("192.168.77.2",8080),timeout=2); s.recv(200); s.close()
'
sleep 0.5
ip netns exec $A timeout 4 dhclient -4 -d -1 -lf "$OUT"/lease -pf "$OUT"/pid v0 >/dev/null 2>&1 || true
sleep 0.5
kill $TD; wait $TD || true
