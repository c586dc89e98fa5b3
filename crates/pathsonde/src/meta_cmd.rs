//! `pathsonde completions SHELL` and `pathsonde man`: generated from the
//! clap definition itself, so they never fall behind the commands.

use crate::Failure;
use clap::{CommandFactory, Subcommand};
use clap_complete::Shell;

#[derive(Subcommand)]
pub enum MetaCommand {
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: Shell,
    },
    /// Print the man page (roff) for pathsonde(1); view it with `man -l -`.
    Man,
}

pub fn run(cmd: MetaCommand) -> Result<(), Failure> {
    let mut command = crate::Cli::command();
    let mut out = std::io::stdout();
    match cmd {
        MetaCommand::Completions { shell } => {
            clap_complete::generate(shell, &mut command, "pathsonde", &mut out);
            Ok(())
        }
        MetaCommand::Man => match clap_mangen::Man::new(command).render(&mut out) {
            Err(e) if crate::stdio::is_closed_pipe(&e) => crate::stdio::closed_pipe(),
            other => other.map_err(|e| Failure {
                exit: crate::exit::Exit::Internal,
                message: format!("writing the man page: {e}"),
            }),
        },
    }
}
