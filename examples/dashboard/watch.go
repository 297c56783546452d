package main

import (
	"net/http"
	"time"

	"github.com/gorilla/websocket"
)

const (
	// writeWait bounds the sending of one message to a watcher.
	writeWait = 10 * time.Second
	// pingEvery is how often a quiet watcher is pinged, and pongWait how
	// long its answer may take: a connection gone dead without a word
	// gives its slot back within pongWait.
	pingEvery = 30 * time.Second
	pongWait  = 2 * pingEvery
)

// upgrader takes a WebSocket's handshake. Its origin is addon-proxy's to
// check, not the dashboard's: addon-proxy refuses a handshake from a page
// of another site before it is verified, and the Host this service sees
// is its own address on localhost, not the one the browser knows, so
// gorilla's same-origin check would refuse every browser.
var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// watch is a WebSocket at GET /notes?watch=1 (through the API server,
// watch on the resource notes): every note kept so far, then each one as
// it is added, a JSON object {"author", "text"} a message, until the
// caller closes it or the dashboard stops. A person has at most
// maxWatchersPerUser open, all of them maxWatchers.
func (d *dashboard) watch(w http.ResponseWriter, r *http.Request, who identity) {
	if r.URL.Query().Get("watch") == "" {
		// RBAC authorized a handshake without it as list, not watch.
		http.Error(w, "dashboard: a WebSocket at /notes needs ?watch=1 (RBAC: watch on notes)", http.StatusBadRequest)
		return
	}
	if !d.take(who.User) {
		http.Error(w, "dashboard: too many watchers: close one, or try again later", http.StatusServiceUnavailable)
		return
	}
	defer d.give(who.User)
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered the caller
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(pongWait))
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(pongWait)) })
	gone := make(chan struct{})
	go func() {
		// The caller sends nothing but pongs: a read ends when it
		// closes, or goes quiet past pongWait.
		defer close(gone)
		for {
			if _, _, err := conn.NextReader(); err != nil {
				return
			}
		}
	}()
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
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
		case <-ping.C:
			if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)); err != nil {
				return
			}
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

// take counts a watcher of user's in, unless user or everyone has as many
// as they may.
func (d *dashboard) take(user string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.watching[user] >= maxWatchersPerUser || d.watchersOpen >= maxWatchers {
		return false
	}
	d.watching[user]++
	d.watchersOpen++
	return true
}

// give counts a watcher of user's out.
func (d *dashboard) give(user string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.watching[user]--; d.watching[user] == 0 {
		delete(d.watching, user)
	}
	d.watchersOpen--
}
