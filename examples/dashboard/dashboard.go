package main

import (
	"bytes"
	"errors"
	"html/template"
	"log"
	"net/http"
	"strings"
	"sync"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/addonauth"
)

// The identity headers addon-proxy sets: the caller it verified. The
// dashboard's middleware reads them only from a connection with
// addon-proxy's client certificate.
const (
	headerUser   = "X-Authenticated-User"
	headerUID    = "X-Authenticated-UID"
	headerGroups = "X-Authenticated-Groups" // one value per group
	headerExtra  = "X-Authenticated-Extra-" // a prefix: one header per key
)

const (
	// maxNotes is how many notes are kept: the newest; an older one is
	// dropped when a new one comes.
	maxNotes = 100
	// maxText is the longest note, in bytes (of UTF-8).
	maxText = 1 << 10
	// maxBody bounds a posted form: the text URL-encoded, at most three
	// bytes a byte, with room for the field's name.
	maxBody = 4 * maxText
	// maxWatchers bounds the WebSockets open at once, and
	// maxWatchersPerUser those of one person: one may not take them all.
	maxWatchers        = 100
	maxWatchersPerUser = 5
)

// note is a note and who added it.
type note struct {
	Author string `json:"author"`
	Text   string `json:"text"`
}

// dashboard is the service: the pages, the notes and the health check.
type dashboard struct {
	mux     *http.ServeMux
	stopped chan struct{} // closed by stop: the watchers end
	// caller is who makes a request: the caller the middleware verified
	// (addonauth.UserFrom). Tests set their own.
	caller func(*http.Request) (identity, bool)
	// cluster lists what the caller may see, as them; nil: no cluster.
	cluster kubernetes.Interface
	// namespace is the ConfigMaps page's when the request names none.
	namespace string

	mu           sync.Mutex     // guards what follows
	notes        []note         // oldest first, at most maxNotes
	added        int            // notes ever added: the last of notes is the added-th
	changed      chan struct{}  // closed when a note is added, then made anew
	watching     map[string]int // WebSockets open, by user
	watchersOpen int            // WebSockets open in all
}

func newDashboard() *dashboard {
	d := &dashboard{mux: http.NewServeMux(), stopped: make(chan struct{}), changed: make(chan struct{}), watching: map[string]int{},
		caller: verifiedCaller, namespace: "default"}
	// Nothing private at the root: through the API server, the root
	// /apis/G/V/ is a non-resource URL every authenticated user may GET
	// (system:discovery), where /apis/G/V/notes is the resource "notes"
	// (list, or watch with ?watch=1; create for a POST), which RBAC grants
	// to some.
	d.mux.HandleFunc("GET /{$}", d.identified(d.landing))
	d.mux.HandleFunc("GET /notes", d.identified(d.notesPage))
	d.mux.HandleFunc("POST /notes", d.identified(d.add))
	d.mux.HandleFunc("GET /configmaps", d.identified(d.configMaps))
	d.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	return d
}

func (d *dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The page is the caller's own: no cache keeps it for another, no
	// other site frames it, and it runs no script.
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	d.mux.ServeHTTP(w, r)
}

// identity is the caller addon-proxy verified.
type identity struct {
	User   string
	UID    string
	Groups []string
}

// verifiedCaller is the caller the middleware verified for r, from its
// context: never from a header, which anyone could send.
func verifiedCaller(r *http.Request) (identity, bool) {
	u, ok := addonauth.UserFrom(r.Context())
	return identity{User: u.Name, UID: u.UID, Groups: u.Groups}, ok && u.Name != ""
}

// identified runs h with the caller's identity, or answers 401 when no
// one was verified.
func (d *dashboard) identified(h func(http.ResponseWriter, *http.Request, identity)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who, ok := d.caller(r)
		if !ok {
			http.Error(w, "dashboard: no verified caller: the dashboard must run behind addon-proxy, whose client certificate vouches for the caller it names", http.StatusUnauthorized)
			return
		}
		h(w, r, who)
	}
}

// landingHTML is GET /: a link to the notes, and nothing else.
var landingHTML = []byte(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>authvault dashboard</title>
</head>
<body>
<h1>Dashboard</h1>
<p>The notes are on <a id="notes-link" href="notes">the notes page</a>, for those the cluster lets list them
(the resource notes of this API group, in RBAC).</p>
<p><a id="configmaps-link" href="configmaps">The ConfigMaps you may see</a>: the dashboard lists them as you,
so the cluster's RBAC decides what each person sees.</p>
</body>
</html>
`)

func (d *dashboard) landing(w http.ResponseWriter, _ *http.Request, _ identity) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(landingHTML)
}

// pageHTML is GET /notes. Its ids (user, groups, uid, notes, empty, add,
// text, submit) are for tests and scripts to find what they read;
// html/template escapes every name and note.
var pageHTML = template.Must(template.New("page").Funcs(template.FuncMap{
	"join": func(s []string) string { return strings.Join(s, ", ") },
}).Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>authvault dashboard</title>
</head>
<body>
<h1>Dashboard</h1>
<p>signed in as <strong id="user">{{.User}}</strong>
{{- if .Groups}} (groups <span id="groups">{{join .Groups}}</span>){{else}} (no groups<span id="groups"></span>){{end}}
{{- with .UID}}, uid <span id="uid">{{.}}</span>{{end}}</p>
<h2>Notes</h2>
<ul id="notes">
{{- range .Notes}}
<li>{{.Author}}: {{.Text}}</li>
{{- end}}
</ul>
{{- if not .Notes}}
<p id="empty">No notes yet: add the first one below.</p>
{{- end}}
<form id="add" method="post" action="notes">
<input id="text" name="text" maxlength="1024" required aria-label="note">
<button id="submit" type="submit">Add note</button>
</form>
<p><a id="configmaps-link" href="configmaps">The ConfigMaps you may see</a></p>
</body>
</html>
`))

// notesPage is GET /notes: the page, or, for a WebSocket's handshake,
// the notes as they come (watch).
func (d *dashboard) notesPage(w http.ResponseWriter, r *http.Request, who identity) {
	if websocket.IsWebSocketUpgrade(r) {
		d.watch(w, r, who)
		return
	}
	d.mu.Lock()
	notes := append([]note(nil), d.notes...)
	d.mu.Unlock()
	var buf bytes.Buffer
	if err := pageHTML.Execute(&buf, struct {
		identity
		Notes []note
	}{who, notes}); err != nil {
		log.Printf("dashboard: rendering the page: %v", err)
		http.Error(w, "dashboard: could not render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = buf.WriteTo(w)
}

// add is POST /notes: it keeps the form's text under the caller's name and
// sends the browser back to the page with 303 to /notes, an absolute path
// that addon-proxy puts under its prefix.
func (d *dashboard) add(w http.ResponseWriter, r *http.Request, who identity) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			http.Error(w, "dashboard: the form is too large: a note is at most 1 KiB", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "dashboard: "+err.Error(), http.StatusBadRequest)
		return
	}
	text := r.PostForm.Get("text")
	switch {
	case strings.TrimSpace(text) == "":
		http.Error(w, "dashboard: the note is empty", http.StatusBadRequest)
		return
	case len(text) > maxText:
		http.Error(w, "dashboard: the note is longer than 1 KiB", http.StatusBadRequest)
		return
	}
	d.mu.Lock()
	d.notes = append(d.notes, note{Author: who.User, Text: text})
	if over := len(d.notes) - maxNotes; over > 0 {
		d.notes = append(d.notes[:0], d.notes[over:]...)
	}
	d.added++
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
	http.Redirect(w, r, "/notes", http.StatusSeeOther)
}
