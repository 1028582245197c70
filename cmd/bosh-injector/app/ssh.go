package app

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/bosh-injector/bosh-injector/gather/client/cluster"
	"github.com/bosh-injector/bosh-injector/gather/client/ssh"
)

func init() {
	register(func(*globalOptions) *cobra.Command {
		var o day2Options
		var command string
		var root bool
		cmd := &cobra.Command{
			Use:   "ssh -d DEPLOYMENT GROUP[/INDEX|/UUID] [-c COMMAND]",
			Short: "Open a shell in an instance, or run a command there, as `bosh ssh` does",
			Long: `ssh mirrors ` + "`bosh -d DEPLOYMENT ssh`" + `: a login shell in the instance, or -c
COMMAND run there, as vcap; --root runs as root, which ` + "`bosh ssh`" + `'s user
reaches through sudo. It is an exec (no SSH, no gateway flags) in the
instance's first process container, which sees the jobs, packages, logs and
data of the whole instance. A group alone names its instances; without -c it
must name one. The exit status is the command's; 255 (as ssh's for a lost
connection) when it never arrived, its output then possibly cut.`,
			Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				d, _, instances, err := o.instances(cmd.Context(), args)
				if err != nil {
					return err
				}
				if command == "" && len(instances) > 1 {
					return fmt.Errorf("'%s' names %d instances of deployment '%s': an interactive shell needs one, give group/index or group/uuid", args[0], len(instances), d.Name())
				}
				streams := cluster.Streams{Stdin: cmd.InOrStdin(), Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
				if command == "" {
					if fd := int(os.Stdin.Fd()); term.IsTerminal(fd) {
						state, err := term.MakeRaw(fd)
						if err != nil {
							return err
						}
						defer func() { _ = term.Restore(fd, state) }()
						streams.TTY = true
					}
				} else {
					streams.Stdin = nil
				}
				code := 0
				for _, in := range instances {
					c, err := ssh.Run(cmd.Context(), d, in, root, command, streams)
					if err != nil && c != ssh.ErrCut {
						return err
					}
					if err != nil {
						fmt.Fprintln(cmd.ErrOrStderr(), "Error:", err)
					}
					code = max(code, c)
				}
				if code != 0 {
					return exitError{code: code}
				}
				return nil
			},
		}
		o.flags(cmd, false)
		cmd.Flags().StringVarP(&command, "command", "c", "", "run this command instead of a shell")
		cmd.Flags().BoolVar(&root, "root", false, "run as root (sudo on a BOSH VM)")
		return cmd
	})
}
