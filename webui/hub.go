package webui

import (
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// hub fans the published messages out to the WebSocket clients. The
// publisher never waits for a client: each client has a bounded queue, and
// a client whose queue is full is dropped.
type hub struct {
	log          *slog.Logger
	queue        int
	writeTimeout time.Duration
	pingEvery    time.Duration

	mu      sync.Mutex
	clients map[*client]struct{}
	last    *websocket.PreparedMessage // the newest message, sent to new clients at once

	dropped atomic.Uint64 // clients dropped because they fell behind or failed
}

type client struct {
	conn *websocket.Conn
	send chan *websocket.PreparedMessage
	once sync.Once
	done chan struct{}
}

func newHub(log *slog.Logger, queue int, writeTimeout time.Duration) *hub {
	return &hub{
		log:          log,
		queue:        queue,
		writeTimeout: writeTimeout,
		pingEvery:    25 * time.Second,
		clients:      map[*client]struct{}{},
	}
}

// stop closes a client's connection once; its goroutines then exit.
func (c *client) stop() {
	c.once.Do(func() {
		close(c.done)
		c.conn.Close()
	})
}

// publish queues pm for every client without blocking and drops the clients
// that cannot take it.
func (h *hub) publish(pm *websocket.PreparedMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last = pm
	for c := range h.clients {
		select {
		case c.send <- pm:
		default:
			delete(h.clients, c)
			h.dropped.Add(1)
			h.log.Info("websocket client dropped: too slow", "remote", c.conn.RemoteAddr().String())
			c.stop()
		}
	}
}

// count returns the number of connected clients.
func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

func (h *hub) remove(c *client, failed bool) {
	h.mu.Lock()
	_, ok := h.clients[c]
	delete(h.clients, c)
	h.mu.Unlock()
	if ok && failed {
		h.dropped.Add(1)
	}
	c.stop()
}

// closeAll disconnects every client (server shutdown).
func (h *hub) closeAll() {
	h.mu.Lock()
	cs := h.clients
	h.clients = map[*client]struct{}{}
	h.mu.Unlock()
	for c := range cs {
		c.stop()
	}
}

// serve runs one client until it disconnects or is dropped.
func (h *hub) serve(stop <-chan struct{}, conn *websocket.Conn) {
	c := &client{conn: conn, send: make(chan *websocket.PreparedMessage, h.queue), done: make(chan struct{})}
	h.mu.Lock()
	if h.last != nil {
		c.send <- h.last
	}
	h.clients[c] = struct{}{}
	h.mu.Unlock()

	// Reader: the stream is one-way; reading handles pongs and close
	// frames and notices a vanished peer.
	go func() {
		conn.SetReadLimit(4096)
		deadline := func() { conn.SetReadDeadline(time.Now().Add(2*h.pingEvery + h.writeTimeout)) }
		deadline()
		conn.SetPongHandler(func(string) error { deadline(); return nil })
		for {
			if _, _, err := conn.NextReader(); err != nil {
				h.remove(c, false)
				return
			}
			deadline()
		}
	}()

	ping := time.NewTicker(h.pingEvery)
	defer ping.Stop()
	for {
		select {
		case pm := <-c.send:
			conn.SetWriteDeadline(time.Now().Add(h.writeTimeout))
			if err := conn.WritePreparedMessage(pm); err != nil {
				h.remove(c, true)
				return
			}
		case <-ping.C:
			if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(h.writeTimeout)); err != nil {
				h.remove(c, true)
				return
			}
		case <-c.done:
			return
		case <-stop:
			conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down"), time.Now().Add(time.Second))
			h.remove(c, false)
			return
		}
	}
}

// upgrader returns the WebSocket upgrader with the origin check.
func (s *Server) upgrader() *websocket.Upgrader {
	return &websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		ReadBufferSize:   1024,
		WriteBufferSize:  16 << 10,
		CheckOrigin:      s.origins.checkWebSocket,
	}
}

// handleWS upgrades to the stream. It accepts Basic credentials or a ticket
// from /api/stream/ticket; browsers must come from this origin.
func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	if !s.check(w, r, func() bool { return s.tickets.redeem(r.URL.Query().Get("ticket"), time.Now()) }) {
		return
	}
	if !s.origins.checkWebSocket(r) {
		writeError(w, http.StatusForbidden, "cross-origin WebSocket refused")
		return
	}
	conn, err := s.upgrader().Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	s.hub.serve(s.stopped, conn)
}
