package app

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/bosh-injector/bosh-injector/gather/render/ruby"
)

// renderOptions are the flags of the commands that render release
// templates.
type renderOptions struct{ timeout time.Duration }

func (o *renderOptions) register(f *pflag.FlagSet) {
	f.DurationVar(&o.timeout, "render-timeout", ruby.DefaultTimeout, "how long rendering all templates may take; Ruby and every process it started are killed then")
}

func (o *renderOptions) renderer(c *ruby.Confinement) (ruby.Renderer, error) {
	if o.timeout <= 0 {
		return ruby.Renderer{}, fmt.Errorf("--render-timeout %s: must be positive", o.timeout)
	}
	return ruby.Renderer{Timeout: o.timeout, Confinement: c}, nil
}

// offline is the renderer of release templates on the user's machine:
// Ruby reads only the releases (the DIRs of --release NAME=DIR) and its own
// installation, writes and runs nothing; without Landlock it warns on
// stderr and renders unconfined.
func (o *renderOptions) offline(stderr io.Writer, releases []string) (ruby.Renderer, error) {
	c, err := ruby.ConfineOffline(releaseDirs(releases)...)
	if err != nil && !errors.Is(err, ruby.ErrNoRuby) {
		fmt.Fprintf(stderr, "%s: %v\n", ruby.OfflineUnconfined, err)
	}
	return o.renderer(c)
}
