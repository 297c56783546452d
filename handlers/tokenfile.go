package handlers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/authvault/authvault/handlers/internal/kubeconf"
	"github.com/authvault/authvault/login"
)

// RereadAfter is the longest a token read from a file is used before the file
// is read again (the credential's ConnectionInfo.RefreshAfter): projected
// service-account tokens rotate under a running pod.
const RereadAfter = time.Minute

// maxTokenFile bounds a token file: a larger file is an error, and no more
// than this is read.
const maxTokenFile = 1 << 20

// TokenFile returns a handler that reads a bearer token from path on every
// login and combines it with base, which gives the server, CA and the rest.
// Surrounding whitespace is trimmed. The file must be a regular file (or a
// symbolic link to one) of at most 1 MiB holding one token: a missing,
// unreadable, empty or larger file, a directory, a named pipe or a device,
// and a token with a control character inside (CR, LF, NUL, tab...) are
// errors that name the path and never quote the content. A directory, any
// other non-regular file and a file it may not read are permanent errors.
//
// The credential expires at the token's exp claim when it is a JWT (or at
// base's Expiration, if sooner), else never, and asks the vault to read the
// file again RereadAfter after each read (or after base's RefreshAfter, if
// sooner): a rotated token is picked up in the background, without any
// caller waiting, and a token that has not changed is kept, with no new
// login in the vault's log.
//
// The handler is named "token file <path>"; its metric label is "token
// file".
func TokenFile(path string, base login.ConnectionInfo) login.Handler {
	return login.Named("token file "+path, "token file", func(context.Context) (*login.ConnectionInfo, error) {
		token, err := readToken(path)
		if err != nil {
			return nil, err
		}
		info := base
		info.Token = token
		if exp, ok := kubeconf.TokenExpiry(token); ok && (info.Expiration.IsZero() || exp.Before(info.Expiration)) {
			info.Expiration = exp
		}
		if info.RefreshAfter <= 0 || info.RefreshAfter > RereadAfter {
			info.RefreshAfter = RereadAfter
		}
		return &info, nil
	})
}

// readToken reads the one token in the file at path, reading no more than
// maxTokenFile bytes and never blocking on a named pipe.
func readToken(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openNonBlocking, 0)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return "", login.Permanent(fmt.Errorf("handlers: token file: %w", err))
		}
		return "", fmt.Errorf("handlers: token file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("handlers: token file: %w", err)
	}
	switch mode := st.Mode(); {
	case mode.IsDir():
		return "", login.Permanent(fmt.Errorf("handlers: token file %s is a directory", path))
	case !mode.IsRegular():
		return "", login.Permanent(fmt.Errorf("handlers: token file %s is not a regular file (%s)", path, fileKind(mode)))
	case st.Size() > maxTokenFile:
		return "", fmt.Errorf("handlers: token file %s is larger than 1 MiB (%d bytes)", path, st.Size())
	}
	raw, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("handlers: token file: %w", err)
	}
	if len(raw) > maxTokenFile {
		return "", fmt.Errorf("handlers: token file %s is larger than 1 MiB", path)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return "", fmt.Errorf("handlers: token file %s is empty", path)
	}
	if i := strings.IndexFunc(token, isControl); i >= 0 {
		return "", fmt.Errorf("handlers: token file %s holds a control character inside the token (at byte %d); want one token on one line", path, i)
	}
	return token, nil
}

// isControl reports a control character, C0, DEL or C1, as Validate does:
// no token holds one, and this check names the file.
func isControl(r rune) bool { return unicode.IsControl(r) }

// fileKind names what a non-regular file is.
func fileKind(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a device"
	default:
		return "mode " + mode.Type().String()
	}
}
