package main

import (
	"net/http"
	"time"

	"github.com/gorilla/websocket"
)

// writeWait bounds the sending of one message to a watcher.
const writeWait = 10 * time.Second

// upgrader takes a WebSocket's handshake. Its origin is addon-proxy's to
// check, not the dashboard's: addon-proxy refuses a handshake from a page
// of another site before it is verified, and the Host this service sees
// is its own address on localhost, not the one the browser knows, so
// gorilla's same-origin check would refuse every browser.
var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// watch is a WebSocket at GET /notes (through the API server, the
// resource notes: list, or watch with ?watch=1): every note kept so far,
// then each one as it is added, a JSON object {"author", "text"} a
// message, until the caller closes it or the dashboard stops.
func (d *dashboard) watch(w http.ResponseWriter, r *http.Request, _ identity) {
	select {
	case d.watchers <- struct{}{}:
		defer func() { <-d.watchers }()
	default:
		http.Error(w, "dashboard: too many watchers: try again later", http.StatusServiceUnavailable)
		return
	}
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered the caller
	}
	defer conn.Close()
	gone := make(chan struct{})
	go func() {
		// The caller sends nothing: a read ends when it closes.
		defer close(gone)
		for {
			if _, _, err := conn.NextReader(); err != nil {
				return
			}
		}
	}()
	defer func() { _ = conn.Close(); <-gone }()
	sent := 0 // notes sent, counted as d.added counts them
	for {
		d.mu.Lock()
		first := d.added - len(d.notes) // d.notes[0] is note first+1
		pending := d.notes[max(sent-first, 0):]
		out := append([]note(nil), pending...)
		changed := d.changed
		sent = d.added
		d.mu.Unlock()
		for _, n := range out {
			_ = conn.SetWriteDeadline(time.Now().Add(writeWait))
			if err := conn.WriteJSON(n); err != nil {
				return
			}
		}
		select {
		case <-changed:
		case <-gone:
			return
		case <-d.stopped:
			_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "dashboard stopping"), time.Now().Add(time.Second))
			return
		}
	}
}

// stop ends the watchers: a server's Shutdown does not wait for, nor
// close, the connections they hijacked.
func (d *dashboard) stop() { close(d.stopped) }
