package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// completionScripts hook a shell into urfave/cli's --generate-bash-completion
// protocol, so every command and flag completes without a generated file.
var completionScripts = map[string]string{
	"bash": `_devbox_complete() {
  local cur words
  cur="${COMP_WORDS[COMP_CWORD]}"
  words=$("${COMP_WORDS[0]}" "${COMP_WORDS[@]:1:COMP_CWORD-1}" --generate-bash-completion 2>/dev/null)
  COMPREPLY=($(compgen -W "${words}" -- "${cur}"))
}
complete -o default -F _devbox_complete devbox
`,
	"zsh": `#compdef devbox
_devbox() {
  local -a opts
  opts=("${(@f)$(${words[1]} ${words[@]:1:$((CURRENT-2))} --generate-bash-completion 2>/dev/null)}")
  _describe 'values' opts
}
compdef _devbox devbox
`,
}

var completionCommand = &cli.Command{
	Name:      "completion",
	Usage:     "print a shell completion script (bash or zsh)",
	ArgsUsage: "bash|zsh",
	Description: `Load it in the current shell with:
   source <(devbox completion bash)`,
	Action: func(c *cli.Context) error {
		if c.NArg() != 1 {
			return fmt.Errorf("completion: want one argument, bash or zsh")
		}
		s, ok := completionScripts[c.Args().First()]
		if !ok {
			return fmt.Errorf("completion: unknown shell %q (want bash or zsh)", c.Args().First())
		}
		_, err := fmt.Fprint(c.App.Writer, s)
		return err
	},
}
