// Command greeter is the service of the addon example: it listens on
// localhost behind cmd/addon-proxy and greets each caller by the name the
// proxy verified. It handles no credential.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to listen on: localhost, so that only the proxy in the pod reaches it")
	flag.Parse()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		user := r.Header.Get("X-Authenticated-User")
		if user == "" { // not through the proxy
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "hello %s\n", user)
	})
	srv := &http.Server{Addr: *listen, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
