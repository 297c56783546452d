// Command dashboard is the web service of the browser walk-through: a page
// that shows who is signed in and keeps notes, each with the name of who
// added it. A person reaches it from a browser through kubectl proxy and the
// API server's aggregation layer, with addon-proxy in front of it; it
// handles no credential and trusts only the identity headers addon-proxy
// sets.
//
//	go run ./examples/dashboard --listen 127.0.0.1:8080
//
// # What runs in front of it
//
// From the browser to the dashboard, a request passes:
//
//  1. kubectl proxy on 127.0.0.1:8001, which adds the person's kubeconfig
//     credential: the browser opens
//     http://127.0.0.1:8001/apis/GROUP/VERSION/ (the trailing slash
//     matters: the page's links are relative to it).
//  2. The kube-apiserver, which authenticates the person and, for the path
//     of an APIService (GROUP/VERSION, backed by a Service), forwards the
//     request through its aggregation layer with the person's identity in
//     X-Remote-User, X-Remote-Uid and X-Remote-Group, over TLS with its
//     front-proxy client certificate.
//  3. addon-proxy --apiservice GROUP/VERSION --upstream
//     http://127.0.0.1:8080, which trusts those headers only from that
//     certificate, refuses cross-site unsafe requests, strips the prefix
//     /apis/GROUP/VERSION and forwards to the dashboard with the identity
//     in X-Authenticated-User, X-Authenticated-UID and
//     X-Authenticated-Groups (one value per group).
//  4. The dashboard, on localhost only.
//
// On the way back addon-proxy puts a redirect under the prefix again: the
// dashboard's answer to a posted note, 303 to /notes, reaches the browser
// as a page that sends it on to notes, relative to the page it posted
// from (the aggregation layer answers a redirect itself with 502).
//
// # Pages
//
// GET / is a landing page with a link to the notes and nothing else:
// through the API server it is the group-version's root, which every
// authenticated user may GET. GET /notes is the page, which RBAC grants as
// list on the resource notes: "signed in as USER (groups G1, G2)", the
// notes kept so far as "AUTHOR: TEXT", oldest first ("No notes yet" when
// there are none), and a form that posts a note to the relative URL notes.
// POST /notes (create) keeps the field text (at most 1 KiB, not blank)
// under the caller's name and answers 303 to /notes. A WebSocket's
// handshake at GET /notes?watch=1 (watch on notes; without ?watch=1, which
// RBAC authorized as list, it gets 400) gets every note, then each one as
// it is added, as JSON {"author", "text"}, a message each; a person may
// hold five at once. The last
// 100 notes are kept, in memory. A request without X-Authenticated-User
// did not come through addon-proxy and gets 401; GET /healthz needs no
// identity.
package main

import (
	"context"
	"flag"
	"log"
	"net/http"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to listen on: localhost, so that only addon-proxy beside it reaches it")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d := newDashboard()
	srv := &http.Server{Addr: *listen, Handler: d, ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(d.stop) // the WebSockets, which Shutdown does not close
	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServe() }()
	log.Printf("dashboard: listening on %s", *listen)
	select {
	case err := <-served:
		log.Fatal(err)
	case <-ctx.Done():
	}
	// Ctrl-C or SIGTERM: the requests in flight finish first.
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		log.Printf("dashboard: shutting down: %v", err)
	}
}
