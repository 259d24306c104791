//! The library's errors leave their cause out of their message (it is their
//! `source()`); the command's one error line still names it, once.

mod common;

use common::run;

#[test]
fn the_error_line_names_the_cause_once() {
    // ENOENT from the library's create: procfs makes no new files (a directory that
    // does not exist is refused by the command itself, before the library is asked).
    let cause = std::io::Error::from_raw_os_error(2).to_string();
    let path = "/proc/ringtrace-error-causes.ring";
    let o = run(&["create", "--capacity", "4096", path]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    assert!(
        o.stderr.starts_with("ringtrace: error: ") && o.stderr.contains("cannot create it: creating "),
        "{}",
        o.stderr
    );
    assert!(o.stderr.trim_end().ends_with(&format!(": {cause}")), "the cause is not named last: {}", o.stderr);
    assert_eq!(o.stderr.matches(&cause).count(), 1, "{}", o.stderr);
}
