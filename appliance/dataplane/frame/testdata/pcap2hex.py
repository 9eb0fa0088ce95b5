import struct, subprocess, re, sys
def frames(p):
    d=open(p,'rb').read(); off=24; out=[]
    while off < len(d):
        ts,tu,incl,orig=struct.unpack('<IIII', d[off:off+16]); off+=16
        if off+incl > len(d) or incl > 65535: break
        out.append(d[off:off+incl]); off+=incl
    return out
def descs(p):
    return subprocess.run(['tcpdump','-nr',p,'-vv'],capture_output=True,text=True).stdout
rules=[
 ('arp-request', r'Request who-has'),
 ('arp-reply', r'Reply 192'),
 ('icmp-echo-request', r'ICMP echo request, id \d+, seq 1, length 64'),
 ('icmp-echo-reply', r'ICMP echo reply, id \d+, seq 1, length 64'),
 ('ipv4-frag-first', r'ICMP echo request, id \d+, seq 1, length 1480'),
 ('ipv4-frag-reply-first', r'ICMP echo reply, id \d+, seq 1, length 1480'),
 ('ipv4-frag-later', r'offset 1480.*flags \[\+\]'),
 ('ipv4-frag-last', r'offset 2960, flags \[none\]'),
 ('ipv6-ns', r'neighbor solicitation, length 32, who has fd00:77::2'),
 ('ipv6-ns-dad', r'neighbor solicitation, length 32, who has fe80'),
 ('ipv6-na', r'neighbor advertisement'),
 ('icmpv6-echo-request', r'payload length: 64\).*echo request, id \d+, seq 1'),
 ('icmpv6-echo-reply', r'payload length: 64\).*echo reply, id \d+, seq 1'),
 ('ipv6-frag-first', r'frag \(0x[0-9a-f]+:0\|1448\) ICMP6, echo request'),
 ('ipv6-frag-later', r'frag \(0x[0-9a-f]+:1448\|1448\)'),
 ('ipv6-frag-last', r'frag \(0x[0-9a-f]+:2896\|112\)'),
 ('udp4', r'33434: \[udp sum ok\] UDP'),
 ('icmp-port-unreachable', r'udp port 33434 unreachable'),
 ('udp6', r'33435: \[udp sum ok\] UDP'),
 ('icmpv6-port-unreachable', r'unreachable port'),
 ('tcp4-syn', r'192.168.77.2.9: Flags \[S\]'),
 ('tcp4-rst-ack', r'192.168.77.2.9 > .*Flags \[R.\]'),
 ('tcp6-syn', r'fd00:77::2.9: Flags \[S\]'),
 ('tcp6-rst-ack', r'fd00:77::2.9 > .*Flags \[R.\]'),
 ('tcp4-syn-ack', r'Flags \[S.\]'),
 ('tcp4-data', r'Flags \[P.\]'),
 ('tcp4-ack-timestamps', r'Flags \[\.\], cksum 0x[0-9a-f]+ \(correct\), seq 1, ack 1, win 63, options \[nop,nop,TS'),
 ('mldv2-report-hop-by-hop', r'multicast listener report v2'),
 ('ipv6-router-solicitation', r'router solicitation'),
 ('dhcp-discover', r'DHCP-Message.*Discover|BOOTP/DHCP, Request'),
]
out=[]
seen=set()
for p in sys.argv[1:]:
    fr=frames(p)
    # tcpdump -vv prints continuation lines; split on timestamp lines
    recs=re.split(r'\n(?=\S)', descs(p).strip())
    assert len(recs)==len(fr),(len(recs),len(fr))
    for f,r in zip(fr,recs):
        if 'incorrect' in r or 'bad' in r.lower(): continue
        for name,rx in rules:
            if name in seen: continue
            if re.search(rx,r,re.S):
                seen.add(name); out.append((name,f,r.splitlines()[0])); break
for name,_ in rules:
    if name not in seen: print('MISSING',name,file=sys.stderr)
for name,f,r in out:
    print('#', r[16:].strip()[:150])
    print(name, f.hex())
