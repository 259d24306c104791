//! `ringtrace completions SHELL` and `ringtrace man`: generated from the command-line
//! definition, so they always match it. One man page per subcommand
//! (`ringtrace-stat(1)`, as git and bpftool do), each with SYNOPSIS, DESCRIPTION,
//! OPTIONS, SOURCE, EXIT STATUS, EXAMPLES and SEE ALSO; the `ringtrace(1)` page lists
//! exactly those pages.

use std::io::Write;
use std::path::Path;

use clap_complete::Shell;
use clap_mangen::Man;

use crate::destination::Output;
use crate::failure::Failure;
use crate::output::stdout_err;

/// The subcommands `ringtrace man SUBCOMMAND` has a page for: every one (a test checks
/// the list against the definition). The parser refuses any other name.
pub const MAN_PAGES: [&str; 12] = [
    "stat",
    "tail",
    "consume",
    "snapshot",
    "decode",
    "export",
    "create",
    "write",
    "demo",
    "ship",
    "completions",
    "man",
];

/// Prints the completion script of `shell` for `cmd`.
pub fn completions(mut cmd: clap::Command, shell: Shell) -> Result<(), Failure> {
    let name = cmd.get_name().to_owned();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut out);
    write_stdout(&out)
}

/// Prints the page of `page` (a subcommand; none: the `ringtrace` page), or writes
/// every page into `dir`.
pub fn man(cmd: clap::Command, page: Option<&str>, dir: Option<&Path>) -> Result<(), Failure> {
    let cmd = {
        let mut c = cmd;
        c.build();
        c
    };
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir).map_err(|e| Failure::msg(format!("cannot make {}: {e}", dir.display())))?;
        for (name, roff) in pages(&cmd)? {
            let file = dir.join(format!("{name}.1"));
            let err = |e: std::io::Error| Failure::msg(format!("cannot write {}: {e}", file.display()));
            let mut out = Output::create_public(&file).map_err(err)?;
            out.file().write_all(&roff).map_err(err)?;
            out.commit().map_err(err)?;
        }
        return Ok(());
    }
    let roff = match page {
        None => top_page(&cmd)?,
        // A name without a page is refused as a usage error by the parser
        // ([`MAN_PAGES`]); this one is a failure only if the two disagree.
        Some(name) => {
            let sub = subcommands(&cmd).find(|s| s.get_name() == name).ok_or_else(|| {
                let names: Vec<_> = subcommands(&cmd).map(|s| s.get_name()).collect();
                Failure::msg(format!("no page for `{name}`: the subcommands are {}", names.join(", ")))
            })?;
            sub_page(sub)?
        }
    };
    write_stdout(&roff)
}

/// The subcommands that have pages (not clap's `help`).
fn subcommands(cmd: &clap::Command) -> impl Iterator<Item = &clap::Command> {
    cmd.get_subcommands().filter(|s| s.get_name() != "help" && !s.is_hide_set())
}

/// Every page: (file stem, roff).
fn pages(cmd: &clap::Command) -> Result<Vec<(String, Vec<u8>)>, Failure> {
    let mut all = vec![("ringtrace".to_owned(), top_page(cmd)?)];
    for sub in subcommands(cmd) {
        all.push((format!("ringtrace-{}", sub.get_name()), sub_page(sub)?));
    }
    Ok(all)
}

fn render_err(e: std::io::Error) -> Failure {
    Failure::msg(format!("cannot render the page: {e}"))
}

/// The sections clap_mangen renders from the definition: title, NAME, SYNOPSIS,
/// DESCRIPTION, OPTIONS.
fn head(cmd: clap::Command) -> Result<Vec<u8>, Failure> {
    let man = Man::new(cmd);
    let mut w = Vec::new();
    man.render_title(&mut w).map_err(render_err)?;
    man.render_name_section(&mut w).map_err(render_err)?;
    man.render_synopsis_section(&mut w).map_err(render_err)?;
    man.render_description_section(&mut w).map_err(render_err)?;
    man.render_options_section(&mut w).map_err(render_err)?;
    Ok(w)
}

fn top_page(cmd: &clap::Command) -> Result<Vec<u8>, Failure> {
    let mut w = head(cmd.clone())?;
    section(&mut w, "COMMANDS");
    for sub in subcommands(cmd) {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        w.extend_from_slice(format!(".TP\n\\fBringtrace\\-{}\\fR(1)\n{}\n", sub.get_name(), text(&about)).as_bytes());
    }
    source_section(&mut w);
    exit_section(&mut w);
    section(&mut w, "EXAMPLES");
    examples(
        &mut w,
        &[
            ("A flight recorder across processes, shown live", "ringtrace demo"),
            ("A ring file, a writer and a consumer", "ringtrace create /dev/shm/app.ring --capacity 1MiB"),
            ("", "seq 1 100000 | ringtrace write /dev/shm/app.ring --wait &"),
            ("", "ringtrace consume /dev/shm/app.ring -n 100000 > lines.txt"),
            ("Every page, for man(1)", "ringtrace man --dir /usr/local/share/man/man1"),
        ],
    );
    section(&mut w, "SEE ALSO");
    let names: Vec<_> = subcommands(cmd).map(|s| format!("\\fBringtrace\\-{}\\fR(1)", s.get_name())).collect();
    w.extend_from_slice(format!("{}\n", names.join(", ")).as_bytes());
    Ok(w)
}

fn sub_page(sub: &clap::Command) -> Result<Vec<u8>, Failure> {
    let name = sub.get_name().to_owned();
    let page = sub.clone().name(format!("ringtrace-{name}")).bin_name(format!("ringtrace {name}"));
    let mut w = head(page)?;
    if sub.get_arguments().any(|a| a.get_id() == "source") {
        source_section(&mut w);
    }
    exit_section(&mut w);
    let ex = EXAMPLES.iter().filter(|(cmd, _, _)| *cmd == name).map(|(_, what, line)| (*what, *line));
    let ex: Vec<_> = ex.collect();
    if !ex.is_empty() {
        section(&mut w, "EXAMPLES");
        examples(&mut w, &ex);
    }
    section(&mut w, "SEE ALSO");
    w.extend_from_slice(b"\\fBringtrace\\fR(1)\n");
    Ok(w)
}

/// Examples per subcommand: (subcommand, what it does, command line).
const EXAMPLES: &[(&str, &str, &str)] = &[
    ("stat", "What a ring file holds and who is attached", "ringtrace stat /dev/shm/app.ring"),
    ("stat", "The same as one JSON object", "ringtrace stat --format json /dev/shm/app.ring"),
    ("stat", "A kernel BPF ring buffer map", "ringtrace stat bpf-pin:/sys/fs/bpf/events"),
    ("tail", "The 20 newest records", "ringtrace tail -n 20 /dev/shm/app.ring"),
    ("tail", "New records as they come, without consuming them", "ringtrace tail -f /dev/shm/app.ring"),
    ("tail", "The next record of a BPF map, waiting at most 2 s", "ringtrace tail -n 1 --timeout 2s bpf-id:42"),
    (
        "consume",
        "Drain a ring into a file until its writers are done",
        "ringtrace consume /dev/shm/app.ring > lines.txt",
    ),
    ("consume", "At most 1000 records, as JSON lines", "ringtrace consume -n 1000 --format json /dev/shm/app.ring"),
    ("snapshot", "Every record held, newest first", "ringtrace snapshot --reverse /dev/shm/app.ring"),
    (
        "snapshot",
        "A running program's flight recorder into a trace file",
        "ringtrace snapshot /dev/shm/app.rec -o app.rtt",
    ),
    ("decode", "A trace, one event a line", "ringtrace decode app.rtt"),
    ("decode", "The same as JSON lines", "ringtrace decode --format json app.rtt"),
    ("export", "For ui.perfetto.dev", "ringtrace export --format perfetto app.rtt -o app.pftrace"),
    ("export", "For babeltrace2", "ringtrace export --format ctf app.rtt -o app.ctf"),
    ("create", "A 1 MiB flight recorder", "ringtrace create /dev/shm/app.ring --capacity 1MiB --mode overwrite"),
    ("write", "One record per line, waiting for room", "seq 1 1000000 | ringtrace write /dev/shm/app.ring --wait"),
    ("write", "A file as one record", "ringtrace write /dev/shm/app.ring --whole config.json"),
    (
        "write",
        "Lines into a BPF user ring buffer map, waiting at most 2 s for its program to drain room",
        "ringtrace write bpf-pin:/sys/fs/bpf/commands --wait=2s commands.txt",
    ),
    ("demo", "Four producer processes for 10 seconds", "ringtrace demo --processes 4 --seconds 10"),
    (
        "ship",
        "A host's ring and recorder directory into a Kafka topic, until their writers are done",
        "ringtrace ship --to kafka://k1:9092,k2:9092/traces --host web-1 --state /var/lib/ringtrace/web-1.state --until-disconnected /dev/shm/app.ring /var/run/app-recorder",
    ),
    ("ship", "The same from a configuration file", "ringtrace ship --config /etc/ringtrace/ship.toml"),
    ("completions", "Bash completion", "ringtrace completions bash > /etc/bash_completion.d/ringtrace"),
    ("man", "This page", "ringtrace man man | man -l -"),
];

fn section(w: &mut Vec<u8>, title: &str) {
    if title.contains(' ') {
        w.extend_from_slice(format!(".SH \"{title}\"\n").as_bytes());
    } else {
        w.extend_from_slice(format!(".SH {title}\n").as_bytes());
    }
}

fn examples(w: &mut Vec<u8>, list: &[(&str, &str)]) {
    for (what, line) in list {
        if !what.is_empty() {
            w.extend_from_slice(format!(".PP\n{}:\n", text(what)).as_bytes());
        }
        w.extend_from_slice(format!(".PP\n.RS 4\n\\fB{}\\fR\n.RE\n", text(line)).as_bytes());
    }
}

fn source_section(w: &mut Vec<u8>) {
    section(w, "SOURCE");
    w.extend_from_slice(
        concat!(
            "A SOURCE is told apart by what it names:\n",
            ".TP\n\\fBbpf\\-pin:\\fIPATH\\fR\nA kernel BPF ring buffer map pinned in a bpffs.\n",
            ".TP\n\\fBbpf\\-id:\\fIN\\fR\nA kernel BPF ring buffer map by id, as \\fBbpftool map\\fR lists them.\n",
            ".TP\n\\fIDIRECTORY\\fR\nA ringtrace\\-tracing recorder directory (its rings and catalog), read live.\n",
            ".TP\n\\fIFILE\\fR\nA ring file, a channel file, a snapshot file or a trace file, told apart by its first bytes; ",
            "anything else is refused as not a ringtrace file. Files are read with pread, never mapped.\n",
        )
        .as_bytes(),
    );
}

fn exit_section(w: &mut Vec<u8>) {
    section(w, "EXIT STATUS");
    w.extend_from_slice(
        concat!(
            ".TP\n\\fB0\\fR\nSuccess, also when the reader of the output goes away (\\fB| head\\fR).\n",
            ".TP\n\\fB1\\fR\nAn error, said on one line of standard error: \\fBringtrace: error: \\fR...\n",
            ".TP\n\\fB2\\fR\nA usage error: an unknown option or a value out of its range.\n",
            ".TP\n\\fB128+N\\fR\nStopped by signal N (130 for Ctrl\\-C), after removing its temporary files.\n",
        )
        .as_bytes(),
    );
}

/// Text for a roff body line: backslashes escaped, hyphens as hyphens, no line
/// starting with a control character.
fn text(s: &str) -> String {
    let s = s.replace('\\', "\\e").replace('-', "\\-");
    if s.starts_with(['.', '\'']) {
        format!("\\&{s}")
    } else {
        s
    }
}

fn write_stdout(bytes: &[u8]) -> Result<(), Failure> {
    crate::output::stdout()?.write_all(bytes).map_err(stdout_err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn man_takes_the_name_of_every_page_and_no_other() {
        let mut cmd = crate::cli::Cli::command();
        cmd.build();
        let names: Vec<&str> = subcommands(&cmd).map(|s| s.get_name()).collect();
        assert_eq!(names, MAN_PAGES, "MAN_PAGES and the subcommands differ");
    }
}
