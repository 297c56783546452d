package kubeconf

import (
	"errors"
	"fmt"
	"io"
	"os"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/internal/pemdata"
)

// entries are the cluster, user and context a login uses.
type entries struct {
	cluster *clientcmdapi.Cluster
	user    *clientcmdapi.AuthInfo
	kctx    *clientcmdapi.Context
	where   string
}

// fileRef is a field of an entry that names a file.
type fileRef struct {
	where, kind, name, field, path string
	pem                            bool
}

func (e entries) files() []fileRef {
	return []fileRef{
		{origin(e.cluster.LocationOfOrigin, e.where), "cluster", e.kctx.Cluster, "certificate-authority", e.cluster.CertificateAuthority, true},
		{origin(e.user.LocationOfOrigin, e.where), "user", e.kctx.AuthInfo, "client-certificate", e.user.ClientCertificate, true},
		{origin(e.user.LocationOfOrigin, e.where), "user", e.kctx.AuthInfo, "client-key", e.user.ClientKey, true},
		{origin(e.user.LocationOfOrigin, e.where), "user", e.kctx.AuthInfo, "tokenFile", e.user.TokenFile, false},
	}
}

// readable checks that every file the entries name is a regular file that
// can be read, so that a missing certificate, or a path naming a directory,
// fails here, permanently and named with its entry and field, rather than
// later in the transport, retryably and anonymously.
func (e entries) readable() error {
	var errs []error
	for _, f := range e.files() {
		if f.path == "" {
			continue
		}
		if err := readableFile(f.path, f.pem); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s %q: %s: %w", f.where, f.kind, f.name, f.field, err))
		}
	}
	return errors.Join(errs...)
}

// inline refuses every entry that names a file of this machine.
func (e entries) inline() error {
	var errs []error
	for _, f := range e.files() {
		if f.path == "" {
			continue
		}
		data := f.field + "-data"
		if f.field == "tokenFile" {
			data = "token"
		}
		errs = append(errs, fmt.Errorf("%s: %s %q: %s names a file of this machine (%s); a kubeconfig from elsewhere (a Secret, a ClusterProfile, one given without its loading rules) must carry it inline (%s)",
			f.where, f.kind, f.name, f.field, f.path, data))
	}
	return errors.Join(errs...)
}

// maxPEMFile bounds what is read of a CA, certificate or key file.
const maxPEMFile = 1 << 20

// readableFile checks that path is a regular file (after symbolic links, as
// mounted Secrets use them) that this process can open, and, with pem, that
// it holds PEM (a wrong file, a truncated write), so that the login fails
// here, naming the entry, rather than later in the vault. It checks the kind
// first: opening a FIFO would block. The error never quotes the content.
func readableFile(path string, pem bool) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		kind := "not a regular file"
		if fi.IsDir() {
			kind = "a directory"
		}
		return fmt.Errorf("%s is %s", path, kind)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if !pem {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, maxPEMFile+1))
	switch {
	case err != nil:
		return err
	case len(data) > maxPEMFile:
		return fmt.Errorf("%s is larger than %d bytes", path, maxPEMFile)
	case len(data) == 0:
		return fmt.Errorf("%s is empty", path)
	}
	if _, err := pemdata.Decode(data); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
