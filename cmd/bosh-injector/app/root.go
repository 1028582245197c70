// Package app holds bosh-injector's command-line interface: one cobra command
// per subcommand, each a thin layer over the packages that do the work.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/bosh-injector/bosh-injector/gather/model/variables"
)

// exitError carries a process exit code out of a command whose failure has
// already been reported (for example a director-format error list).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// globalOptions are the flags every subcommand shares.
type globalOptions struct {
	logLevel  string
	logFormat string
	// secrets are the variable values the command has seen; stderr (logs,
	// warnings, errors) never shows them.
	secrets *variables.Redactor
}

// Main runs the CLI with args and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	root := newRootCommand(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var exit exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.code
	default:
		fmt.Fprintln(root.ErrOrStderr(), "Error:", err)
		return 1
	}
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	opts := &globalOptions{secrets: &variables.Redactor{}}
	root := &cobra.Command{
		Use:           "bosh-injector",
		Short:         "Run BOSH releases on Kubernetes without a BOSH director",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Flags are checked before any command runs, so a typo is an
		// error even for commands that log little.
		PersistentPreRunE: func(*cobra.Command, []string) error { return opts.validate() },
	}
	root.SetOut(stdout)
	root.SetErr(opts.secrets.Writer(stderr))
	root.PersistentFlags().StringVar(&opts.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.PersistentFlags().StringVar(&opts.logFormat, "log-format", "json", "log format: json or console")
	for _, add := range subcommands {
		root.AddCommand(add(opts))
	}
	return root
}

// subcommands are registered by each subcommand's file, so adding a command
// touches only its own file.
var subcommands []func(*globalOptions) *cobra.Command

func register(f func(*globalOptions) *cobra.Command) { subcommands = append(subcommands, f) }

// logLevels are the values of --log-level.
var logLevels = []string{"debug", "info", "warn", "error"}

func (o *globalOptions) validate() error {
	if !slices.Contains(logLevels, o.logLevel) {
		return fmt.Errorf("--log-level: want one of %s, got %q", strings.Join(logLevels, ", "), o.logLevel)
	}
	if o.logFormat != "json" && o.logFormat != "console" {
		return fmt.Errorf("--log-format: want json or console, got %q", o.logFormat)
	}
	return nil
}

// logger builds the zap-backed logr.Logger every long-running command uses.
func (o *globalOptions) logger(w io.Writer) (logr.Logger, error) {
	if err := o.validate(); err != nil {
		return logr.Discard(), err
	}
	var level zapcore.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return logr.Discard(), fmt.Errorf("--log-level: %w", err)
	}
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	switch o.logFormat {
	case "json":
		enc = zapcore.NewJSONEncoder(encCfg)
	default: // console, as validate allows no other
		enc = zapcore.NewConsoleEncoder(encCfg)
	}
	core := zapcore.NewCore(enc, zapcore.AddSync(w), level)
	return zapr.NewLogger(zap.New(core)), nil
}
