package kubeconf

import (
	"errors"
	"regexp"
	"strings"
	"unicode"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Load parses a kubeconfig held in memory (a Secret's value), as clientcmd
// parses a file. The YAML parser's errors may quote what they choke on (an
// invalid map key is printed whole), and that can be a token or a key: every
// word of data that an error repeats is cut out of it.
func Load(data []byte) (*clientcmdapi.Config, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, errors.New("the kubeconfig is empty")
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, errors.New("not a valid kubeconfig: " + withoutContent(err.Error(), data))
	}
	return cfg, nil
}

// minQuoted is the shortest word of the content that withoutContent cuts:
// shorter ones are YAML keys and punctuation, no secret.
const minQuoted = 6

// quoted matches what a parser's message quotes: a Go string literal (an
// invalid map key is printed with %#v, escapes and all), a YAML anchor or
// character in single quotes, a value in backquotes. Up to two characters
// inside ('-', ':') are punctuation the message names, and stay.
var quoted = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.){3,}\"|'[^']{3,}'|`[^`]{3,}`")

// withoutContent cuts out of msg everything it quotes, and every word of
// data at least minQuoted long that it repeats unquoted. The quoted form
// need not be the text of data (YAML escapes, a flow key split at colons
// into short words, an anchor without its *), so it goes whole.
func withoutContent(msg string, data []byte) string {
	msg = quoted.ReplaceAllString(msg, "[content]")
	words := strings.FieldsFunc(string(data), func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune(`:,[]{}"'`, r)
	})
	for _, w := range words {
		if len(w) >= minQuoted && strings.Contains(msg, w) {
			msg = strings.ReplaceAll(msg, w, "[content]")
		}
	}
	return msg
}
