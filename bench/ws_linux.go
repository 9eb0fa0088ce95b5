package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// dashboardPassword is the password the harness gives the appliance's
// dashboard (user gokrazy).
const dashboardPassword = "e1kbench"

// streamClients are dashboard WebSocket clients reading /api/stream and
// discarding what they read.
type streamClients struct {
	conns []*websocket.Conn
	msgs  atomic.Uint64
	wg    sync.WaitGroup
}

// basicAuth is the Authorization header value for user and password.
func basicAuth(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// startWSClients connects n clients to ws://addr/api/stream from network
// namespace ns (the sockets stay in ns), retrying until timeout while the
// dashboard comes up, and starts reading.
func startWSClients(ctx context.Context, ns, addr string, n int, timeout time.Duration) (*streamClients, error) {
	c := &streamClients{}
	hdr := http.Header{"Authorization": {basicAuth("gokrazy", dashboardPassword)}}
	url := "ws://" + addr + "/api/stream"
	err := inNetns(ns, func() error {
		d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
		deadline := time.Now().Add(timeout)
		for len(c.conns) < n {
			conn, resp, err := d.DialContext(ctx, url, hdr)
			if err != nil {
				if resp != nil {
					return fmt.Errorf("dashboard stream: %s: %w (HTTP %s)", url, err, resp.Status)
				}
				if time.Now().After(deadline) || ctx.Err() != nil {
					return fmt.Errorf("dashboard stream: %s: %w", url, err)
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
			c.conns = append(c.conns, conn)
		}
		return nil
	})
	for _, conn := range c.conns {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for {
				if _, _, err := conn.NextReader(); err != nil {
					return
				}
				c.msgs.Add(1)
			}
		}()
	}
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// Messages is the number of messages the clients received so far.
func (c *streamClients) Messages() uint64 { return c.msgs.Load() }

// Close disconnects the clients and waits for their readers.
func (c *streamClients) Close() error {
	var errs []error
	for _, conn := range c.conns {
		if err := conn.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	c.wg.Wait()
	return errors.Join(errs...)
}
