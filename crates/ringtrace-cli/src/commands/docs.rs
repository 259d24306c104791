//! `ringtrace completions SHELL` and `ringtrace man`: generated from the command-line
//! definition, so they always match it.

use clap_complete::Shell;

use crate::failure::Failure;
use crate::output::stdout_err;

/// Prints the completion script of `shell` for `cmd`.
pub fn completions(mut cmd: clap::Command, shell: Shell) -> Result<(), Failure> {
    let name = cmd.get_name().to_owned();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut out);
    write_stdout(&out)
}

/// Prints the man page (roff) of `cmd`: `ringtrace man | man -l -`.
pub fn man(cmd: clap::Command) -> Result<(), Failure> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out).map_err(|e| Failure::msg(format!("cannot render: {e}")))?;
    write_stdout(&out)
}

fn write_stdout(bytes: &[u8]) -> Result<(), Failure> {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    o.write_all(bytes).and_then(|()| o.flush()).map_err(stdout_err)
}
