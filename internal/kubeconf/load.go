package kubeconf

import (
	"errors"
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

// withoutContent replaces in msg every word of data at least minQuoted long.
func withoutContent(msg string, data []byte) string {
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
