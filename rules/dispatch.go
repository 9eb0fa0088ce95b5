package rules

// Dispatch: before probing, a lookup narrows the subtables down to those
// that can match the key's class, made of its chain, connection state,
// family and L4 protocol (all in packed word 0). A subtable is left out of
// a class when one of these fields is in its mask and none of its entries
// has the class's value there: a v4 key never visits IPv6 subtables, a TCP
// key never visits UDP or ICMP ones, a new connection never visits the
// "ct state established" subtable.

const (
	nChainClass = 4 // forward, input, output, other
	nCtClass    = 7 // none, invalid, established, related, new, untracked, several bits
	nEtherClass = 3 // ip, ip6, other
	nProtoClass = 5 // tcp, udp, icmp, icmpv6, other
	numClasses  = nChainClass * nCtClass * nEtherClass * nProtoClass
)

var ctClassOf, protoClassOf [256]uint8

func init() {
	for i := range ctClassOf {
		ctClassOf[i] = nCtClass - 1
		protoClassOf[i] = nProtoClass - 1
	}
	ctClassOf[0] = 0
	for b := range 5 {
		ctClassOf[1<<b] = uint8(b + 1)
	}
	protoClassOf[ProtoTCP], protoClassOf[ProtoUDP] = 0, 1
	protoClassOf[ProtoICMP], protoClassOf[ProtoICMPv6] = 2, 3
}

func etherClassOf(e uint16) int {
	switch EtherType(e) {
	case EtherTypeIPv4:
		return 0
	case EtherTypeIPv6:
		return 1
	}
	return 2
}

// classParts splits word 0 of a packed key into its class values.
func classParts(w0 uint64) (chain, ct, ether, proto int) {
	return min(int(w0>>56), nChainClass-1), int(ctClassOf[uint8(w0>>48)]),
		etherClassOf(uint16(w0 >> 32)), int(protoClassOf[uint8(w0>>24)])
}

func classOf(w0 uint64) int {
	chain, ct, ether, proto := classParts(w0)
	return ((chain*nCtClass+ct)*nEtherClass+ether)*nProtoClass + proto
}

// classSet records, per class dimension, which values a subtable's entries
// have (bit v for value v); all bits when the field is not in the mask.
type classSet struct {
	chain, ct, ether, proto uint8
}

func (cs *classSet) init(mask *packed) {
	*cs = classSet{chain: 0xff, ct: 0xff, ether: 0xff, proto: 0xff}
	if mask[0]&kfChain.ones() != 0 {
		cs.chain = 0
	}
	if mask[0]&kfCt.ones() != 0 {
		cs.ct = 0
	}
	if mask[0]&kfEther.ones() != 0 {
		cs.ether = 0
	}
	if mask[0]&kfProto.ones() != 0 {
		cs.proto = 0
	}
}

// add records the class values of entry word 0 for the fields in mask.
func (cs *classSet) add(mask, w0 uint64) {
	chain, ct, ether, proto := classParts(w0)
	if mask&kfChain.ones() != 0 {
		cs.chain |= 1 << chain
	}
	if mask&kfCt.ones() != 0 {
		cs.ct |= 1 << ct
	}
	if mask&kfEther.ones() != 0 {
		cs.ether |= 1 << ether
	}
	if mask&kfProto.ones() != 0 {
		cs.proto |= 1 << proto
	}
}

func (cs *classSet) has(class int) bool {
	proto := class % nProtoClass
	class /= nProtoClass
	ether := class % nEtherClass
	class /= nEtherClass
	ct := class % nCtClass
	chain := class / nCtClass
	return cs.chain&(1<<chain) != 0 && cs.ct&(1<<ct) != 0 && cs.ether&(1<<ether) != 0 && cs.proto&(1<<proto) != 0
}

// buildDispatch fills t.classes: per class the subtables (in probe order)
// that can match a key of that class.
func (t *Table) buildDispatch() {
	for c := range numClasses {
		start := len(t.classList)
		for i := range t.subs {
			if t.subs[i].classes.has(c) {
				t.classList = append(t.classList, uint32(i))
			}
		}
		t.classes[c] = [2]uint32{uint32(start), uint32(len(t.classList))}
	}
}
