// Package dhcptest runs real DHCP clients (isc-dhcp-client's dhclient, busybox's udhcpc) in test namespaces and records what they are told.
package dhcptest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Namespace runs commands inside a network namespace (netnstest's does).
type Namespace interface {
	Command(args ...string) *exec.Cmd
}

// recordScript is the clients' script (after a line setting EVENTS: dhclient
// clears the environment): it configures the client's interface the way
// the distribution's scripts would, inside the client's namespace only:
// addresses and the default route, never /etc/resolv.conf (the machine's);
// then it appends one line per call to $EVENTS (so that a test seeing the
// event finds the address and route in place).
const recordScript = `if [ -n "$reason" ]; then
	ev=$reason a=$new_ip_address m=$new_subnet_mask gw=$new_routers
	line="event=$reason|ip=$new_ip_address|mask=$new_subnet_mask|router=$new_routers|dns=$new_domain_name_servers|domain=$new_domain_name|ntp=$new_ntp_servers|mtu=$new_interface_mtu|lease=$new_dhcp_lease_time|server=$new_dhcp_server_identifier"
else
	ev=$1 a=$ip m=$mask gw=$router
	line="event=$1|ip=$ip|mask=$subnet|router=$router|dns=$dns|domain=$domain|ntp=$ntpsrv|mtu=$mtu|lease=$lease|server=$serverid"
fi
case $ev in
BOUND|RENEW|REBIND|REBOOT|bound|renew)
	ip addr flush dev "$interface"
	ip addr add "$a/$m" dev "$interface"
	if [ -n "$ROUTE" ] && [ -n "$gw" ]; then ip route replace default via "${gw%% *}" dev "$interface"; fi ;;
RELEASE|EXPIRE|STOP|FAIL|deconfig|nak|leasefail)
	ip addr flush dev "$interface" ;;
esac
echo "$line" >>"$EVENTS"
exit 0
`

// Client is a DHCP client on interface Iface of a namespace, named Name
// (its host name is Name-dhclient or Name-udhcpc), with its files in Dir.
type Client struct {
	NS    Namespace
	Iface string
	Name  string
	Dir   string
	// Route: the script also sets the default route via the router option.
	Route  bool
	events string
	script string
}

// New returns a client and writes its script.
func New(t testing.TB, ns Namespace, iface, name, dir string, route bool) *Client {
	t.Helper()
	c := &Client{NS: ns, Iface: iface, Name: name, Dir: dir, Route: route,
		events: filepath.Join(dir, name+".events"), script: filepath.Join(dir, name+".sh")}
	head := "#!/bin/sh\nEVENTS=" + c.events + "\n"
	if route {
		head += "ROUTE=1\n"
	}
	if err := os.WriteFile(c.script, []byte(head+recordScript), 0o755); err != nil {
		t.Fatal(err)
	}
	return c
}

// Start starts a client program in the namespace; it is killed at cleanup
// (its output logged when the test failed or runs verbose).
func (c *Client) Start(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	cmd := c.NS.Command(args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() || testing.Verbose() {
			t.Logf("%s %s output:\n%s", c.Name, args[0], out.String())
		}
	})
	return cmd
}

// RunOnce runs a client program to its end.
func (c *Client) RunOnce(t testing.TB, args ...string) string {
	t.Helper()
	out, err := c.NS.Command(args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %v\n%s", c.Name, args, err, out)
	}
	return string(out)
}

// Dhclient starts dhclient in the foreground with its own config, lease
// and pid files.
func (c *Client) Dhclient(t testing.TB, extra ...string) *exec.Cmd {
	t.Helper()
	return c.Start(t, append([]string{"dhclient", "-4", "-d", "-v"}, append(c.DhclientFiles(t), extra...)...)...)
}

// DhclientFiles are dhclient's file arguments and the interface, for
// dhclient -r and the like.
func (c *Client) DhclientFiles(t testing.TB) []string {
	cf := filepath.Join(c.Dir, c.Name+".dhclient.conf")
	if _, err := os.Stat(cf); err != nil {
		conf := "send host-name \"" + c.Name + "-dhclient\";\n" +
			"request subnet-mask, broadcast-address, routers, domain-name, domain-name-servers, ntp-servers, interface-mtu;\n"
		if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"-cf", cf, "-sf", c.script,
		"-pf", filepath.Join(c.Dir, c.Name+".pid"), "-lf", filepath.Join(c.Dir, c.Name+".leases"), c.Iface}
}

// Udhcpc starts udhcpc in the foreground.
func (c *Client) Udhcpc(t testing.TB, extra ...string) *exec.Cmd {
	t.Helper()
	return c.Start(t, append([]string{"udhcpc", "-f", "-i", c.Iface, "-s", c.script, "-t", "20", "-T", "1",
		"-x", "hostname:" + c.Name + "-udhcpc"}, extra...)...)
}

// Event is one call of the script: event (its reason), ip, mask, router,
// dns, domain, ntp, mtu, lease, server.
type Event map[string]string

// Events returns the script's calls so far.
func (c *Client) Events() []Event {
	b, _ := os.ReadFile(c.events)
	var evs []Event
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		ev := Event{}
		for _, kv := range strings.Split(line, "|") {
			k, v, _ := strings.Cut(kv, "=")
			ev[k] = v
		}
		evs = append(evs, ev)
	}
	return evs
}

// WaitEvent waits up to 30 s for the first event, from the n-th on, whose
// kind is one of kinds, and returns it with its index.
func (c *Client) WaitEvent(t testing.TB, from int, kinds ...string) (Event, int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for i, ev := range c.Events() {
			if i < from {
				continue
			}
			for _, k := range kinds {
				if ev["event"] == k {
					return ev, i
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(c.events)
	t.Fatalf("%s: no %v event within 30 s; events:\n%s", c.Name, kinds, b)
	return nil, 0
}
