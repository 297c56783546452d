package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"golang.org/x/term"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	clientauthv1beta1 "k8s.io/client-go/pkg/apis/clientauthentication/v1beta1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/handlers/internal/kubeconf"
	"github.com/authvault/authvault/internal/pemdata"
	"github.com/authvault/authvault/login"
)

// maxExecOutput limits a plugin's output: stdout beyond this is an error.
const maxExecOutput = 1 << 20

// execWaitDelay bounds the wait for the plugin's output pipes once it has
// exited or been killed, should a process out of its group (which ended
// with it) hold them. A variable for tests only, which lengthen it so that
// "at once" and "after the delay" are told apart however busy the machine.
var execWaitDelay = 2 * time.Second

// ExecConfig is a client-go credential plugin: the exec section of a
// kubeconfig user, and the cluster it authenticates to.
//
// Every printed form (fmt's verbs, String, GoString, JSON, logr) redacts
// what may be secret: env values (names stay), args, the extension config
// and the cluster's credentials.
type ExecConfig struct {
	// ExecConfig is the exec section: command, args, env (added to the
	// process environment), apiVersion (client.authentication.k8s.io/v1
	// or v1beta1), installHint, provideClusterInfo, config (the cluster's
	// client.authentication.k8s.io/exec extension) and interactiveMode.
	clientcmdapi.ExecConfig

	// Cluster gives every credential its server and TLS settings (Server,
	// CAPath or CAData, Insecure, TLSServerName, ProxyURL), and the plugin
	// its cluster information when ProvideClusterInfo is set.
	// DefaultNamespace and Priority are copied too.
	Cluster login.ConnectionInfo
	// DisableCompression is the cluster's disable-compression, which
	// client-go sends to the plugin with the rest of the cluster
	// information when ProvideClusterInfo is set. Default: false.
	DisableCompression bool
	// ProvideResponse tells the plugin, when the vault runs it because the
	// server rejected its previous credential (login.ReasonFrom gives Kind
	// login.Rejected with a StatusCode), the response that did: the
	// KUBERNETES_EXEC_INFO it gets carries spec.response with the status
	// code and the WWW-Authenticate header, nothing else of the response
	// and nothing of the request:
	//
	//	"response":{"code":401,"header":{"WWW-Authenticate":["Bearer realm=..."]}}
	//
	// This is the ExecInfo response of client-go's original exec plugin
	// proposal, which client-go never shipped: no apiVersion defines it,
	// and a plugin that decodes strictly refuses the unknown field. Set it
	// only for a plugin that expects it. Any other login (first, refresh,
	// expired, a rejection without the response) sends no response.
	// Default: false.
	ProvideResponse bool

	// Stdin is handed to the plugin in interactive mode, and only when it
	// is a terminal. Default: os.Stdin.
	Stdin *os.File
	// Stderr receives the plugin's stderr, as client-go passes it through.
	// Default: os.Stderr. Errors never quote it: a plugin may print
	// anything there, even its token; they say where it went.
	Stderr io.Writer
}

// Exec returns a handler that runs a client-go credential plugin
// (client.authentication.k8s.io), as kubectl does: aws eks get-token,
// gke-gcloud-auth-plugin, kubelogin and the like. The plugin runs without a
// shell, in a process group of its own (on unix), under the login's context:
// a timeout or cancellation kills the group, and so does the plugin's exit,
// so that a child it left behind cannot hold its output open; what it
// printed before it exited is its output. Its token or client certificate becomes the credential, and
// its expirationTimestamp the credential's Expiration, so that the vault
// reruns it in the background before it expires (no timestamp: the
// credential lives until the server rejects it).
//
// Errors name the plugin and what went wrong (its exit code or signal, and
// where its stderr went); they quote neither its stderr nor its stdout.
//
// A plugin that a native login serves (UseNative) is not run: the native
// login gives the credential, when the plugin policy allows it.
//
// The handler is named "exec <command>", the command without its
// directory, and never its arguments or environment, which may hold
// secrets; its metric label is "exec".
func Exec(cfg ExecConfig) login.Handler {
	return login.Named("exec "+filepath.Base(cfg.Command), "exec", func(ctx context.Context) (*login.ConnectionInfo, error) {
		if n, ok := nativeFor(cfg.ExecConfig); ok {
			return runNative(ctx, cfg, n)
		}
		out, err := cfg.run(ctx)
		held := errors.Is(err, errStdoutHeldOpen)
		if err != nil && !held {
			return nil, err
		}
		r, err := parseExecCredential(cfg.APIVersion, out)
		if err != nil {
			if held {
				return nil, fmt.Errorf("handlers: exec plugin %q: %w (a process it left behind, out of its process group, held stdout open after it exited)", cfg.Command, err)
			}
			return nil, fmt.Errorf("handlers: exec plugin %q: %w", cfg.Command, err)
		}
		info := clusterPart(cfg.Cluster)
		info.Token, info.CertificateData, info.PrivateKeyData, info.Expiration = r.token, r.cert, r.key, r.expiration
		return &info, nil
	})
}

// clusterPart keeps what a ConnectionInfo says about the cluster, none of
// its authentication.
func clusterPart(c login.ConnectionInfo) login.ConnectionInfo {
	return login.ConnectionInfo{
		Server: c.Server, CAPath: c.CAPath, CAData: c.CAData, Insecure: c.Insecure,
		TLSServerName: c.TLSServerName, ProxyURL: c.ProxyURL,
		DefaultNamespace: c.DefaultNamespace, Priority: c.Priority,
	}
}

// run runs the plugin and returns its stdout.
func (cfg *ExecConfig) run(ctx context.Context) ([]byte, error) {
	name := cfg.Command
	if name == "" {
		return nil, login.Permanent(errors.New("handlers: exec plugin has no command"))
	}
	if err := policyAllows(cfg.PluginPolicy, name); err != nil {
		return nil, err // before anything of the plugin's runs
	}
	if err := kubeconf.PluginEnvAllowed(cfg.PluginPolicy, cfg.Env); err != nil {
		return nil, login.Permanent(fmt.Errorf("handlers: exec plugin %q: %w", name, err))
	}
	interactive, err := cfg.interactive()
	if err != nil {
		return nil, login.Permanent(fmt.Errorf("handlers: exec plugin %q: %w", name, err))
	}
	info, err := cfg.execInfo(interactive, cfg.response(ctx))
	if err != nil {
		return nil, login.Permanent(fmt.Errorf("handlers: exec plugin %q: %w", name, err))
	}

	cmd := exec.CommandContext(ctx, name, cfg.Args...)
	cmd.Env = os.Environ()
	for _, e := range cfg.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.Env = append(cmd.Env, "KUBERNETES_EXEC_INFO="+string(info))
	if interactive {
		cmd.Stdin = cfg.stdin()
	}
	stdout := &limitedBuffer{max: maxExecOutput}
	var pipes outputPipes
	defer pipes.close()
	if cmd.Stdout, err = pipes.add(stdout); err != nil {
		return nil, fmt.Errorf("handlers: exec plugin %q: %w", name, err)
	}
	if f, ok := cfg.stderr().(*os.File); ok {
		cmd.Stderr = f // the plugin writes to it itself
	} else if cmd.Stderr, err = pipes.add(cfg.stderr()); err != nil {
		return nil, fmt.Errorf("handlers: exec plugin %q: %w", name, err)
	}
	ownGroup(cmd)
	cmd.WaitDelay = execWaitDelay

	if err = cmd.Start(); err == nil {
		pipes.start()
		err = cmd.Wait()
		// The plugin has exited (or was killed): what it left behind in
		// its group goes too, so that nothing holds its output.
		endGroup(cmd)
		pipes.finish(ctx, execWaitDelay)
	}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		msg := fmt.Sprintf("handlers: exec plugin %q not found", name)
		if cfg.InstallHint != "" {
			msg += ": " + cfg.InstallHint
		}
		return nil, login.Permanent(errors.New(msg))
	case ctx.Err() != nil:
		return nil, fmt.Errorf("handlers: exec plugin %q stopped (stderr went to %s): %w", name, cfg.stderrName(), context.Cause(ctx))
	case errors.As(err, &exitErr):
		return nil, fmt.Errorf("handlers: exec plugin %q %s (stderr went to %s)", name, exitStatus(exitErr), cfg.stderrName())
	default:
		return nil, fmt.Errorf("handlers: exec plugin %q: %w", name, err)
	}
	if stdout.overflow {
		return nil, fmt.Errorf("handlers: exec plugin %q wrote more than %d bytes", name, maxExecOutput)
	}
	if pipes.heldOpen {
		// A process out of the plugin's group holds stdout: what came
		// before the plugin exited is taken as the whole output.
		return stdout.buf.Bytes(), errStdoutHeldOpen
	}
	return stdout.buf.Bytes(), nil
}

// interactive decides whether the plugin may talk to the user.
func (cfg *ExecConfig) interactive() (bool, error) {
	mode := cfg.InteractiveMode
	if mode == "" {
		if cfg.APIVersion == execV1 {
			return false, errors.New("interactiveMode must be set for client.authentication.k8s.io/v1")
		}
		mode = clientcmdapi.IfAvailableExecInteractiveMode
	}
	stdin := cfg.stdin()
	terminal := stdin != nil && term.IsTerminal(int(stdin.Fd()))
	switch mode {
	case clientcmdapi.NeverExecInteractiveMode:
		return false, nil
	case clientcmdapi.IfAvailableExecInteractiveMode:
		return terminal && !cfg.StdinUnavailable, nil
	case clientcmdapi.AlwaysExecInteractiveMode:
		// As client-go: the terminal first, then whether the kubeconfig
		// says it is unavailable, with its message.
		if !terminal {
			return false, errors.New("interactiveMode is Always, but stdin is not a terminal")
		}
		if cfg.StdinUnavailable {
			msg := "interactiveMode is Always, but standard input is unavailable"
			if cfg.StdinUnavailableMessage != "" {
				msg += ": " + cfg.StdinUnavailableMessage
			}
			return false, errors.New(msg)
		}
		return true, nil
	default:
		return false, fmt.Errorf("interactiveMode %q is not Never, IfAvailable or Always", mode)
	}
}

func (cfg *ExecConfig) stdin() *os.File {
	if cfg.Stdin != nil {
		return cfg.Stdin
	}
	return os.Stdin
}

func (cfg *ExecConfig) stderr() io.Writer {
	if cfg.Stderr != nil {
		return cfg.Stderr
	}
	return os.Stderr
}

// stderrName says where the plugin's stderr goes, for error messages.
func (cfg *ExecConfig) stderrName() string {
	switch w := cfg.Stderr.(type) {
	case nil:
		return "this process's stderr"
	case *os.File:
		if w == os.Stderr {
			return "this process's stderr"
		}
		return fmt.Sprintf("ExecConfig.Stderr (file %s)", w.Name())
	default:
		return fmt.Sprintf("ExecConfig.Stderr (%T)", w)
	}
}

// execInfo is KUBERNETES_EXEC_INFO: an ExecCredential with the spec only,
// and spec.response when response is not nil.
func (cfg *ExecConfig) execInfo(interactive bool, response *execResponse) ([]byte, error) {
	var cluster *clientauthv1.Cluster
	if cfg.ProvideClusterInfo {
		c, err := cfg.cluster()
		if err != nil {
			return nil, err
		}
		cluster = c
	}
	var spec any
	switch cfg.APIVersion {
	case execV1:
		spec = specV1{
			ExecCredentialSpec: clientauthv1.ExecCredentialSpec{Interactive: interactive, Cluster: cluster},
			Response:           response,
		}
	case execV1beta1:
		s := clientauthv1beta1.ExecCredentialSpec{Interactive: interactive}
		if cluster != nil {
			s.Cluster = &clientauthv1beta1.Cluster{
				Server: cluster.Server, TLSServerName: cluster.TLSServerName,
				InsecureSkipTLSVerify: cluster.InsecureSkipTLSVerify, CertificateAuthorityData: cluster.CertificateAuthorityData,
				ProxyURL: cluster.ProxyURL, DisableCompression: cluster.DisableCompression, Config: cluster.Config,
			}
		}
		spec = specV1beta1{ExecCredentialSpec: s, Response: response}
	default:
		return nil, fmt.Errorf("apiVersion %q is not supported (want %s or %s)", cfg.APIVersion, execV1, execV1beta1)
	}
	return json.Marshal(struct {
		metav1.TypeMeta `json:",inline"`
		Spec            any `json:"spec"`
	}{typeMeta(cfg.APIVersion), spec})
}

// cluster is the cluster information handed to the plugin.
func (cfg *ExecConfig) cluster() (*clientauthv1.Cluster, error) {
	ca := cfg.Cluster.CAData
	if cfg.Cluster.CAPath != "" {
		var err error
		if ca, err = os.ReadFile(cfg.Cluster.CAPath); err != nil {
			return nil, fmt.Errorf("reading the cluster's CA: %w", err)
		}
	}
	ca, err := pemdata.Decode(ca)
	if err != nil {
		return nil, fmt.Errorf("the cluster's CA is %w", err)
	}
	c := &clientauthv1.Cluster{
		Server:                   cfg.Cluster.Server,
		TLSServerName:            cfg.Cluster.TLSServerName,
		InsecureSkipTLSVerify:    cfg.Cluster.Insecure,
		CertificateAuthorityData: ca,
		ProxyURL:                 cfg.Cluster.ProxyURL,
		DisableCompression:       cfg.DisableCompression,
	}
	if cfg.Config != nil {
		c.Config = runtime.RawExtension{Object: cfg.Config}
	}
	return c, nil
}

func typeMeta(apiVersion string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: execCredentialKind}
}

// limitedBuffer keeps up to max bytes and notes that more came. It holds
// its buffer in a field: an embedded bytes.Buffer would lend it ReadFrom,
// and io.Copy would fill that without a limit.
type limitedBuffer struct {
	buf      bytes.Buffer
	max      int
	overflow bool
}

// Write takes all of p, so the plugin is not stopped by a short write, and
// keeps what fits.
func (b *limitedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if room := b.max - b.buf.Len(); n > room {
		b.overflow = true
		p = p[:max(room, 0)]
	}
	b.buf.Write(p)
	return n, nil
}
