package dashboard

import (
	"context"
	"log/slog"
	"net/netip"
	"strconv"
	"time"

	"e1kbox/appliance/dataplane"
	"e1kbox/rules"
	"e1kbox/webui"
)

// The rule table: its counters for the Rules page, and the log action's
// records for the Logs page.

// Table is the running rule table with its counters.
func (v *Box) Table() webui.RuleTable {
	e := v.engine()
	if e == nil {
		return webui.RuleTable{}
	}
	e.SyncFastPath() // the counters of what the fast path forwarded
	return ruleTable(e)
}

// ruleTable reads the running rule table and its counters.
func ruleTable(e *dataplane.Engine) webui.RuleTable {
	set := e.Rules()
	if set == nil {
		return webui.RuleTable{}
	}
	t, counters := set.Counters()
	now, since := time.Now(), e.Now()
	rt := webui.RuleTable{Subtables: t.Subtables(), Generation: t.Generation()}
	for _, c := range []rules.Chain{rules.Forward, rules.Input, rules.Output} {
		pk, by := set.PolicyCounter(c)
		rt.Policies = append(rt.Policies, webui.PolicyStat{Chain: c.String(), Action: t.Policy(c).String(), Packets: pk, Bytes: by})
	}
	byRule := map[int]rules.RuleCounter{}
	for _, c := range counters {
		byRule[c.Rule] = c
	}
	for i, r := range t.Rules() {
		rs := webui.RuleStat{Chain: r.Chain.String(), Text: ruleText(r), Counted: r.Counter}
		if c, ok := byRule[i]; ok {
			rs.Packets, rs.Bytes = c.Packets, c.Bytes
			if c.LastHit > 0 {
				rs.LastHit = now.Add(-time.Duration(since - c.LastHit))
			}
		}
		rt.Rules = append(rt.Rules, rs)
	}
	return rt
}

// ruleText is a rule's canonical text without its chain.
func ruleText(r rules.Rule) string {
	r.Chain = rules.Forward
	return r.String()
}

// RuleLogs moves the rule `log` action's records (rate-limited in the
// rule set) into the log, as records with source=rule, until ctx ends.
func RuleLogs(ctx context.Context, log *slog.Logger, p Plane) {
	buf := make([]rules.LogRecord, 256)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	var lost uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e, err := p.Engine()
		if err != nil || e.Rules() == nil {
			continue
		}
		set := e.Rules()
		n := set.ReadLogs(buf)
		if n == 0 {
			continue
		}
		names := portNames(e)
		now, enow := time.Now(), e.Now()
		t := set.Table()
		for i := range buf[:n] {
			logRule(ctx, log, &buf[i], t, names, now.Add(-time.Duration(enow-buf[i].Time)))
		}
		if l := set.LogsDropped(); l > lost {
			log.Warn("rule log records lost: the log rings were full", "lost", l-lost)
			lost = l
		}
	}
}

// logRule writes one rule log record: the rule, the verdict, the ports and
// the packet's 5-tuple.
func logRule(ctx context.Context, log *slog.Logger, r *rules.LogRecord, t *rules.Table, names map[uint16]string, at time.Time) {
	k := &r.Key
	rule := "#" + strconv.Itoa(int(r.Rule))
	if t != nil && t.Generation() == r.Table && r.Rule >= 0 && int(r.Rule) < len(t.Rules()) {
		ru := t.Rules()[r.Rule]
		rule += " " + ru.Chain.String() + ": " + ruleText(ru)
	}
	attrs := []slog.Attr{slog.String("source", webui.LogRule), slog.String("rule", rule),
		slog.String("verdict", r.Action.String()), slog.String("chain", k.Chain.String()),
		slog.String("in", names[k.InPort]), slog.String("proto", k.Proto.String())}
	if k.OutPort != 0 || names[k.OutPort] != "" {
		attrs = append(attrs, slog.String("out", names[k.OutPort]))
	}
	var src, dst netip.Addr
	switch k.EtherType {
	case rules.EtherTypeIPv4:
		src, dst = netip.AddrFrom4([4]byte(k.SrcIP[:4])), netip.AddrFrom4([4]byte(k.DstIP[:4]))
	case rules.EtherTypeIPv6:
		src, dst = netip.AddrFrom16(k.SrcIP), netip.AddrFrom16(k.DstIP)
	}
	if src.IsValid() {
		if k.Proto == rules.ProtoTCP || k.Proto == rules.ProtoUDP {
			attrs = append(attrs, slog.String("src", netip.AddrPortFrom(src, k.SrcPort).String()),
				slog.String("dst", netip.AddrPortFrom(dst, k.DstPort).String()))
		} else {
			attrs = append(attrs, slog.String("src", src.String()), slog.String("dst", dst.String()))
		}
	} else {
		attrs = append(attrs, slog.String("src", rules.MAC(k.SrcMAC).String()), slog.String("dst", rules.MAC(k.DstMAC).String()))
	}
	attrs = append(attrs, slog.Int("len", int(r.Bytes)))
	rec := slog.NewRecord(at, slog.LevelInfo, "rule log", 0)
	rec.AddAttrs(attrs...)
	log.Handler().Handle(ctx, rec)
}
