// Command plugin is a client-go credential plugin for the handlers tests.
// PLUGIN_MODE says how it behaves; see the cases below.
package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	var info struct {
		APIVersion string `json:"apiVersion"`
	}
	_ = json.Unmarshal([]byte(os.Getenv("KUBERNETES_EXEC_INFO")), &info)
	if path := os.Getenv("PLUGIN_INFO_FILE"); path != "" { // KUBERNETES_EXEC_INFO as it came
		_ = os.WriteFile(path, []byte(os.Getenv("KUBERNETES_EXEC_INFO")), 0o600)
	}
	version := info.APIVersion
	if version == "" {
		version = "client.authentication.k8s.io/v1"
	}
	status := map[string]any{"token": "plugin-token-" + strconv.Itoa(count())}
	if ttl := os.Getenv("PLUGIN_TTL"); ttl != "" {
		d, _ := time.ParseDuration(ttl)
		status["expirationTimestamp"] = time.Now().Add(d).UTC().Format(time.RFC3339)
	}
	cred := map[string]any{"apiVersion": version, "kind": "ExecCredential", "status": status}

	switch os.Getenv("PLUGIN_MODE") {
	case "", "token":
	case "replay": // prints PLUGIN_OUTPUT as it is and exits with PLUGIN_EXIT_CODE (runs counted above)
		fmt.Print(os.Getenv("PLUGIN_OUTPUT"))
		code, _ := strconv.Atoi(os.Getenv("PLUGIN_EXIT_CODE"))
		os.Exit(code)
	case "cert":
		cert, _ := os.ReadFile(os.Getenv("PLUGIN_CERT"))
		key, _ := os.ReadFile(os.Getenv("PLUGIN_KEY"))
		cred["status"] = map[string]any{"clientCertificateData": string(cert), "clientKeyData": string(key)}
	case "echo-info": // the token carries KUBERNETES_EXEC_INFO back
		status["token"] = base64.StdEncoding.EncodeToString([]byte(os.Getenv("KUBERNETES_EXEC_INFO")))
	case "env": // the token is the value of the variable PLUGIN_ENV_NAME names
		status["token"] = os.Getenv(os.Getenv("PLUGIN_ENV_NAME"))
	case "fetch": // the token comes from GET PLUGIN_FETCH_URL, whose body is {"token":..., "expires":...}
		resp, err := http.Get(os.Getenv("PLUGIN_FETCH_URL"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		var got struct {
			Token   string `json:"token"`
			Expires string `json:"expires"`
		}
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			fmt.Fprintln(os.Stderr, "fetch failed:", resp.Status, err)
			os.Exit(2)
		}
		status["token"] = got.Token
		if got.Expires != "" {
			status["expirationTimestamp"] = got.Expires
		}
	case "stdin": // the token says what stdin held
		data, _ := io.ReadAll(os.Stdin)
		status["token"] = "stdin:" + strings.TrimSpace(string(data))
	case "not-json":
		fmt.Print("plugin-token-secret but not json")
		return
	case "wrong-version":
		cred["apiVersion"] = "client.authentication.k8s.io/v1alpha1"
	case "wrong-kind":
		cred["kind"] = "Secret"
	case "no-status":
		delete(cred, "status")
	case "cert-without-key":
		cred["status"] = map[string]any{"clientCertificateData": "-----BEGIN CERTIFICATE-----"}
	case "empty-status":
		cred["status"] = map[string]any{}
	case "fail":
		fmt.Print(`{"status":{"token":"stdout-secret-token"}}`)
		fmt.Fprintln(os.Stderr, "plugin: the identity provider said no")
		os.Exit(3)
	case "stderr-token": // prints a token to stderr, none to stdout, and fails
		fmt.Fprintln(os.Stderr, "plugin: here is stderr-secret-token-123 for debugging")
		os.Exit(1)
	case "stderr-token-garbage": // a token on stderr, garbage on stdout, exit 0
		fmt.Fprintln(os.Stderr, "plugin: here is stderr-secret-token-123 for debugging")
		fmt.Print("not a credential")
		return
	case "stderr-token-killed": // a token on stderr, then killed by a signal
		fmt.Fprintln(os.Stderr, "plugin: here is stderr-secret-token-123 for debugging")
		p, _ := os.FindProcess(os.Getpid())
		_ = p.Kill()
		time.Sleep(time.Minute)
	case "stderr-token-sleep": // a token on stderr, then hangs
		fmt.Fprintln(os.Stderr, "plugin: here is stderr-secret-token-123 for debugging")
		time.Sleep(time.Minute)
	case "noisy-stderr": // 1 MiB on stderr, then the credential
		fmt.Fprint(os.Stderr, strings.Repeat("noise ", 1<<20/6))
	case "huge":
		fmt.Print(strings.Repeat("x", 2<<20))
		return
	case "sleep":
		time.Sleep(time.Minute)
	case "daemon", "daemon-garbage", "daemon-fail", "daemon-stderr", "daemon-setsid":
		// starts a child that sleeps holding stdout (daemon-stderr: only
		// stderr; daemon-setsid: in a session of its own), writes its pid,
		// prints its output and exits at once
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), "PLUGIN_MODE=sleep")
		child.Stderr = os.Stderr
		if os.Getenv("PLUGIN_MODE") != "daemon-stderr" {
			child.Stdout = os.Stdout
		}
		if os.Getenv("PLUGIN_MODE") == "daemon-setsid" {
			newSession(child)
		}
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = os.WriteFile(os.Getenv("PLUGIN_PIDFILE"), []byte(strconv.Itoa(child.Process.Pid)), 0o600)
		switch os.Getenv("PLUGIN_MODE") {
		case "daemon-garbage":
			fmt.Print("not a credential")
			os.Exit(0)
		case "daemon-fail":
			os.Exit(2)
		}
	case "hang": // ignores the signals a polite stop sends, starts a child holding stdout, writes "plugin child" pids, hangs
		signal.Ignore(os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), "PLUGIN_MODE=sleep")
		child.Stdout = os.Stdout
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = os.WriteFile(os.Getenv("PLUGIN_PIDFILE"), []byte(fmt.Sprintf("%d %d", os.Getpid(), child.Process.Pid)), 0o600)
		fmt.Print(`{"apiVersion":`) // a partial credential
		for {
			time.Sleep(time.Hour)
		}
	case "child": // starts a child, writes its pid, and waits
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), "PLUGIN_MODE=sleep")
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = os.WriteFile(os.Getenv("PLUGIN_PIDFILE"), []byte(strconv.Itoa(child.Process.Pid)), 0o600)
		time.Sleep(time.Minute)
	}
	_ = json.NewEncoder(os.Stdout).Encode(cred)
}

// count increments the number in PLUGIN_COUNTER's file, if set.
func count() int {
	path := os.Getenv("PLUGIN_COUNTER")
	if path == "" {
		return 1
	}
	data, _ := os.ReadFile(path)
	n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	n++
	_ = os.WriteFile(path, []byte(strconv.Itoa(n)), 0o600)
	return n
}
