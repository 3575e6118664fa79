package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/lockbench/lockbench/backends"
)

// endpointFlags point backends at servers lockbench does not start: your
// own cluster, with its credentials and TLS. A backend given endpoints
// runs against them; faults that need to break servers are then skipped
// for it. The flags are the backends' own (backends.Endpoints):
// --<backend>-addrs for each, the credential flags of each family of
// servers once, and the flags that set a backend's params.
type endpointFlags struct {
	addrs  map[string]*[]string          // by backend
	params map[string]map[string]*string // by backend, then param
	auth   map[string]*authFlags         // by family (Auth.Flag)
}

// authFlags are the credentials of one family of servers.
type authFlags struct {
	backends.Auth
	user, password string
	tls            tlsFlags
}

type tlsFlags struct {
	ca, cert, key string
	insecure      bool
}

// register adds the --<prefix>-tls-* flags of one kind of server: name
// is what the help calls it, servers what the CA verifies.
func (t *tlsFlags) register(fl *pflag.FlagSet, prefix, name, servers string) {
	fl.StringVar(&t.ca, prefix+"-tls-ca", "", "CA certificate (PEM) to verify "+servers+"; turns TLS on")
	fl.StringVar(&t.cert, prefix+"-tls-cert", "", "client certificate (PEM) for "+name+"; turns TLS on")
	fl.StringVar(&t.key, prefix+"-tls-key", "", "client key (PEM) for "+name)
	fl.BoolVar(&t.insecure, prefix+"-tls-insecure", false, "use TLS to "+name+" without verifying the server")
}

// register adds the endpoint flags of every registered backend to fl.
func (e *endpointFlags) register(fl *pflag.FlagSet) {
	e.addrs, e.params, e.auth = map[string]*[]string{}, map[string]map[string]*string{}, map[string]*authFlags{}
	ds := backends.Descriptors()
	var families []*authFlags
	users := map[string][]string{} // family → its backends
	for _, d := range ds {
		ep := d.Endpoints
		if ep.Flag == "" {
			continue
		}
		e.addrs[d.Name] = fl.StringSlice(ep.Flag+"-addrs", nil, ep.Usage+addrsNote(d, ds))
		for _, p := range ep.Params {
			if e.params[d.Name] == nil {
				e.params[d.Name] = map[string]*string{}
			}
			e.params[d.Name][p.Param] = fl.String(p.Flag, "", p.Usage)
		}
		if a := ep.Auth; a.Flag != "" {
			if e.auth[a.Flag] == nil {
				e.auth[a.Flag] = &authFlags{Auth: a}
				families = append(families, e.auth[a.Flag])
			}
			users[a.Flag] = append(users[a.Flag], d.Name)
		}
	}
	for _, a := range families {
		user := a.User
		if bs := users[a.Flag]; len(bs) > 1 {
			user += " (" + strings.Join(bs, ", ") + ")"
		}
		env := "LOCKBENCH_" + strings.ToUpper(a.Flag) + "_PASSWORD"
		fl.StringVar(&a.user, a.Flag+"-username", "", user)
		fl.StringVar(&a.password, a.Flag+"-password", os.Getenv(env), a.Name+" password (default $"+env+")")
		if a.TLS != "" {
			a.tls.register(fl, a.Flag, a.Name, a.TLS)
		}
	}
}

// addrsNote says, for the help of d's --<flag>-addrs, which backend's
// addresses d uses when its own are not given, and which backends use
// d's.
func addrsNote(d backends.Descriptor, ds []backends.Descriptor) string {
	var note []string
	for _, o := range ds {
		if o.Name == d.Endpoints.Or && o.Endpoints.Flag != "" {
			note = append(note, "default: --"+o.Endpoints.Flag+"-addrs")
		}
		if o.Endpoints.Or == d.Name && o.Endpoints.Flag != "" {
			note = append(note, fmt.Sprintf("and of %s, unless --%s-addrs", o.Name, o.Endpoints.Flag))
		}
	}
	if len(note) == 0 {
		return ""
	}
	return " (" + strings.Join(note, "; ") + ")"
}

// configs returns the external endpoints by backend name.
func (e *endpointFlags) configs() (map[string]backends.Config, error) {
	type creds struct {
		files *backends.TLSFiles
		tls   *tls.Config
	}
	loaded := map[string]creds{}
	for flag, a := range e.auth {
		files, c, err := a.tls.files()
		if err != nil {
			return nil, fmt.Errorf("%s TLS: %w", flag, err)
		}
		loaded[flag] = creds{files, c}
	}
	out := map[string]backends.Config{}
	for _, d := range backends.Descriptors() {
		ep := d.Endpoints
		if e.addrs[d.Name] == nil {
			continue
		}
		addrs := *e.addrs[d.Name]
		if or := e.addrs[ep.Or]; len(addrs) == 0 && or != nil {
			addrs = *or
		}
		if len(addrs) == 0 {
			continue
		}
		c := backends.Config{Addrs: addrs}
		if a := e.auth[ep.Auth.Flag]; a != nil {
			l := loaded[ep.Auth.Flag]
			c.Username, c.Password, c.TLS, c.TLSFiles = a.user, a.password, l.tls, l.files
		}
		for param, v := range e.params[d.Name] {
			if *v != "" {
				if c.Params == nil {
					c.Params = map[string]string{}
				}
				c.Params[param] = *v
			}
		}
		out[d.Name] = c
	}
	return out, nil
}

// files returns the TLS files the flags name, or nil when they ask for
// no TLS. The configuration is loaded once here, so that a bad file fails
// the run before any case.
func (t tlsFlags) files() (*backends.TLSFiles, *tls.Config, error) {
	f := backends.TLSFiles{CA: t.ca, Cert: t.cert, Key: t.key, Insecure: t.insecure}
	c, err := f.Load()
	if c == nil || err != nil {
		return nil, nil, err
	}
	return &f, c, nil
}
